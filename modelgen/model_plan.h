// The shape of a synthetic model and its tensor plan: every tensor's llama.cpp name, ggml
// shape, storage type (from the quantization policy) and how its values are drawn. make-model
// turns the plan into a GGUF file; tests check the plan without writing anything.
//
// Initialisation (why these scales): weights are N(0, std^2) with std = 1/sqrt(fan_in), so a
// matmul maps O(1) inputs (RMSNorm makes every sublayer input RMS 1) to O(1) outputs. The two
// projections that write into the residual stream (attn_output, ffn_down) are further scaled
// by 1/sqrt(2 * layers), as in GPT-2, so the sum of 2 * layers residual updates stays O(1)
// instead of growing like sqrt(2 * layers). token_embd is N(0, 1) (the residual stream starts
// at RMS 1) unless the classifier is tied to it, where N(0, 1/dim) keeps logits O(1). Norm
// weights are 1.0 for llama / qwen2; for the other families every norm weight (including the
// per-head Q/K norms and Gemma's post-norms) is 1 + N(0, 0.1^2), so a norm whose weight a
// reader ignores changes the output. qwen2's q/k/v biases are N(0, 0.1^2): small next to the
// O(1) projections but non-zero, so a bias path that is skipped changes the output.
//
// Families (--arch) and what they add, with the tensor names, shapes and metadata keys
// llama.cpp reads (and its converters write) for each:
//   qwen3   attn_q_norm / attn_k_norm [head_dim] per layer; key_length / value_length.
//   gemma   no output.weight (the classifier is token_embd); key_length / value_length;
//           tokenizer.ggml.add_space_prefix false.
//   gemma2  gemma + post_attention_norm / post_ffw_norm; attn_logit_softcapping (50),
//           final_logit_softcapping (30), attention.sliding_window (4096) unless given.
//   gemma3  gemma2's norms + attn_q_norm / attn_k_norm; attention.sliding_window (512);
//           no soft caps; rope.freq_base 1e6 (the local layers use 1e4 unless --rope-base-swa).
//   qwen2moe / qwen3moe / llama with --experts (Mixtral): per layer ffn_gate_inp
//           [dim, experts] (the router, F32 as llama.cpp keeps it) and 3-D expert tensors
//           ffn_gate_exps / ffn_up_exps [dim, expert_ffn, experts], ffn_down_exps
//           [expert_ffn, dim, experts] in place of ffn_gate / ffn_up / ffn_down;
//           expert_count, expert_used_count, expert_feed_forward_length (qwen*moe).
//           qwen2moe adds q/k/v biases and a shared expert: ffn_gate_inp_shexp [dim] (its
//           sigmoid gate, N(0, 1/dim)), ffn_{gate,up,down}_shexp of width --shared-ffn
//           (expert_shared_feed_forward_length); qwen3moe adds the per-head Q/K norms.
//   phi3    attn_qkv (Q, K, V rows stacked) and ffn_up of 2 * ffn rows (gate then up), no
//           ffn_gate; with --rope-orig-ctx, LongRoPE: rope_factors_long / _short [rope_dim/2]
//           (fixed ramps: short 1 + 0.1 i / (n-1), long 1 + 15 (i / (n-1))^2), the original
//           context and rope.scaling.attn_factor = sqrt(1 + ln(ctx / orig) / ln(orig)) as
//           llama.cpp's converter computes it.
//
// Thread-safety: pure functions. Failures are InvalidArgument naming the offending flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/kernels/ggml_type.h"
#include "modelgen/quant_policy.h"

