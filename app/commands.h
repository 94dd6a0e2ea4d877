// Subcommand registration. Each cmd_*.cpp adds one subcommand to the CLI11 app and returns a
// callback that runs it (returns the process exit status). main.cpp only wires them.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace lifeline::app {

using CommandFn = std::function<int()>;

CommandFn RegisterInspect(CLI::App& root);
CommandFn RegisterRun(CLI::App& root);
CommandFn RegisterTokenize(CLI::App& root);
CommandFn RegisterTemplate(CLI::App& root);
CommandFn RegisterMakeModel(CLI::App& root);
CommandFn RegisterQuantize(CLI::App& root);
CommandFn RegisterBenchModel(CLI::App& root);
CommandFn RegisterServe(CLI::App& root);
CommandFn RegisterBench(CLI::App& root);
CommandFn RegisterAnalyze(CLI::App& root);

}  // namespace lifeline::app
