#include <cstdio>

#include "app/commands.h"

namespace lifeline::app {

CommandFn RegisterRun(CLI::App& root) {
  root.add_subcommand("run", "Generate text from a prompt");
  return [] {
    std::fprintf(stderr, "lifeline run: not implemented yet\n");
    return 1;
  };
}

}  // namespace lifeline::app