namespace lifeline::modelgen {

struct ModelShape {
  std::string arch = "llama";  // llama|qwen2|qwen3|gemma|gemma2|gemma3|phi3
  int64_t dim = 0;             // embedding_length
  int64_t n_layers = 0;        // block_count
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t ffn = 0;             // feed_forward_length
  int64_t vocab = 32000;
  int64_t ctx = 4096;          // context_length
  double rope_base = 0;        // 0: the architecture's default (llama 1e4, qwen2 1e6)
  bool tied = false;           // no output.weight; the classifier reuses token_embd
  int64_t head_dim_flag = 0;   // --head-dim (attention.key_length); 0: dim / heads
  int64_t rope_dim = 0;        // --rope-dim: rotated dims per head (partial rotary); 0: all
  int64_t sliding_window = -1; // --sliding-window (gemma2/gemma3); -1: the family's default
  int64_t swa_pattern = 0;     // --swa-pattern: attention.sliding_window_pattern; 0: absent
  double rope_base_swa = 0;    // --rope-base-swa: rope.freq_base_swa; 0: absent
  double attn_softcap = 0;     // --attn-softcap (gemma2); 0: the family's default
  double final_softcap = 0;    // --final-softcap (gemma2); 0: the family's default
  int64_t rope_orig_ctx = 0;   // --rope-orig-ctx (phi3 LongRoPE); 0: no LongRoPE
  int64_t n_expert = 0;        // --experts (qwen2moe, qwen3moe; llama: Mixtral); 0: dense
  int64_t n_expert_used = 0;   // --experts-used
  int64_t expert_ffn = 0;      // --expert-ffn (qwen*moe; default --ffn); llama uses --ffn
  int64_t shared_ffn = 0;      // --shared-ffn (qwen2moe; default --ffn)
  // Embedding / reranking files: --pooling (mean|cls|last|rank: <arch>.pooling_type; "":
  // absent), --rerank-outputs N (a classifier head cls.output.weight [dim, N] + .bias, F32,
  // N(0, 1/dim) and N(0, 0.1^2)), --rerank-template (tokenizer.chat_template.rerank).
  std::string pooling;
  int64_t rerank_outputs = 0;
  std::string rerank_template;

  int64_t head_dim() const { return head_dim_flag > 0 ? head_dim_flag : dim / n_head; }
  int64_t q_dim() const { return head_dim() * n_head; }
  int64_t kv_dim() const { return head_dim() * n_head_kv; }
  int64_t rotary_dim() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  int64_t expert_width() const { return expert_ffn > 0 ? expert_ffn : ffn; }
  int64_t shared_width() const { return shared_ffn > 0 ? shared_ffn : ffn; }
};

// The --arch values make-model writes, "llama|qwen2|...".
const char* SupportedArchs();
bool IsMoeArch(const std::string& arch);  // qwen2moe, qwen3moe (llama: with --experts)

// Architecture defaults.
double DefaultRopeBase(const std::string& arch);
float DefaultRmsEps(const std::string& arch);
bool IsGemmaFamily(const std::string& arch);
// The sliding window written for the family (the flag, else gemma2 4096, gemma3 512); 0:
// none.
int64_t SlidingWindowOf(const ModelShape& shape);
// LongRoPE's attention factor for --rope-orig-ctx (phi3), as llama.cpp's converter computes.
double LongRopeAttnFactor(const ModelShape& shape);

// Checks every field against the others and the file type (row lengths must hold whole blocks
// of the type's 32-element fallback). Messages name the flag: "--heads 7 does not divide
// --dim 64".
Status ValidateModelShape(const ModelShape& shape, FileType ftype);

enum class InitKind {
  kNormal,        // N(0, std_dev^2)
  kOnes,          // 1.0
  kOnePlusNormal, // 1 + N(0, std_dev^2) (norm weights of the families other than llama/qwen2)
  kValues,        // PlannedTensor::values, one row
};

struct PlannedTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length
  InitKind init = InitKind::kNormal;
  float std_dev = 0;        // for kNormal / kOnePlusNormal
  std::vector<float> values;  // for kValues: [ne[0]]

  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < ne.size(); ++i) r *= ne[i];
    return r;
  }
};

// The tensors of a validated shape, in file order: token_embd, [rope factors], blk.0 ...
// blk.L-1 (attn_norm, attn_q[+bias], attn_k[+bias], attn_v[+bias] or attn_qkv,
// [attn_q_norm, attn_k_norm], attn_output, [post_attention_norm], ffn_norm, ffn_gate, ffn_up,
// ffn_down, [post_ffw_norm]), output_norm, output (unless tied).
std::vector<PlannedTensor> PlanTensors(const ModelShape& shape, FileType ftype);

// Total bytes of tensor data in the plan (without alignment padding); nullopt on overflow.
std::optional<uint64_t> PlannedDataBytes(const std::vector<PlannedTensor>& plan);

}  // namespace lifeline::modelgen
