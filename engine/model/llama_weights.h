// LlamaWeights: every tensor of a model bound by name to a view into the GGUF mapping
// (matrices are never copied), with each shape checked against the ModelConfig and each type
// checked to be one we can run. Fused tensors of the file (phi3's attn_qkv, and an ffn_up of
// 2 * n_ff rows holding gate then up when there is no ffn_gate) are bound as row views of
// the one tensor, so the forward pass sees the same q/k/v and gate/up matrices for every
// family.
//
// Ownership: WeightMatrix views borrow the GgufFile's mapping, which must outlive the
// LlamaWeights (LlamaModel owns both). Norm and bias vectors are owned float copies (they are
// tiny; a non-F32 one is dequantized once here so the forward pass only sees floats).
// Thread-safety: immutable after binding; read from any thread.
// Failure: NotFound naming a missing tensor; DataLoss naming the tensor, the expected and the
// actual shape; Unimplemented naming a tensor whose type cannot be dequantized.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/model_config.h"

namespace lifeline {

// One gated FFN: down(act(gate x) * up x). A dense layer's, one expert's, or the shared
// expert's. w_gate_up: gate and up fused at load (LlamaModel, ModelLoadOptions::fuse_gate_up):
// one row-interleaved matrix of 2 * n_ff rows whose 16-row groups alternate, gate rows
// 16k..16k+15 as rows 32k.. and up rows 16k.. as rows 32k+16...; rows == 0 when not fused
// (w_gate and w_up then hold the weights; when fused they still describe the file's copy).
struct FfnWeights {
  WeightMatrix w_gate;  // [n_ff rows, n_embd cols]
  WeightMatrix w_up;    // [n_ff rows, n_embd cols]
  WeightMatrix w_down;  // [n_embd rows, n_ff cols]
  WeightMatrix w_gate_up;
};

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  WeightMatrix wq;               // [q_dim rows, n_embd cols]
  WeightMatrix wk;               // [k_dim rows, n_embd cols]
  WeightMatrix wv;               // [v_dim rows, n_embd cols]
  WeightMatrix wo;               // [n_embd rows, attn_out_dim cols]
  std::vector<float> bq;         // [q_dim] or empty (qwen2 requires it)
  std::vector<float> bk;         // [k_dim] or empty
  std::vector<float> bv;         // [v_dim] or empty
  std::vector<float> attn_q_norm;     // [head_dim_k] per-head Q norm (qk_norm) or empty
  std::vector<float> attn_k_norm;     // [head_dim_k] per-head K norm (qk_norm) or empty
  std::vector<float> attn_post_norm;  // [n_embd] norm of the attention output (post_norms)
  std::vector<float> ffn_norm;   // [n_embd]
  std::vector<float> ffn_post_norm;   // [n_embd] norm of the FFN output (post_norms)
  WeightMatrix w_gate;           // [n_ff rows, n_embd cols]
  WeightMatrix w_up;             // [n_ff rows, n_embd cols]
  WeightMatrix w_down;           // [n_embd rows, n_ff cols]
  // Gate and up fused at load, as FfnWeights::w_gate_up.
  WeightMatrix w_gate_up;

  // Mixture of experts (ModelConfig::is_moe; the dense w_gate/w_up/w_down are then empty):
  // the router and each expert's matrices as views into the 3-D ffn_{gate,up,down}_exps
  // tensors (expert e's rows are contiguous), or into ffn_gate_up_exps (gate then up rows
  // per expert) when the file merges them.
  WeightMatrix ffn_gate_inp;            // [n_expert rows, n_embd cols]
  std::vector<FfnWeights> experts;      // [n_expert], each of width n_ff_exp
  FfnWeights shexp;                     // shared expert of width n_ff_shexp, or empty
  std::vector<float> ffn_gate_inp_shexp;  // [n_embd] the shared expert's gate, or empty

  FfnWeights dense() const { return {w_gate, w_up, w_down, w_gate_up}; }
};

struct LlamaWeights {
  WeightMatrix token_embd;         // [n_vocab rows, n_embd cols]
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;             // [n_vocab rows, n_embd cols]; == token_embd when tied
  bool output_tied = false;        // output.weight absent: classifier shares token_embd
  std::vector<LlamaLayerWeights> layers;  // [n_layer]
  // A reranker's classifier head (llama.cpp's names), dequantized to floats at load: it runs
  // once per sequence, not per token. score = cls_out . [tanh(cls . x + cls_b)] + cls_out_b,
  // the bracket only when cls.weight is present. Empty when the file has no head.
  std::vector<float> cls;        // [n_embd rows, n_embd cols] or empty
  std::vector<float> cls_b;      // [n_embd] or empty
  std::vector<float> cls_out;    // [n_cls_out rows, n_embd cols] or empty
  std::vector<float> cls_out_b;  // [n_cls_out] or empty
};

Result<LlamaWeights> BindLlamaWeights(const GgufFile& file, const ModelConfig& config);

}  // namespace lifeline
