// lifeline: one binary, subcommands. Wiring only: flags -> objects -> run.
#include <cstdio>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App root{"Lifeline: a latency-SLO-first LLM inference engine and server"};
  root.require_subcommand(1);
  root.set_help_all_flag("--help-all", "Show help for every subcommand");

  std::vector<std::pair<CLI::App*, lifeline::app::CommandFn>> commands;
  auto add = [&](lifeline::app::CommandFn fn) {
    commands.emplace_back(root.get_subcommands({}).back(), std::move(fn));
  };
  add(lifeline::app::RegisterInspect(root));
  add(lifeline::app::RegisterRun(root));
  add(lifeline::app::RegisterTokenize(root));
  add(lifeline::app::RegisterTemplate(root));
  add(lifeline::app::RegisterMakeModel(root));
  add(lifeline::app::RegisterQuantize(root));
  add(lifeline::app::RegisterBenchModel(root));
  add(lifeline::app::RegisterServe(root));
  add(lifeline::app::RegisterBench(root));
  add(lifeline::app::RegisterAnalyze(root));

  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return root.exit(e);
  }
  for (auto& [sub, fn] : commands) {
    if (sub->parsed()) return fn();
  }
  std::fprintf(stderr, "lifeline: no command given (see --help)\n");
  return 2;
}
