// ModelConfig: the hyperparameters of a decoder-only transformer (llama, qwen2, qwen3, gemma,
// gemma2, gemma3, phi3), read once from a GGUF file's metadata and validated against named caps
// before anything is sized from them. The families differ only by the switches of one decoder
// (norm placement, per-head Q/K norm, activation, embedding and attention scales, soft caps,
// sliding windows, rope variants), each family being one row of the ArchSpec table in
// model_config.cpp with the defaults llama.cpp applies when a key is absent.
//
// Ownership: ModelConfig is a plain value (owns its strings/vectors; borrows nothing from the
// file). Thread-safety: immutable value, share freely.
// Failure: ReadModelConfig returns Unimplemented for an architecture or rope scaling we do not
// run, NotFound for a missing required key, DataLoss for a key of the wrong type, OutOfRange
// for a value outside its cap; every message names the key, the value and the limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"

namespace lifeline {

// How RoPE pairs up the dimensions of a head.
enum class RopeLayout : uint8_t {
  kNormal,  // llama: rotate adjacent pairs (2i, 2i+1)
  kNeox,    // qwen2 / GPT-NeoX: rotate (i, i + rope_dim/2)
};

enum class ModelArch : uint8_t {
  kLlama,  // also Mistral / Mistral Nemo, and Mixtral when expert_count > 0
  kQwen2,
  kQwen3,
  kGemma,
  kGemma2,
  kGemma3,
  kPhi3,
  kQwen2Moe,
  kQwen3Moe,
};

const char* ModelArchName(ModelArch arch);

// The FFN's gated activation: gate = act(gate) * up.
enum class FfnActivation : uint8_t {
  kSilu,      // SwiGLU (llama, qwen, phi3)
  kGeluTanh,  // GeGLU with the tanh approximation of GELU (gemma family)
};

// How a mixture-of-experts router turns its logits into expert weights.
enum class ExpertGating : uint8_t { kSoftmax, kSigmoid };

// How the classifier is found.
enum class OutputTensor : uint8_t {
  kOptional,     // output.weight, or token_embd.weight when absent (tied)
  kAlwaysTied,   // token_embd.weight; llama.cpp does not read an output.weight (gemma, gemma2)
};

// How a sequence's hidden states become one vector (an embedding) -- llama.cpp's
// `<arch>.pooling_type` values: kNone 0 (every token's), kMean 1, kCls 2 (the first token's),
// kLast 3, kRank 4 (a reranker: the last token's state through the classifier head, see
// LlamaWeights::cls_out). kUnspecified: the file says nothing (the server picks).
enum class PoolingType : uint8_t { kNone, kMean, kCls, kLast, kRank, kUnspecified };
const char* PoolingName(PoolingType pooling);
// "none" | "mean" | "cls" | "last" | "rank" -> the type; anything else nullopt.
std::optional<PoolingType> PoolingFromName(std::string_view name);

// Caps on what a file may ask us to allocate. Real models sit far below them.
struct ModelConfigLimits {
  static constexpr int64_t kMaxLayers = 512;
  static constexpr int64_t kMaxEmbd = 65536;
  static constexpr int64_t kMaxFeedForward = 262144;
  static constexpr int64_t kMaxHeads = 1024;
  static constexpr int64_t kMaxHeadDim = 1024;
  static constexpr int64_t kMaxVocab = 1 << 22;
  static constexpr int64_t kMaxContext = 1 << 24;
  static constexpr int64_t kMaxExperts = 1024;
  static constexpr int64_t kMaxClassifierOutputs = 4096;
};

struct ModelConfig {
  ModelArch arch = ModelArch::kLlama;
  std::string arch_name;  // "llama", the metadata key prefix

  int64_t n_embd = 0;       // hidden size
  int64_t n_layer = 0;      // transformer blocks
  int64_t n_ff = 0;         // feed-forward (SwiGLU) hidden size of a dense layer
  int64_t n_head = 0;       // query heads
  int64_t n_head_kv = 0;    // key/value heads (grouped-query attention when < n_head)
  int64_t head_dim_k = 0;   // per-head dim of Q and K
  int64_t head_dim_v = 0;   // per-head dim of V
  int64_t n_vocab = 0;
  int64_t context_length = 0;  // training context the file declares
  float rms_eps = 1e-5f;

