// `lifeline make-model`: flags -> MakeModelOptions -> modelgen::MakeModel. Flags are taken as
// text and parsed by modelgen/flag_parse so a bad value is one line naming the flag (exit 2);
// failures while writing exit 1.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <tuple>

#include "app/commands.h"
#include "modelgen/flag_parse.h"
#include "modelgen/make_model.h"

namespace lifeline::app {
namespace {

struct MakeModelFlags {
  std::string arch = "llama";
  std::string dim, layers, heads, kv_heads, ffn, vocab, ctx = "4096", rope_base;
  std::string type, seed, threads, vocab_from, out, name;
  std::string head_dim, rope_dim, sliding_window, swa_pattern, rope_base_swa, attn_softcap,
      final_softcap, rope_orig_ctx, experts, experts_used, expert_ffn, shared_ffn;
  bool tied = false;
  std::string pooling;
  int64_t rerank_outputs = 0;
  std::string rerank_template;
};

int DefaultThreads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, modelgen::kMaxToolThreads));
}

// Required flags are checked here rather than by CLI11 so the error and exit code match the
// other flag errors.
Status Require(const char* flag, const std::string& value) {
  if (value.empty()) return InvalidArgument(std::string(flag) + " is required");
  return Status::Ok();
}

Result<int64_t> Int(const char* flag, const std::string& text, int64_t lo, int64_t hi) {
  LL_RETURN_IF_ERROR(Require(flag, text));
  return modelgen::ParseIntFlag(flag, text, lo, hi);
}

// The flags of one family or another (ranges and which --arch they suit are checked by
// ValidateModelShape).
Status FamilyOptions(const MakeModelFlags& f, modelgen::ModelShape* s) {
  constexpr int64_t kBig = int64_t{1} << 40;
  if (!f.head_dim.empty()) {
    LL_ASSIGN_OR_RETURN(s->head_dim_flag, Int("--head-dim", f.head_dim, 1, kBig));
  }
  if (!f.rope_dim.empty()) {
    LL_ASSIGN_OR_RETURN(s->rope_dim, Int("--rope-dim", f.rope_dim, 1, kBig));
  }
  if (!f.sliding_window.empty()) {
    LL_ASSIGN_OR_RETURN(s->sliding_window, Int("--sliding-window", f.sliding_window, 0, kBig));
  }
  if (!f.swa_pattern.empty()) {
    LL_ASSIGN_OR_RETURN(s->swa_pattern, Int("--swa-pattern", f.swa_pattern, 1, kBig));
  }
  for (const auto& [flag, text, dst] :
       {std::tuple<const char*, const std::string&, int64_t*>{"--experts", f.experts,
                                                              &s->n_expert},
        {"--experts-used", f.experts_used, &s->n_expert_used},
        {"--expert-ffn", f.expert_ffn, &s->expert_ffn},
        {"--shared-ffn", f.shared_ffn, &s->shared_ffn}}) {
    if (text.empty()) continue;
    LL_ASSIGN_OR_RETURN(*dst, Int(flag, text, 1, kBig));
  }
  if (!f.rope_orig_ctx.empty()) {
    LL_ASSIGN_OR_RETURN(s->rope_orig_ctx, Int("--rope-orig-ctx", f.rope_orig_ctx, 1, kBig));
  }
  for (const auto& [flag, text, dst] :
       {std::tuple<const char*, const std::string&, double*>{"--rope-base-swa",
                                                             f.rope_base_swa,
                                                             &s->rope_base_swa},
        {"--attn-softcap", f.attn_softcap, &s->attn_softcap},
        {"--final-softcap", f.final_softcap, &s->final_softcap}}) {
    if (text.empty()) continue;
    LL_ASSIGN_OR_RETURN(*dst, modelgen::ParsePositiveFloatFlag(flag, text));
  }
  return Status::Ok();
}

