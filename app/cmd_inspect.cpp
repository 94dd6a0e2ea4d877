#include <cstdio>

#include "app/commands.h"

namespace lifeline::app {

CommandFn RegisterInspect(CLI::App& root) {
  root.add_subcommand("inspect", "Show a GGUF file's metadata and tensor table");
  return [] {
    std::fprintf(stderr, "lifeline inspect: not implemented yet\n");
    return 1;
  };
}

}  // namespace lifeline::app
