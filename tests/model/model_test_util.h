// Shared helpers of the model tests: golden tolerances, a tiny synthetic GGUF builder and an
// independent naive forward pass used as a second opinion for paths the reference data does
// not cover (qwen2, rope scaling).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/ggml_type.h"

namespace lifeline {

// The lowest-precision (fewest bits per weight) type among the file's 2-D tensors.
GgmlType DominantWeightType(const GgufFile& file);

// Absolute tolerance for comparing our logits with llama.cpp's at one position; see the
// comment in model_test_util.cpp for the reasoning. sum/sumsq: the reference's whole-vocab
// logit_sum and logit_sumsq at that position.
double LogitTolerance(GgmlType type, double ref_sum, double ref_sumsq, int64_t n_vocab);

// A tiny model of any supported family with deterministic pseudo-random weights. The family
// (arch) decides which tensors exist (qwen2 biases, qwen3/gemma3 Q/K norms, gemma2/3 post
// norms); the fields below set the shapes and the metadata keys written.
struct TinyModelSpec {
  std::string arch = "llama";
  int64_t n_embd = 16;
  int64_t n_layer = 2;
  int64_t n_ff = 24;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_vocab = 40;
  int64_t context_length = 64;
  float rope_freq_base = 10000.0f;
  float rope_scaling_factor = 0.0f;  // 0: key absent
  std::string rope_scaling_type;     // empty: key absent
  bool with_qkv_bias = false;
  bool tied_output = false;
  std::vector<float> rope_freqs;     // non-empty: rope_freqs.weight tensor [rope_dim/2]
  int64_t head_dim = 0;              // > 0: attention.key_length / value_length (else dim/heads)
  int64_t rope_dim = 0;              // > 0: rope.dimension_count (partial rotary), else head dim
  bool fused_qkv = false;            // phi3 layout: one attn_qkv.weight
  bool fused_gate_up = false;        // phi3 layout: ffn_up.weight of 2 * n_ff rows, no ffn_gate
  std::vector<float> rope_factors_long;   // non-empty: LongRoPE tensors (with the short ones)
  std::vector<float> rope_factors_short;
  int64_t rope_orig_ctx = 0;         // > 0: rope.scaling.original_context_length
  float rope_attn_factor = 0.0f;     // > 0: rope.scaling.attn_factor
  float attn_softcap = 0.0f;         // > 0: attn_logit_softcapping key
  float final_softcap = 0.0f;        // > 0: final_logit_softcapping key
  int64_t sliding_window = 0;        // > 0: attention.sliding_window key
  int64_t swa_pattern = 0;           // > 0: attention.sliding_window_pattern key
  float rope_freq_base_swa = 0.0f;   // > 0: rope.freq_base_swa key
  int64_t n_expert = 0;              // > 0: mixture of experts (expert_count)
  int64_t n_expert_used = 0;         // expert_used_count
  int64_t n_ff_exp = 0;              // > 0: expert_feed_forward_length (else n_ff)
  int64_t n_ff_shexp = 0;            // > 0: a shared expert of this width (qwen2moe)
  bool merged_gate_up_exps = false;  // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
  // Embedding / reranking files: a classifier head of n_cls_out outputs (cls.output.weight
  // and .bias; with cls_dense also cls.weight and .bias), its labels, attention.causal.
  int64_t n_cls_out = 0;
  bool cls_dense = false;
  std::vector<std::string> cls_labels;  // non-empty: classifier.output_labels
  int causal = -1;                      // 0 / 1: attention.causal written; -1: absent
  GgmlType matrix_type = GgmlType::kF32;
  uint32_t seed = 7;
  std::set<std::string> omit_keys;   // full key names to leave out
  std::set<std::string> omit_tensors;
  std::map<std::string, std::vector<int64_t>> tensor_shape_overrides;  // name -> ne
  std::map<std::string, int64_t> uint_key_overrides;  // full key -> value written instead
};

Status WriteTinyModel(const TinyModelSpec& spec, const std::string& path);
// A fresh path under the system temp dir, unique per process and call.
std::string TempModelPath(const std::string& stem);

// Independent, deliberately naive forward pass (full causal softmax, f64 accumulation, no
// KV cache), reading the tensors by name straight from the file. The hyperparameters come
// from the spec, not from ReadModelConfig. n_ctx: the context the model runs with (LongRoPE
// picks its factors by it); 0: min(context_length, 4096), LlamaContext's default.
// Returns logits [tokens.size(), n_vocab].
std::vector<float> NaiveForward(const GgufFile& file, const TinyModelSpec& spec,
                                const std::vector<int32_t>& tokens, int64_t n_ctx = 0);

}  // namespace lifeline