Result<modelgen::MakeModelOptions> ToOptions(const MakeModelFlags& f) {
  modelgen::MakeModelOptions o;
  o.shape.arch = f.arch;
  constexpr int64_t kBig = int64_t{1} << 40;  // ranges are checked by ValidateModelShape
  LL_ASSIGN_OR_RETURN(o.shape.dim, Int("--dim", f.dim, 1, kBig));
  LL_ASSIGN_OR_RETURN(o.shape.n_layers, Int("--layers", f.layers, 1, kBig));
  LL_ASSIGN_OR_RETURN(o.shape.n_head, Int("--heads", f.heads, 1, kBig));
  o.shape.n_head_kv = o.shape.n_head;
  if (!f.kv_heads.empty()) {
    LL_ASSIGN_OR_RETURN(o.shape.n_head_kv, Int("--kv-heads", f.kv_heads, 1, kBig));
  }
  LL_ASSIGN_OR_RETURN(o.shape.ffn, Int("--ffn", f.ffn, 1, kBig));
  if (!f.vocab.empty() && !f.vocab_from.empty()) {
    return InvalidArgument("--vocab and --vocab-from exclude each other");
  }
  if (!f.vocab.empty()) {
    LL_ASSIGN_OR_RETURN(o.shape.vocab, Int("--vocab", f.vocab, 1, kBig));
  }
  LL_ASSIGN_OR_RETURN(o.shape.ctx, Int("--ctx", f.ctx, 1, kBig));
  if (!f.rope_base.empty()) {
    LL_ASSIGN_OR_RETURN(o.shape.rope_base, modelgen::ParsePositiveFloatFlag("--rope-base",
                                                                         f.rope_base));
  }
  o.shape.tied = f.tied;
  o.shape.pooling = f.pooling;
  o.shape.rerank_outputs = f.rerank_outputs;
  o.shape.rerank_template = f.rerank_template;
  LL_RETURN_IF_ERROR(FamilyOptions(f, &o.shape));
  LL_RETURN_IF_ERROR(Require("--type", f.type));
  const auto ftype = modelgen::FileTypeFromName(f.type);
  if (!ftype) {
    return InvalidArgument("--type '" + f.type + "' is not one of " +
                           modelgen::FileTypeNamesJoined());
  }
  o.ftype = ftype->ftype;
  LL_RETURN_IF_ERROR(Require("--seed", f.seed));
  LL_ASSIGN_OR_RETURN(o.seed, modelgen::ParseUint64Flag("--seed", f.seed));
  o.threads = DefaultThreads();
  if (!f.threads.empty()) {
    LL_ASSIGN_OR_RETURN(const int64_t t, Int("--threads", f.threads, 1, modelgen::kMaxToolThreads));
    o.threads = static_cast<int>(t);
  }
  LL_RETURN_IF_ERROR(Require("-o", f.out));
  o.out_path = f.out;
  o.vocab_from = f.vocab_from;
  o.name = f.name;
  return o;
}

