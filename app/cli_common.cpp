#include "app/cli_common.h"

#include <cstdlib>
#include <optional>
#include <thread>

#include "base/cpu_affinity.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/dispatch.h"
#include "text/template/chat.h"

namespace lifeline::app {

int DefaultThreads() {
  // The affinity mask, not the machine: under `taskset` or a container's cpuset the process
  // may use fewer cores than the machine has, and a thread per machine core would then
  // oversubscribe the cores it has.
  const size_t allowed = AllowedCpus().size();
  const unsigned hw = allowed > 0 ? static_cast<unsigned>(allowed) : std::thread::hardware_concurrency();
  if (hw == 0) return 1;
  return hw > 8 ? 8 : static_cast<int>(hw);
}

void AddPinFlags(CLI::App* cmd, PinFlags* f) {
  cmd->add_flag("--pin", f->pin,
                "Pin compute thread i to the i-th CPU this process may run on");
  cmd->add_option("--cpus", f->cpus,
                  "Pin compute threads to these CPUs, in order (e.g. 0-3,6; at least one per thread)");
}

Result<std::vector<int>> PinCpusFor(const PinFlags& f, int n_threads) {
  return ResolvePinCpus(f.pin, f.cpus, n_threads, f.cpus.empty() ? "--pin" : "--cpus");
}

void AddEngineFlags(CLI::App* cmd, EngineFlags* f, const std::string& threads_help) {
  cmd->add_option("-t,--threads", f->threads, threads_help)->check(CLI::Range(0, 256));
  cmd->add_option("--isa", f->isa, "Force a kernel level: scalar, avx2, avx512");
  cmd->add_option("--kv-type", f->kv_type, "KV cache storage type: f16, f32, q8_0")
      ->capture_default_str();
  AddPinFlags(cmd, &f->pin);
}

Result<EngineChoice> ResolveEngineFlags(const EngineFlags& f) {
  EngineChoice c;
  LL_ASSIGN_OR_RETURN(c.kernels, SelectKernels(f.isa));
  LL_ASSIGN_OR_RETURN(c.kv_type, SelectKvType(f.kv_type));
  c.threads = f.threads > 0 ? f.threads : DefaultThreads();
  LL_ASSIGN_OR_RETURN(c.pin_cpus, PinCpusFor(f.pin, c.threads));
  return c;
}

void AddChatTemplateFlags(CLI::App* cmd, serving::ChatTemplateChoice* choice) {
  cmd->add_option("--chat-template", choice->preset,
                  "Use this built-in chat template instead of the GGUF's (" + chat::PresetNames() + ")");
  cmd->add_option("--chat-template-file", choice->file,
                  "Use the Jinja chat template in this file instead of the GGUF's");
}

Status CheckChatTemplateChoice(const serving::ChatTemplateChoice& choice) {
  if (!choice.preset.empty() && !choice.file.empty()) {
    return InvalidArgument("--chat-template and --chat-template-file exclude each other");
  }
  if (choice.preset.empty()) return Status::Ok();
  for (const chat::Preset& p : chat::Presets()) {
    if (choice.preset == p.name) return Status::Ok();
  }
  // Same wording as serving::ResolveChatTemplate gives after a load.
  return InvalidArgument("--chat-template: unknown chat template '" + choice.preset +
                         "'; known: " + chat::PresetNames());
}

Result<KvType> SelectKvType(const std::string& kv_type_flag) {
  const std::optional<KvType> t = ParseKvType(kv_type_flag);
  if (!t) {
    return InvalidArgument("--kv-type: unknown KV cache type '" + kv_type_flag +
                           "' (expected f16, f32 or q8_0)");
  }
  return *t;
}

Result<const KernelTable*> SelectKernels(const std::string& isa_flag) {
  std::string name = isa_flag;
  std::string source = "--isa";
  if (name.empty()) {
    const char* env = std::getenv("LIFELINE_ISA");
    if (env == nullptr || *env == '\0') return &BestKernels();
    name = env;
    source = "LIFELINE_ISA";
  }
  auto level = ParseIsaLevel(name);
  if (!level) {
    return InvalidArgument(source + ": unknown instruction-set level '" + name +
                           "' (expected scalar, avx2 or avx512)");
  }
  return &KernelsFor(*level);
}

Result<LoadedModel> LoadModel(const std::string& path, const KernelTable& kernels, bool mlock,
                              bool no_repack, bool no_mmap) {
  ModelLoadOptions load;
  load.repack = !no_repack;
  if (const char* env = std::getenv("LIFELINE_REPACK"); env != nullptr && *env != '\0') {
    const std::string v = env;
    if (v == "0" || v == "off") {
      load.repack = false;
    } else if (v != "1" && v != "on") {
      return InvalidArgument("LIFELINE_REPACK: unknown value '" + v + "' (expected 0, off, 1 or on)");
    }
  }
  GgufOpenOptions opts;
  opts.mlock = mlock;
  opts.copy_to_memory = no_mmap;
  LL_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path, opts));
  LoadedModel out;
  LL_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::FromGguf(*file));
  LL_ASSIGN_OR_RETURN(out.model, LlamaModel::Load(std::move(file), kernels, load));
  if (out.tokenizer->n_vocab() != out.model->config().n_vocab) {
    return DataLoss("tokenizer.ggml.tokens has " + std::to_string(out.tokenizer->n_vocab()) +
                    " entries but the model's vocabulary is " +
                    std::to_string(out.model->config().n_vocab));
  }
  return out;
}

}  // namespace lifeline::app