  // RoPE.
  RopeLayout rope_layout = RopeLayout::kNormal;
  int64_t rope_dim = 0;          // leading dims of each head that are rotated (even)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions are multiplied by this (1/factor)
  // Llama 3 style per-frequency divisors ([rope_dim/2]) from the rope_freqs.weight tensor;
  // empty when the file has none.
  std::vector<float> rope_freq_factors;
  // LongRoPE (phi3): divisors for contexts longer than rope_orig_ctx ("long") and the rest
  // ("short"), from rope_factors_{long,short}.weight ([rope_dim/2] each, or empty). Which
  // applies is decided per context size as llama.cpp does (RopeFactorsFor).
  std::vector<float> rope_factors_long;
  std::vector<float> rope_factors_short;
  int64_t rope_orig_ctx = 0;       // rope.scaling.original_context_length (default: context)
  float rope_attn_factor = 1.0f;   // rope.scaling.attn_factor: multiplies cos and sin

  // The family's switches (ArchSpec), resolved with the file's keys.
  bool qkv_bias_required = false;  // attn_{q,k,v}.bias must be present (qwen2)
  bool qk_norm = false;            // per-head RMSNorm of Q and K before RoPE (qwen3, gemma3)
  bool post_norms = false;         // RMSNorm of the attention and FFN outputs before each
                                   // residual add (gemma2, gemma3)
  float embd_scale = 1.0f;         // token embeddings multiplied by this (gemma: sqrt(n_embd))
  FfnActivation ffn_act = FfnActivation::kSilu;
  OutputTensor output = OutputTensor::kOptional;
  float attn_scale = 1.0f;         // multiplies q.k (1/sqrt(head_dim_k) unless the family says)
  float attn_softcap = 0.0f;       // > 0: scores capped to softcap * tanh(s / softcap)
  float final_softcap = 0.0f;      // > 0: logits capped the same way
  // Sliding-window attention: layers with swa_layers[il] != 0 see the last swa_window
  // positions and rotate with the SWA rope base / scale; empty: every layer is global.
  int64_t swa_window = 0;
  std::vector<uint8_t> swa_layers;  // [n_layer] or empty
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;

  // Mixture of experts (n_expert > 0: qwen2moe, qwen3moe, Mixtral): each layer's FFN is the
  // weighted sum of n_expert_used of n_expert experts (SwiGLU FFNs of width n_ff_exp) that a
  // router picks per token: probabilities = gating(router logits), the n_expert_used largest
  // kept, their weights renormalised to sum 1 when expert_norm_topk and multiplied by
  // expert_weights_scale when that is neither 0 nor 1. qwen2moe adds a shared expert of
  // width n_ff_shexp whose output is scaled by sigmoid(ffn_gate_inp_shexp . x).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;  // 0: no shared expert
  ExpertGating expert_gating = ExpertGating::kSoftmax;
  bool expert_norm_topk = false;
  float expert_weights_scale = 0.0f;

  // Embedding and reranking models (docs/embeddings.md): the pooling the file declares
  // (`<arch>.pooling_type`), and the classifier head's outputs (cls_out.weight's rows, 0: no
  // head) with their labels (`<arch>.classifier.output_labels`, may be empty). Only causal
  // attention is run: a file whose `<arch>.attention.causal` is false is refused.
  PoolingType pooling = PoolingType::kUnspecified;
  int64_t n_cls_out = 0;
  std::vector<std::string> classifier_labels;

  bool is_moe() const { return n_expert > 0; }
  // Width of the widest FFN a layer runs (scratch sizing).
  int64_t ffn_width() const {
    int64_t w = n_ff > n_ff_exp ? n_ff : n_ff_exp;
    return w > n_ff_shexp ? w : n_ff_shexp;
  }

  bool is_swa(int64_t il) const {
    return !swa_layers.empty() && swa_layers[static_cast<size_t>(il)] != 0;
  }
  // Rope divisors for a context of n_ctx positions: rope_freqs.weight when present, else
  // LongRoPE's long factors when n_ctx > rope_orig_ctx and short ones otherwise (llama.cpp's
  // get_rope_factors with n_ctx_seq = n_ctx), else none (empty).
  const std::vector<float>& RopeFactorsFor(int64_t n_ctx) const;

  int64_t q_dim() const { return n_head * head_dim_k; }      // width of Q
  int64_t k_dim() const { return n_head_kv * head_dim_k; }   // width of K (one token)
  int64_t v_dim() const { return n_head_kv * head_dim_v; }   // width of V (one token)
  int64_t attn_out_dim() const { return n_head * head_dim_v; }
  int64_t n_group() const { return n_head / n_head_kv; }     // query heads per KV head
};

// Reads and validates the config. Tensor shapes are checked later by BindLlamaWeights; here
// only rope_freqs.weight (a config input) and the vocab fallback (token_embd) are looked at.
Result<ModelConfig> ReadModelConfig(const GgufFile& file);

}  // namespace lifeline