int Run(const MakeModelFlags& flags) {
  auto opts = ToOptions(flags);
  if (!opts.ok()) {
    std::fprintf(stderr, "lifeline make-model: %s\n", opts.status().message().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const Status s = modelgen::MakeModel(*opts);
  if (!s.ok()) {
    std::fprintf(stderr, "lifeline make-model: %s\n", s.message().c_str());
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "lifeline make-model: wrote %s (%s, seed %llu) in %.2f s\n",
               opts->out_path.c_str(), flags.type.c_str(),
               static_cast<unsigned long long>(opts->seed), elapsed_s);
  return 0;
}

}  // namespace

CommandFn RegisterMakeModel(CLI::App& root) {
  auto flags = std::make_shared<MakeModelFlags>();
  CLI::App* sub = root.add_subcommand(
      "make-model", "Write a synthetic GGUF model with random weights (llama.cpp layout)");
  sub->add_option("--arch", flags->arch,
                  std::string("Architecture: ") + modelgen::SupportedArchs() + " (default llama)");
  sub->add_option("--dim", flags->dim, "Embedding width (required)")->type_name("INT");
  sub->add_option("--layers", flags->layers, "Number of blocks (required)")->type_name("INT");
  sub->add_option("--heads", flags->heads, "Attention heads (required)")->type_name("INT");
  sub->add_option("--kv-heads", flags->kv_heads, "KV heads (default: --heads)")->type_name("INT");
  sub->add_option("--ffn", flags->ffn, "Feed-forward width (required)")->type_name("INT");
  sub->add_option("--vocab", flags->vocab, "Built-in synthetic SPM vocab size (default 32000)")
      ->type_name("INT");
  sub->add_option("--vocab-from", flags->vocab_from, "Copy tokenizer.* keys from this GGUF")
      ->type_name("FILE");
  sub->add_option("--ctx", flags->ctx, "context_length (default 4096)")->type_name("INT");
  sub->add_option("--rope-base", flags->rope_base, "rope.freq_base (default: arch's)")
      ->type_name("FLOAT");
  sub->add_flag("--tied", flags->tied, "No output.weight: the classifier reuses token_embd");
  sub->add_option("--pooling", flags->pooling,
                  "Embedding model: <arch>.pooling_type mean|cls|last|rank (default: absent)");
  sub->add_option("--rerank-outputs", flags->rerank_outputs,
                  "Reranker: a classifier head (cls.output) of N outputs")->type_name("INT");
  sub->add_option("--rerank-template", flags->rerank_template,
                  "Reranker: tokenizer.chat_template.rerank ({query}, {document})")->type_name("TEXT");
  sub->add_option("--head-dim", flags->head_dim,
                  "attention.key_length / value_length (default dim / heads)")
      ->type_name("INT");
  sub->add_option("--rope-dim", flags->rope_dim, "Rotated dims per head (default: all)")
      ->type_name("INT");
  sub->add_option("--sliding-window", flags->sliding_window,
                  "gemma2|gemma3: attention.sliding_window (default 4096 | 512)")
      ->type_name("INT");
  sub->add_option("--swa-pattern", flags->swa_pattern,
                  "gemma2|gemma3: attention.sliding_window_pattern (default: absent, 2 | 6)")
      ->type_name("INT");
  sub->add_option("--rope-base-swa", flags->rope_base_swa,
                  "gemma2|gemma3: rope.freq_base_swa of the sliding-window layers")
      ->type_name("FLOAT");
  sub->add_option("--attn-softcap", flags->attn_softcap, "gemma2: attn_logit_softcapping (50)")
      ->type_name("FLOAT");
  sub->add_option("--final-softcap", flags->final_softcap, "gemma2: final_logit_softcapping (30)")
      ->type_name("FLOAT");
  sub->add_option("--experts", flags->experts,
                  "Mixture of experts: experts per layer (qwen2moe|qwen3moe; llama: Mixtral)")
      ->type_name("INT");
  sub->add_option("--experts-used", flags->experts_used, "Experts each token uses (top-k)")
      ->type_name("INT");
  sub->add_option("--expert-ffn", flags->expert_ffn, "qwen*moe: expert width (default --ffn)")
      ->type_name("INT");
  sub->add_option("--shared-ffn", flags->shared_ffn,
                  "qwen2moe: shared expert width (default --ffn)")
      ->type_name("INT");
  sub->add_option("--rope-orig-ctx", flags->rope_orig_ctx,
                  "phi3: LongRoPE with this original context (factor tensors, attn_factor)")
      ->type_name("INT");
  sub->add_option("--type", flags->type, "Weight file type (required): " +
                                             modelgen::FileTypeNamesJoined());
  sub->add_option("--seed", flags->seed, "RNG seed (required)")->type_name("UINT64");
  sub->add_option("--threads", flags->threads, "Worker threads (output does not depend on it)")
      ->type_name("INT");
  sub->add_option("--name", flags->name, "general.name (default synthetic-ARCH-DIMxLAYERS)");
  sub->add_option("-o,--output", flags->out, "Output .gguf path (required)")->type_name("FILE");
  return [flags] { return Run(*flags); };
}

}  // namespace lifeline::app
