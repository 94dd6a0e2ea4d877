#include <cstdio>

#include "app/commands.h"

namespace lifeline::app {

CommandFn RegisterMakeModel(CLI::App& root) {
  root.add_subcommand("make-model", "Write a synthetic GGUF model with random weights");
  return [] {
    std::fprintf(stderr, "lifeline make-model: not implemented yet\n");
    return 1;
  };
}

}  // namespace lifeline::app
