#include "modelgen/model_plan.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/checked_math.h"

namespace lifeline::modelgen {
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

constexpr float kNormStd = 0.1f;

// A norm weight vector: ones for llama / qwen2 (as before), 1 + N(0, 0.1^2) otherwise.
PlannedTensor Norm(const ModelShape& s, std::string name, int64_t n) {
  const bool ones = s.arch == "llama" || s.arch == "qwen2";
  return Vector(std::move(name), n, ones ? InitKind::kOnes : InitKind::kOnePlusNormal,
                ones ? 0.0f : kNormStd);
}

// LongRoPE factor ramps, [n] each.
std::vector<float> ShortFactors(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = 1.0f + 0.1f * static_cast<float>(i) / static_cast<float>(std::max<int64_t>(1, n - 1));
  }
  return v;
}

std::vector<float> LongFactors(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float r = static_cast<float>(i) / static_cast<float>(std::max<int64_t>(1, n - 1));
    v[static_cast<size_t>(i)] = 1.0f + 15.0f * r * r;
  }
  return v;
}

constexpr int64_t kMaxExperts = 512;

Status CheckExperts(const ModelShape& s) {
  const bool moe = IsMoeArch(s.arch) || (s.arch == "llama" && s.n_expert > 0);
  if (!moe) {
    if (s.n_expert != 0 || s.n_expert_used != 0 || s.expert_ffn != 0 || s.shared_ffn != 0) {
      return InvalidArgument("--experts, --experts-used, --expert-ffn and --shared-ffn are for "
                             "--arch qwen2moe|qwen3moe|llama (Mixtral), not " + s.arch);
    }
    return Status::Ok();
  }
  if (s.n_expert == 0) return InvalidArgument("--experts is required for --arch " + s.arch);
  LL_RETURN_IF_ERROR(CheckRange("--experts", s.n_expert, 1, kMaxExperts));
  LL_RETURN_IF_ERROR(CheckRange("--experts-used", s.n_expert_used, 1, s.n_expert));
  if (s.arch == "llama" && s.expert_ffn != 0) {
    return InvalidArgument("--expert-ffn: a Mixtral-style llama's experts are --ffn wide");
  }
  if (s.arch != "qwen2moe" && s.shared_ffn != 0) {
    return InvalidArgument("--shared-ffn is for --arch qwen2moe, not " + s.arch);
  }
  if (s.arch == "qwen2moe" && s.tied) {
    return InvalidArgument("--tied: llama.cpp requires output.weight for qwen2moe");
  }
  LL_RETURN_IF_ERROR(CheckRange("--expert-ffn", s.expert_width(), 1, kMaxFfn));
  return CheckRange("--shared-ffn", s.shared_width(), 1, kMaxFfn);
}

Status CheckFamilyFlags(const ModelShape& s) {
  const bool swa_family = s.arch == "gemma2" || s.arch == "gemma3";
  if (!swa_family && (s.sliding_window >= 0 || s.swa_pattern != 0 || s.rope_base_swa != 0)) {
    return InvalidArgument("--sliding-window, --swa-pattern and --rope-base-swa are for "
                           "--arch gemma2|gemma3, not " + s.arch);
  }
  if (s.arch != "gemma2" && (s.attn_softcap != 0 || s.final_softcap != 0)) {
    return InvalidArgument("--attn-softcap and --final-softcap are for --arch gemma2, not " +
                           s.arch);
  }
  if (s.rope_orig_ctx != 0 && s.arch != "phi3") {
    return InvalidArgument("--rope-orig-ctx is for --arch phi3, not " + s.arch);
  }
  if (s.arch == "phi3" && s.rope_orig_ctx != 0) {
    LL_RETURN_IF_ERROR(CheckRange("--rope-orig-ctx", s.rope_orig_ctx, 2, s.ctx - 1));
  }
  LL_RETURN_IF_ERROR(CheckExperts(s));
  if (s.sliding_window > kMaxCtx) {
    return CheckRange("--sliding-window", s.sliding_window, 0, kMaxCtx);
  }
  if (s.swa_pattern < 0 || s.swa_pattern > kMaxLayers) {
    return CheckRange("--swa-pattern", s.swa_pattern, 0, kMaxLayers);
  }
  for (const auto& [flag, v] : {std::pair<const char*, double>{"--rope-base-swa", s.rope_base_swa},
                                {"--attn-softcap", s.attn_softcap},
                                {"--final-softcap", s.final_softcap}}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return InvalidArgument(std::string(flag) + " " + std::to_string(v) +
                             " must be a positive finite number");
    }
  }
  return Status::Ok();
}

