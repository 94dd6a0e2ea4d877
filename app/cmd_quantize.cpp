// `lifeline quantize IN.gguf OUT.gguf --type T`: flags -> QuantizeOptions -> modelgen::QuantizeModel.
// Bad flags exit 2 with one line naming the flag; an unreadable input or unwritable output
// exits 1 with the reader's / writer's message.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "app/commands.h"
#include "modelgen/flag_parse.h"
#include "modelgen/make_model.h"
#include "modelgen/quantize.h"

namespace lifeline::app {
namespace {

struct QuantizeFlags {
  std::string in, out, type, threads;
};

Result<modelgen::QuantizeOptions> ToOptions(const QuantizeFlags& f) {
  modelgen::QuantizeOptions o;
  if (f.in.empty()) return InvalidArgument("IN (input .gguf) is required");
  if (f.out.empty()) return InvalidArgument("OUT (output .gguf) is required");
  o.in_path = f.in;
  o.out_path = f.out;
  if (f.type.empty()) return InvalidArgument("--type is required");
  const auto ftype = modelgen::FileTypeFromName(f.type);
  if (!ftype) {
    return InvalidArgument("--type '" + f.type + "' is not one of " +
                           modelgen::FileTypeNamesJoined());
  }
  o.ftype = ftype->ftype;
  const unsigned hw = std::thread::hardware_concurrency();
  o.threads = hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, modelgen::kMaxToolThreads));
  if (!f.threads.empty()) {
    LL_ASSIGN_OR_RETURN(const int64_t t, modelgen::ParseIntFlag("--threads", f.threads, 1,
                                                             modelgen::kMaxToolThreads));
    o.threads = static_cast<int>(t);
  }
  o.warn = [](const std::string& m) {
    std::fprintf(stderr, "lifeline quantize: warning: %s\n", m.c_str());
  };
  return o;
}

int Run(const QuantizeFlags& flags) {
  auto opts = ToOptions(flags);
  if (!opts.ok()) {
    std::fprintf(stderr, "lifeline quantize: %s\n", opts.status().message().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto stats = modelgen::QuantizeModel(*opts);
  if (!stats.ok()) {
    std::fprintf(stderr, "lifeline quantize: %s\n", stats.status().message().c_str());
    return stats.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "lifeline quantize: wrote %s (%s): %d tensors converted, %d copied, in %.2f s\n",
               opts->out_path.c_str(), flags.type.c_str(), stats->tensors_converted,
               stats->tensors_copied, elapsed_s);
  return 0;
}

}  // namespace

CommandFn RegisterQuantize(CLI::App& root) {
  auto flags = std::make_shared<QuantizeFlags>();
  CLI::App* sub = root.add_subcommand(
      "quantize", "Re-encode a GGUF model's weight matrices to another type (llama.cpp mixes)");
  sub->add_option("IN", flags->in, "Input .gguf")->type_name("FILE");
  sub->add_option("OUT", flags->out, "Output .gguf")->type_name("FILE");
  sub->add_option("--type", flags->type, "Target file type (required): " +
                                             modelgen::FileTypeNamesJoined());
  sub->add_option("--threads", flags->threads, "Worker threads (output does not depend on it)")
      ->type_name("INT");
  return [flags] { return Run(*flags); };
}

}  // namespace lifeline::app
