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
// weights are 1.0. qwen2's q/k/v biases are N(0, 0.1^2): small next to the O(1) projections
// but non-zero, so a bias path that is skipped changes the output.
//
// Thread-safety: pure functions. Failures are InvalidArgument naming the offending flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/kernels/ggml_type.h"
#include "tools/quant_policy.h"

namespace lifeline::tools {

struct ModelShape {
  std::string arch = "llama";  // "llama" or "qwen2"
  int64_t dim = 0;             // embedding_length
  int64_t n_layers = 0;        // block_count
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t ffn = 0;             // feed_forward_length
  int64_t vocab = 32000;
  int64_t ctx = 4096;          // context_length
  double rope_base = 0;        // 0: the architecture's default (llama 1e4, qwen2 1e6)
  bool tied = false;           // no output.weight; the classifier reuses token_embd

  int64_t head_dim() const { return dim / n_head; }
  int64_t kv_dim() const { return head_dim() * n_head_kv; }
};

// Architecture defaults.
double DefaultRopeBase(const std::string& arch);
float DefaultRmsEps(const std::string& arch);

// Checks every field against the others and the file type (row lengths must hold whole blocks
// of the type's 32-element fallback). Messages name the flag: "--heads 7 does not divide
// --dim 64".
Status ValidateModelShape(const ModelShape& shape, FileType ftype);

enum class InitKind { kNormal, kOnes };

struct PlannedTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length
  InitKind init = InitKind::kNormal;
  float std_dev = 0;        // for kNormal

  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < ne.size(); ++i) r *= ne[i];
    return r;
  }
};

// The tensors of a validated shape, in file order: token_embd, blk.0 ... blk.L-1 (attn_norm,
// attn_q[+bias], attn_k[+bias], attn_v[+bias], attn_output, ffn_norm, ffn_gate, ffn_up,
// ffn_down), output_norm, output (unless tied).
std::vector<PlannedTensor> PlanTensors(const ModelShape& shape, FileType ftype);

// Total bytes of tensor data in the plan (without alignment padding); nullopt on overflow.
std::optional<uint64_t> PlannedDataBytes(const std::vector<PlannedTensor>& plan);

}  // namespace lifeline::tools