// The expert tensors of one layer (ModelShape's MoE flags): the router, 3-D expert tensors
// (expert e's rows contiguous, as llama.cpp's converters stack them) and qwen2moe's shared
// expert. The down projections write into the residual stream: 1/sqrt(2 * layers) as dense.
void PlanExperts(const ModelShape& s, FileType ftype, const ModelTypeContext& ctx,
                 const std::string& p, std::vector<PlannedTensor>* plan) {
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.dim));
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  const int64_t ff = s.expert_width(), e = s.n_expert;
  PlannedTensor router = Vector(p + "ffn_gate_inp.weight", s.dim, InitKind::kNormal, in_std);
  router.ne = {s.dim, e};  // 2-D, kept F32 (llama.cpp does not quantize routers)
  plan->push_back(router);
  for (const char* name : {"ffn_gate_exps.weight", "ffn_up_exps.weight"}) {
    PlannedTensor t = Matrix(s, ftype, ctx, p + name, s.dim, ff, in_std);
    t.ne.push_back(e);
    plan->push_back(std::move(t));
  }
  PlannedTensor down = Matrix(s, ftype, ctx, p + "ffn_down_exps.weight", ff, s.dim,
                              residual_scale / std::sqrt(static_cast<float>(ff)));
  down.ne.push_back(e);
  plan->push_back(std::move(down));
  if (s.arch != "qwen2moe") return;
  const int64_t sh = s.shared_width();
  plan->push_back(Vector(p + "ffn_gate_inp_shexp.weight", s.dim, InitKind::kNormal, in_std));
  plan->push_back(Matrix(s, ftype, ctx, p + "ffn_gate_shexp.weight", s.dim, sh, in_std));
  plan->push_back(Matrix(s, ftype, ctx, p + "ffn_up_shexp.weight", s.dim, sh, in_std));
  plan->push_back(Matrix(s, ftype, ctx, p + "ffn_down_shexp.weight", sh, s.dim,
                         residual_scale / std::sqrt(static_cast<float>(sh))));
}

}  // namespace

const char* SupportedArchs() {
  return "llama|qwen2|qwen3|gemma|gemma2|gemma3|phi3|qwen2moe|qwen3moe";
}

bool IsMoeArch(const std::string& arch) { return arch == "qwen2moe" || arch == "qwen3moe"; }

double DefaultRopeBase(const std::string& arch) {
  return arch == "qwen2" || arch == "qwen3" || arch == "gemma3" || IsMoeArch(arch) ? 1e6 : 1e4;
}

float DefaultRmsEps(const std::string& arch) {
  return arch == "llama" || arch == "phi3" ? 1e-5f : 1e-6f;
}

bool IsGemmaFamily(const std::string& arch) {
  return arch == "gemma" || arch == "gemma2" || arch == "gemma3";
}

int64_t SlidingWindowOf(const ModelShape& s) {
  if (s.arch != "gemma2" && s.arch != "gemma3") return 0;
  if (s.sliding_window >= 0) return s.sliding_window;
  return s.arch == "gemma2" ? 4096 : 512;
}

double LongRopeAttnFactor(const ModelShape& s) {
  const double scale = static_cast<double>(s.ctx) / static_cast<double>(s.rope_orig_ctx);
  return scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.rope_orig_ctx)))
                     : 1.0;
}

