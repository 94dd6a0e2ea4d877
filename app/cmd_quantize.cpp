#include <cstdio>

#include "app/commands.h"

namespace lifeline::app {

CommandFn RegisterQuantize(CLI::App& root) {
  root.add_subcommand("quantize", "Convert a GGUF model's weights to another type");
  return [] {
    std::fprintf(stderr, "lifeline quantize: not implemented yet\n");
    return 1;
  };
}

}  // namespace lifeline::app
