#include <cstdio>

#include "app/commands.h"

namespace lifeline::app {

CommandFn RegisterTokenize(CLI::App& root) {
  root.add_subcommand("tokenize", "Tokenize stdin and print token ids");
  return [] {
    std::fprintf(stderr, "lifeline tokenize: not implemented yet\n");
    return 1;
  };
}

}  // namespace lifeline::app