Status ValidateModelShape(const ModelShape& s, FileType ftype) {
  const std::string archs = SupportedArchs();
  bool known = false;
  for (size_t b = 0, e; b <= archs.size(); b = e + 1) {
    e = archs.find('|', b);
    if (e == std::string::npos) e = archs.size();
    known = known || archs.compare(b, e - b, s.arch) == 0;
  }
  if (!known) return InvalidArgument("--arch '" + s.arch + "' is not one of " + archs);
  if (!s.pooling.empty() && s.pooling != "mean" && s.pooling != "cls" && s.pooling != "last" &&
      s.pooling != "rank") {
    return InvalidArgument("--pooling '" + s.pooling + "' is not mean, cls, last or rank");
  }
  if (s.rerank_outputs < 0 || s.rerank_outputs > 4096) {
    return InvalidArgument("--rerank-outputs " + Str(s.rerank_outputs) + " outside [0, 4096]");
  }
  if (s.pooling == "rank" && s.rerank_outputs == 0) {
    return InvalidArgument("--pooling rank needs a classifier head: give --rerank-outputs N");
  }
  LL_RETURN_IF_ERROR(CheckRange("--dim", s.dim, 1, kMaxDim));
  LL_RETURN_IF_ERROR(CheckRange("--layers", s.n_layers, 1, kMaxLayers));
  LL_RETURN_IF_ERROR(CheckRange("--heads", s.n_head, 1, s.dim));
  LL_RETURN_IF_ERROR(CheckRange("--kv-heads", s.n_head_kv, 1, s.n_head));
  LL_RETURN_IF_ERROR(CheckRange("--ffn", s.ffn, 1, kMaxFfn));
  LL_RETURN_IF_ERROR(CheckRange("--vocab", s.vocab, 1, kMaxVocab));
  LL_RETURN_IF_ERROR(CheckRange("--ctx", s.ctx, 1, kMaxCtx));
  if (s.head_dim_flag != 0) {
    LL_RETURN_IF_ERROR(CheckRange("--head-dim", s.head_dim_flag, 2, 1024));
  } else if (s.dim % s.n_head != 0) {
    return InvalidArgument("--heads " + Str(s.n_head) + " does not divide --dim " + Str(s.dim));
  }
  if (s.head_dim() % 2 != 0) {
    return InvalidArgument("--dim " + Str(s.dim) + " / --heads " + Str(s.n_head) +
                           " gives head size " + Str(s.head_dim()) +
                           ", which must be even (RoPE rotates pairs)");
  }
  if (s.rope_dim != 0) {
    LL_RETURN_IF_ERROR(CheckRange("--rope-dim", s.rope_dim, 2, s.head_dim()));
    if (s.rope_dim % 2 != 0) {
      return InvalidArgument("--rope-dim " + Str(s.rope_dim) + " must be even");
    }
  }
  LL_RETURN_IF_ERROR(CheckFamilyFlags(s));
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
  if ((s.expert_width() % multiple != 0 || s.shared_width() % multiple != 0) &&
      (IsMoeArch(s.arch) || s.n_expert > 0)) {
    return InvalidArgument("--expert-ffn / --shared-ffn must be multiples of " + Str(multiple) +
                           " for --type " + type_name + " (their down rows hold whole blocks)");
  }
  if (s.q_dim() % multiple != 0) {
    return InvalidArgument("--heads " + Str(s.n_head) + " x --head-dim " + Str(s.head_dim()) +
                           " must be a multiple of " + Str(multiple) + " for --type " +
                           type_name + " (attn_output rows hold whole blocks)");
  }
  return Status::Ok();
}

