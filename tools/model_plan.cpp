#include "tools/model_plan.h"

#include <cmath>

#include "base/checked_math.h"

namespace lifeline::tools {
namespace {

// Caps keep every derived size far from overflow; real models are well inside them.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxFfn = 1 << 20;
constexpr int64_t kMaxCtx = 1 << 24;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr float kBiasStd = 0.1f;

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckRange(const char* flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return InvalidArgument(std::string(flag) + " " + Str(v) + " is outside [" + Str(lo) + ", " +
                           Str(hi) + "]");
  }
  return Status::Ok();
}

// Row lengths a quantized file type needs: K-quant rows that aren't multiples of 256 fall back
// to 32-element blocks, so 32 is the requirement for every quantized type.
int64_t RequiredRowMultiple(FileType ftype) {
  if (!IsQuantizedFileType(ftype)) return 1;
  return 32;
}

PlannedTensor Matrix(const ModelShape& s, FileType ftype, const ModelTypeContext& ctx,
                     std::string name, int64_t cols, int64_t rows, float std_dev) {
  PlannedTensor t;
  t.type = IsQuantizableTensor(name, 2) ? ChooseTensorType(ctx, ftype, name, cols)
                                        : GgmlType::kF32;
  t.name = std::move(name);
  t.ne = {cols, rows};
  t.std_dev = std_dev;
  return t;
}

PlannedTensor Vector(std::string name, int64_t n, InitKind init, float std_dev) {
  PlannedTensor t;
  t.name = std::move(name);
  t.type = GgmlType::kF32;  // norms and biases stay F32 in every file type
  t.ne = {n};
  t.init = init;
  t.std_dev = std_dev;
  return t;
}

}  // namespace

double DefaultRopeBase(const std::string& arch) { return arch == "qwen2" ? 1e6 : 1e4; }

float DefaultRmsEps(const std::string& arch) { return arch == "qwen2" ? 1e-6f : 1e-5f; }

Status ValidateModelShape(const ModelShape& s, FileType ftype) {
  if (s.arch != "llama" && s.arch != "qwen2") {
    return InvalidArgument("--arch '" + s.arch + "' is not one of llama|qwen2");
  }
  LL_RETURN_IF_ERROR(CheckRange("--dim", s.dim, 1, kMaxDim));
  LL_RETURN_IF_ERROR(CheckRange("--layers", s.n_layers, 1, kMaxLayers));
  LL_RETURN_IF_ERROR(CheckRange("--heads", s.n_head, 1, s.dim));
  LL_RETURN_IF_ERROR(CheckRange("--kv-heads", s.n_head_kv, 1, s.n_head));
  LL_RETURN_IF_ERROR(CheckRange("--ffn", s.ffn, 1, kMaxFfn));
  LL_RETURN_IF_ERROR(CheckRange("--vocab", s.vocab, 1, kMaxVocab));
  LL_RETURN_IF_ERROR(CheckRange("--ctx", s.ctx, 1, kMaxCtx));
  if (s.dim % s.n_head != 0) {
    return InvalidArgument("--heads " + Str(s.n_head) + " does not divide --dim " + Str(s.dim));
  }
  if (s.head_dim() % 2 != 0) {
    return InvalidArgument("--dim " + Str(s.dim) + " / --heads " + Str(s.n_head) +
                           " gives head size " + Str(s.head_dim()) +
                           ", which must be even (RoPE rotates pairs)");
  }
  if (s.n_head % s.n_head_kv != 0) {
    return InvalidArgument("--kv-heads " + Str(s.n_head_kv) + " does not divide --heads " +
                           Str(s.n_head));
  }
  if (!(s.rope_base >= 0) || !std::isfinite(s.rope_base)) {
    return InvalidArgument("--rope-base " + std::to_string(s.rope_base) +
                           " must be a positive finite number");
  }
  const int64_t multiple = RequiredRowMultiple(ftype);
  const auto info = FileTypeFromId(static_cast<uint32_t>(ftype));
  const std::string type_name = info ? std::string(info->name) : "?";
  if (s.dim % multiple != 0) {
    return InvalidArgument("--dim " + Str(s.dim) + " must be a multiple of " + Str(multiple) +
                           " for --type " + type_name + " (rows hold whole blocks)");
  }
  if (s.ffn % multiple != 0) {
    return InvalidArgument("--ffn " + Str(s.ffn) + " must be a multiple of " + Str(multiple) +
                           " for --type " + type_name + " (ffn_down rows hold whole blocks)");
  }
  return Status::Ok();
}

std::vector<PlannedTensor> PlanTensors(const ModelShape& s, FileType ftype) {
  const ModelTypeContext ctx{s.n_layers, s.n_head, s.n_head_kv, /*has_output=*/!s.tied};
  const bool qwen2 = s.arch == "qwen2";
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.dim));
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  const float out_std = in_std * residual_scale;
  const float down_std = residual_scale / std::sqrt(static_cast<float>(s.ffn));
  const int64_t kv_dim = s.kv_dim();

  std::vector<PlannedTensor> plan;
  plan.push_back(Matrix(s, ftype, ctx, "token_embd.weight", s.dim, s.vocab,
                        s.tied ? in_std : 1.0f));
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + Str(l) + ".";
    plan.push_back(Vector(p + "attn_norm.weight", s.dim, InitKind::kOnes, 0));
    plan.push_back(Matrix(s, ftype, ctx, p + "attn_q.weight", s.dim, s.dim, in_std));
    if (qwen2) plan.push_back(Vector(p + "attn_q.bias", s.dim, InitKind::kNormal, kBiasStd));
    plan.push_back(Matrix(s, ftype, ctx, p + "attn_k.weight", s.dim, kv_dim, in_std));
    if (qwen2) plan.push_back(Vector(p + "attn_k.bias", kv_dim, InitKind::kNormal, kBiasStd));
    plan.push_back(Matrix(s, ftype, ctx, p + "attn_v.weight", s.dim, kv_dim, in_std));
    if (qwen2) plan.push_back(Vector(p + "attn_v.bias", kv_dim, InitKind::kNormal, kBiasStd));
    plan.push_back(Matrix(s, ftype, ctx, p + "attn_output.weight", s.dim, s.dim, out_std));
    plan.push_back(Vector(p + "ffn_norm.weight", s.dim, InitKind::kOnes, 0));
    plan.push_back(Matrix(s, ftype, ctx, p + "ffn_gate.weight", s.dim, s.ffn, in_std));
    plan.push_back(Matrix(s, ftype, ctx, p + "ffn_up.weight", s.dim, s.ffn, in_std));
    plan.push_back(Matrix(s, ftype, ctx, p + "ffn_down.weight", s.ffn, s.dim, down_std));
  }
  plan.push_back(Vector("output_norm.weight", s.dim, InitKind::kOnes, 0));
  if (!s.tied) {
    plan.push_back(Matrix(s, ftype, ctx, "output.weight", s.dim, s.vocab, in_std));
  }
  return plan;
}

std::optional<uint64_t> PlannedDataBytes(const std::vector<PlannedTensor>& plan) {
  uint64_t total = 0;
  for (const auto& t : plan) {
    const auto row = RowBytes(t.type, t.ne[0]);
    uint64_t bytes = 0;
    if (!row || !CheckedMul(*row, static_cast<uint64_t>(t.rows()), &bytes) ||
        !CheckedAdd(total, bytes, &total)) {
      return std::nullopt;
    }
  }
  return total;
}

}  // namespace lifeline::tools
