// Helpers shared by the subcommands: thread-count defaults, kernel-table selection (the one
// place the LIFELINE_ISA override is read), loading a model + tokenizer from a path, and the
// chat-template flags of `run --chat` and `template`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/kv_storage.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/chat_setup.h"

namespace lifeline::app {

// min(CPUs this process may run on, 8); never more compute threads than cores by default.
int DefaultThreads();

// --pin / --cpus LIST, shared by the subcommands that run a compute pool.
struct PinFlags {
  bool pin = false;  // pin compute thread i to the i-th CPU this process may run on
  std::string cpus;  // explicit CPU list ("0-3,6"); implies pinning
};
void AddPinFlags(CLI::App* cmd, PinFlags* f);
// The pool's pin list for n_threads (empty: no pinning); errors name the flag.
Result<std::vector<int>> PinCpusFor(const PinFlags& f, int n_threads);

// The engine flags of every command that runs a model (run, bench-model, serve):
// -t/--threads, --isa, --kv-type, --pin / --cpus, declared and resolved in one place.
struct EngineFlags {
  int threads = 0;              // 0: DefaultThreads()
  std::string isa;              // "": the best level the CPU has (or LIFELINE_ISA)
  std::string kv_type = "f16";
  PinFlags pin;
};
// `threads_help` says what the thread count applies to ("per model" for serve).
void AddEngineFlags(CLI::App* cmd, EngineFlags* f,
                    const std::string& threads_help = "Compute threads (default: cores, max 8)");
struct EngineChoice {
  const KernelTable* kernels = nullptr;
  KvType kv_type = KvType::kF16;
  int threads = 1;
  std::vector<int> pin_cpus;  // empty: no pinning
};
// Checks the flags before anything slow is loaded; errors name the flag.
Result<EngineChoice> ResolveEngineFlags(const EngineFlags& f);

// The kernel table for this process: the best the CPU supports, or a lower level forced by
// `isa_flag` ("scalar", "avx2", "avx512") or else the LIFELINE_ISA environment variable.
// Unknown names are an InvalidArgument naming the flag.
Result<const KernelTable*> SelectKernels(const std::string& isa_flag);

// The KV cache storage type named by --kv-type ("f16", "f32", "q8_0"); unknown names are an
// InvalidArgument naming the flag.
Result<KvType> SelectKvType(const std::string& kv_type_flag);

// --chat-template NAME / --chat-template-file FILE: the same two flags, help texts and checks
// wherever a command renders a chat prompt (serving::ResolveChatTemplate says which wins).
void AddChatTemplateFlags(CLI::App* cmd, serving::ChatTemplateChoice* choice);
// The checks that need no file, so a bad combination fails before anything slow is loaded:
// the two flags exclude each other, and a preset name must be a known one (InvalidArgument
// naming the flag; the known names listed).
Status CheckChatTemplateChoice(const serving::ChatTemplateChoice& choice);

struct LoadedModel {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Opens the GGUF (validating it), reads the tokenizer from its vocab, binds the weights, and
// repacks the matrices the kernel table asks for (ModelLoadOptions::repack) unless
// `no_repack` or the environment variable LIFELINE_REPACK=0 turns that off (for A/B runs and
// memory-tight hosts: repacked matrices live in anonymous memory, not the file mapping).
// An unknown LIFELINE_REPACK value is an InvalidArgument naming the variable.
// `no_mmap`: the file is read into private memory instead of mapped (GgufOpenOptions::
// copy_to_memory), so changing the file afterwards cannot affect the process.
Result<LoadedModel> LoadModel(const std::string& path, const KernelTable& kernels, bool mlock,
                              bool no_repack = false, bool no_mmap = false);

}  // namespace lifeline::app