std::vector<PlannedTensor> PlanTensors(const ModelShape& s, FileType ftype) {
  const bool gemma = IsGemmaFamily(s.arch);
  const bool tied = s.tied || gemma;  // llama.cpp reads no output.weight for gemma / gemma2
  const ModelTypeContext ctx{s.n_layers, s.n_head, s.n_head_kv, /*has_output=*/!tied};
  const bool qwen2 = s.arch == "qwen2" || s.arch == "qwen2moe";
  const bool qk_norm = s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "gemma3";
  const bool moe = s.n_expert > 0;
  const bool post_norms = s.arch == "gemma2" || s.arch == "gemma3";
  const bool phi3 = s.arch == "phi3";
  const float in_std = 1.0f / std::sqrt(static_cast<float>(s.dim));
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  const float out_std = residual_scale / std::sqrt(static_cast<float>(s.q_dim()));
  const float down_std = residual_scale / std::sqrt(static_cast<float>(s.ffn));
  const int64_t q_dim = s.q_dim(), kv_dim = s.kv_dim();

  std::vector<PlannedTensor> plan;
  plan.push_back(Matrix(s, ftype, ctx, "token_embd.weight", s.dim, s.vocab,
                        tied ? in_std : 1.0f));
  if (phi3 && s.rope_orig_ctx != 0) {
    const int64_t half = s.rotary_dim() / 2;
    PlannedTensor l = Vector("rope_factors_long.weight", half, InitKind::kValues, 0);
    l.values = LongFactors(half);
    PlannedTensor sh = Vector("rope_factors_short.weight", half, InitKind::kValues, 0);
    sh.values = ShortFactors(half);
    plan.push_back(std::move(l));
    plan.push_back(std::move(sh));
  }
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + Str(l) + ".";
    plan.push_back(Norm(s, p + "attn_norm.weight", s.dim));
    if (phi3) {
      plan.push_back(Matrix(s, ftype, ctx, p + "attn_qkv.weight", s.dim, q_dim + 2 * kv_dim,
                            in_std));
    } else {
      plan.push_back(Matrix(s, ftype, ctx, p + "attn_q.weight", s.dim, q_dim, in_std));
      if (qwen2) plan.push_back(Vector(p + "attn_q.bias", q_dim, InitKind::kNormal, kBiasStd));
      plan.push_back(Matrix(s, ftype, ctx, p + "attn_k.weight", s.dim, kv_dim, in_std));
      if (qwen2) plan.push_back(Vector(p + "attn_k.bias", kv_dim, InitKind::kNormal, kBiasStd));
      plan.push_back(Matrix(s, ftype, ctx, p + "attn_v.weight", s.dim, kv_dim, in_std));
      if (qwen2) plan.push_back(Vector(p + "attn_v.bias", kv_dim, InitKind::kNormal, kBiasStd));
    }
    if (qk_norm) {
      plan.push_back(Norm(s, p + "attn_q_norm.weight", s.head_dim()));
      plan.push_back(Norm(s, p + "attn_k_norm.weight", s.head_dim()));
    }
    plan.push_back(Matrix(s, ftype, ctx, p + "attn_output.weight", q_dim, s.dim, out_std));
    if (post_norms) plan.push_back(Norm(s, p + "post_attention_norm.weight", s.dim));
    plan.push_back(Norm(s, p + "ffn_norm.weight", s.dim));
    if (moe) {
      PlanExperts(s, ftype, ctx, p, &plan);
    } else if (phi3) {
      plan.push_back(Matrix(s, ftype, ctx, p + "ffn_up.weight", s.dim, 2 * s.ffn, in_std));
    } else {
      plan.push_back(Matrix(s, ftype, ctx, p + "ffn_gate.weight", s.dim, s.ffn, in_std));
      plan.push_back(Matrix(s, ftype, ctx, p + "ffn_up.weight", s.dim, s.ffn, in_std));
    }
    if (!moe) plan.push_back(Matrix(s, ftype, ctx, p + "ffn_down.weight", s.ffn, s.dim, down_std));
    if (post_norms) plan.push_back(Norm(s, p + "post_ffw_norm.weight", s.dim));
  }
  plan.push_back(Norm(s, "output_norm.weight", s.dim));
  if (!tied) {
    plan.push_back(Matrix(s, ftype, ctx, "output.weight", s.dim, s.vocab, in_std));
  }
  if (s.rerank_outputs > 0) {  // read once per document: kept F32 as converters keep it
    PlannedTensor head;
    head.name = "cls.output.weight";
    head.ne = {s.dim, s.rerank_outputs};
    head.std_dev = in_std;
    plan.push_back(std::move(head));
    plan.push_back(Vector("cls.output.bias", s.rerank_outputs, InitKind::kNormal, kBiasStd));
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

}  // namespace lifeline::modelgen
