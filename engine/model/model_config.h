// ModelConfig: the hyperparameters of a Llama-family model (llama, qwen2), read once from a
// GGUF file's metadata and validated against named caps before anything is sized from them.
//
// Ownership: ModelConfig is a plain value (owns its strings/vectors; borrows nothing from the
// file). Thread-safety: immutable value, share freely.
// Failure: ReadModelConfig returns Unimplemented for an architecture or rope scaling we do not
// run, NotFound for a missing required key, DataLoss for a key of the wrong type, OutOfRange
// for a value outside its cap; every message names the key, the value and the limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"

namespace lifeline {

// How RoPE pairs up the dimensions of a head.
enum class RopeLayout : uint8_t {
  kNormal,  // llama: rotate adjacent pairs (2i, 2i+1)
  kNeox,    // qwen2 / GPT-NeoX: rotate (i, i + rope_dim/2)
};

enum class ModelArch : uint8_t { kLlama, kQwen2 };

const char* ModelArchName(ModelArch arch);

// Caps on what a file may ask us to allocate. Real models sit far below them.
struct ModelConfigLimits {
  static constexpr int64_t kMaxLayers = 512;
  static constexpr int64_t kMaxEmbd = 65536;
  static constexpr int64_t kMaxFeedForward = 262144;
  static constexpr int64_t kMaxHeads = 1024;
  static constexpr int64_t kMaxHeadDim = 1024;
  static constexpr int64_t kMaxVocab = 1 << 22;
  static constexpr int64_t kMaxContext = 1 << 24;
};

struct ModelConfig {
  ModelArch arch = ModelArch::kLlama;
  std::string arch_name;  // "llama", the metadata key prefix

  int64_t n_embd = 0;       // hidden size
  int64_t n_layer = 0;      // transformer blocks
  int64_t n_ff = 0;         // feed-forward (SwiGLU) hidden size
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
