#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

using Limits = ModelConfigLimits;

// One row per architecture: the switches of the decoder and the defaults llama.cpp applies
// when the file does not say (llama.cpp's src/models/<arch>.cpp load_arch_hparams /
// load_arch_tensors and llama-arch.cpp's rope types).
struct ArchSpec {
  ModelArch arch;
  const char* name;
  RopeLayout rope;
  bool qkv_bias;          // attn_{q,k,v}.bias required
  bool qk_norm;           // attn_{q,k}_norm.weight, one [head_dim_k] vector each
  bool post_norms;        // post_attention_norm / post_ffw_norm
  bool embd_scale;        // x = token_embd[t] * sqrt(n_embd)
  FfnActivation act;
  OutputTensor output;
  int64_t swa_period;     // sliding_window_pattern default: layer il is SWA when
                          // il % period < period - 1; 0: the family has no SWA layers
  int64_t swa_window;     // sliding_window default; 0: SWA only when the file gives a window
  float attn_softcap;     // attn_logit_softcapping default (0: not applied)
  float final_softcap;    // final_logit_softcapping default (0: none)
  int64_t layers_27b;     // gemma's attention-scale rule: with this many layers the scale is
                          // 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim); 0: no rule
  int moe;                // 0: dense only; 1: experts when expert_count > 0; 2: experts required
  bool moe_norm_topk;     // the chosen experts' weights renormalised to sum 1
  bool shared_expert;     // ffn_{gate,up,down}_shexp + a sigmoid gate (qwen2moe)
};

constexpr ArchSpec kArchSpecs[] = {
    // arch              name      rope               bias   qknorm post   escale act
    {ModelArch::kLlama, "llama", RopeLayout::kNormal, false, false, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 1, true, false},
    {ModelArch::kQwen2, "qwen2", RopeLayout::kNeox, true, false, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 0, false, false},
    {ModelArch::kQwen3, "qwen3", RopeLayout::kNeox, false, true, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 0, false, false},
    {ModelArch::kGemma, "gemma", RopeLayout::kNeox, false, false, false, true,
     FfnActivation::kGeluTanh, OutputTensor::kAlwaysTied, 0, 0, 0.0f, 0.0f, 0, 0, false, false},
    {ModelArch::kGemma2, "gemma2", RopeLayout::kNeox, false, false, true, true,
     FfnActivation::kGeluTanh, OutputTensor::kAlwaysTied, 2, 4096, 50.0f, 30.0f, 46, 0, false,
     false},
    {ModelArch::kGemma3, "gemma3", RopeLayout::kNeox, false, true, true, true,
     FfnActivation::kGeluTanh, OutputTensor::kOptional, 6, 0, 0.0f, 0.0f, 62, 0, false, false},
    {ModelArch::kPhi3, "phi3", RopeLayout::kNeox, false, false, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 0, false, false},
    {ModelArch::kQwen2Moe, "qwen2moe", RopeLayout::kNeox, false, false, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 2, false, true},
    {ModelArch::kQwen3Moe, "qwen3moe", RopeLayout::kNeox, false, true, false, false,
     FfnActivation::kSilu, OutputTensor::kOptional, 0, 0, 0.0f, 0.0f, 0, 2, true, false},
};

const ArchSpec& SpecOf(ModelArch arch) {
  for (const ArchSpec& a : kArchSpecs) {
    if (a.arch == arch) return a;
  }
  return kArchSpecs[0];
}

std::string SupportedArchNames() {
  std::string names;
  for (const ArchSpec& a : kArchSpecs) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

std::string Key(const ModelConfig& c, std::string_view suffix) {
  return c.arch_name + "." + std::string(suffix);
}

Status RangeError(const std::string& key, int64_t value, int64_t lo, int64_t hi) {
  return OutOfRange(key + " = " + std::to_string(value) + " outside [" + std::to_string(lo) +
                    ", " + std::to_string(hi) + "]");
}

// Reads an integer key into [lo, hi]; `fallback` is used when the key is absent (nullptr:
// the key is required).
Result<int64_t> ReadInt(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi,
                        const int64_t* fallback) {
  Result<uint64_t> v = f.GetUint(key);
  if (!v.ok()) {
    if (v.status().code() == StatusCode::kNotFound) {
      if (fallback != nullptr) return *fallback;
      return NotFound("required metadata key " + key + " is missing");
    }
    return DataLoss(key + ": " + v.status().message());
  }
  if (*v > static_cast<uint64_t>(hi) || static_cast<int64_t>(*v) < lo) {
    // Values above INT64_MAX print via the unsigned path.
    if (*v > static_cast<uint64_t>(INT64_MAX)) {
      return OutOfRange(key + " = " + std::to_string(*v) + " outside [" + std::to_string(lo) +
                        ", " + std::to_string(hi) + "]");
    }
    return RangeError(key, static_cast<int64_t>(*v), lo, hi);
  }
  return static_cast<int64_t>(*v);
}

Result<int64_t> RequiredInt(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return ReadInt(f, key, lo, hi, nullptr);
}

Result<int64_t> OptionalInt(const GgufFile& f, const std::string& key, int64_t fallback,
                            int64_t lo, int64_t hi) {
  return ReadInt(f, key, lo, hi, &fallback);
}

// Reads a float key (absent -> *fallback, or NotFound when fallback is null); the value must
// be finite and inside (lo, hi].
Result<float> ReadFloat(const GgufFile& f, const std::string& key, double lo_exclusive,
                        double hi, const float* fallback) {
  Result<double> v = f.GetFloat(key);
  if (!v.ok()) {
    if (v.status().code() == StatusCode::kNotFound) {
      if (fallback != nullptr) return *fallback;
      return NotFound("required metadata key " + key + " is missing");
    }
    return DataLoss(key + ": " + v.status().message());
  }
  if (!std::isfinite(*v) || *v <= lo_exclusive || *v > hi) {
    return OutOfRange(key + " = " + std::to_string(*v) + " outside (" +
                      std::to_string(lo_exclusive) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<float>(*v);
}

Result<ModelArch> ReadArch(const GgufFile& f, std::string* name) {
  Result<std::string_view> arch = f.GetString("general.architecture");
  if (!arch.ok()) {
    if (arch.status().code() == StatusCode::kNotFound) {
      return NotFound("required metadata key general.architecture is missing");
    }
    return DataLoss("general.architecture: " + arch.status().message());
  }
  *name = std::string(*arch);
  for (const ArchSpec& a : kArchSpecs) {
    if (*arch == a.name) return a.arch;
  }
  return Unimplemented("unsupported architecture '" + *name + "' (supported: " +
                       SupportedArchNames() + ")");
}

// expert_count / expert_used_count and the expert widths (llama.cpp's defaults: n_ff_exp =
// n_ff / n_expert_used for qwen*moe, n_ff for Mixtral; the shared expert n_ff).
Status ReadExperts(const GgufFile& f, ModelConfig* c) {
  const ArchSpec& a = SpecOf(c->arch);
  const int64_t none = 0;
  LL_ASSIGN_OR_RETURN(c->n_expert, OptionalInt(f, Key(*c, "expert_count"), none, 0,
                                               Limits::kMaxExperts));
  if (c->n_expert == 0) {
    if (a.moe == 2) {
      return NotFound("required metadata key " + Key(*c, "expert_count") + " is missing (" +
                      c->arch_name + " is a mixture of experts)");
    }
    return Status::Ok();
  }
  if (a.moe == 0) {
    return Unimplemented(Key(*c, "expert_count") + " = " + std::to_string(c->n_expert) +
                         ": " + c->arch_name + " has no mixture-of-experts variant here");
  }
  LL_ASSIGN_OR_RETURN(c->n_expert_used,
                      RequiredInt(f, Key(*c, "expert_used_count"), 1, c->n_expert));
  const int64_t default_exp = c->arch == ModelArch::kLlama ? c->n_ff : c->n_ff / c->n_expert_used;
  LL_ASSIGN_OR_RETURN(c->n_ff_exp, OptionalInt(f, Key(*c, "expert_feed_forward_length"),
                                               std::max<int64_t>(1, default_exp), 1,
                                               Limits::kMaxFeedForward));
  if (a.shared_expert) {
    LL_ASSIGN_OR_RETURN(c->n_ff_shexp,
                        OptionalInt(f, Key(*c, "expert_shared_feed_forward_length"), c->n_ff, 1,
                                    Limits::kMaxFeedForward));
  }
  c->expert_norm_topk = a.moe_norm_topk;
  c->expert_gating = ExpertGating::kSoftmax;
  if (c->arch != ModelArch::kLlama) {
    const float none_f = 0.0f;
    LL_ASSIGN_OR_RETURN(c->expert_weights_scale,
                        ReadFloat(f, Key(*c, "expert_weights_scale"), -1.0, 1e6, &none_f));
  }
  return Status::Ok();
}

Status ReadDims(const GgufFile& f, ModelConfig* c) {
  LL_ASSIGN_OR_RETURN(c->n_embd, RequiredInt(f, Key(*c, "embedding_length"), 1, Limits::kMaxEmbd));
  LL_ASSIGN_OR_RETURN(c->n_layer, RequiredInt(f, Key(*c, "block_count"), 1, Limits::kMaxLayers));
  LL_ASSIGN_OR_RETURN(c->n_ff,
                      RequiredInt(f, Key(*c, "feed_forward_length"), 1, Limits::kMaxFeedForward));
  LL_ASSIGN_OR_RETURN(c->n_head,
                      RequiredInt(f, Key(*c, "attention.head_count"), 1, Limits::kMaxHeads));
  LL_ASSIGN_OR_RETURN(c->n_head_kv, OptionalInt(f, Key(*c, "attention.head_count_kv"), c->n_head,
                                                1, c->n_head));
  if (c->n_head % c->n_head_kv != 0) {
    return OutOfRange(Key(*c, "attention.head_count") + " = " + std::to_string(c->n_head) +
                      " is not divisible by " + Key(*c, "attention.head_count_kv") + " = " +
                      std::to_string(c->n_head_kv));
  }
  LL_ASSIGN_OR_RETURN(c->context_length,
                      RequiredInt(f, Key(*c, "context_length"), 1, Limits::kMaxContext));

  return ReadExperts(f, c);
}

Status ReadHeadDims(const GgufFile& f, ModelConfig* c) {
  const std::string key_len = Key(*c, "attention.key_length");
  const bool has_key_length = f.FindKv(key_len) != nullptr;
  if (!has_key_length && c->n_embd % c->n_head != 0) {
    return OutOfRange(Key(*c, "embedding_length") + " = " + std::to_string(c->n_embd) +
                      " is not divisible by " + Key(*c, "attention.head_count") + " = " +
                      std::to_string(c->n_head) + " (and " + key_len + " is absent)");
  }
  const int64_t default_head_dim = c->n_embd / c->n_head;
  LL_ASSIGN_OR_RETURN(c->head_dim_k,
                      OptionalInt(f, key_len, default_head_dim, 1, Limits::kMaxHeadDim));
  LL_ASSIGN_OR_RETURN(c->head_dim_v, OptionalInt(f, Key(*c, "attention.value_length"),
                                                 c->head_dim_k, 1, Limits::kMaxHeadDim));
  // No default: llama.cpp refuses llama/qwen2 files without an epsilon too.
  LL_ASSIGN_OR_RETURN(c->rms_eps, ReadFloat(f, Key(*c, "attention.layer_norm_rms_epsilon"), 0.0,
                                            1.0, nullptr));
  return Status::Ok();
}

// A [rope_dim / 2] vector of rope divisors (rope_freqs, rope_factors_long / _short): absent
// leaves *out empty.
Status ReadRopeFactorTensor(const GgufFile& f, const std::string& name, int64_t rope_dim,
                            std::vector<float>* out) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return Status::Ok();
  const int64_t want = rope_dim / 2;
  if (t->n_dims != 1 || t->ne[0] != want) {
    return DataLoss("tensor " + name + ": shape [" + std::to_string(t->ne[0]) + ", " +
                    std::to_string(t->ne[1]) + "] (n_dims " + std::to_string(t->n_dims) +
                    "), expected [" + std::to_string(want) + "] (rope_dim / 2)");
  }
  if (!ref::CanDequantize(t->type)) {
    return Unimplemented("tensor " + name + ": type " + std::string(TypeTraits(t->type).name) +
                         " is not supported");
  }
  out->resize(static_cast<size_t>(want));  // [rope_dim/2]
  ref::DequantizeRow(t->type, t->data, out->data(), want);
  for (int64_t i = 0; i < want; ++i) {
    const float v = (*out)[static_cast<size_t>(i)];
    if (!std::isfinite(v) || v <= 0.0f) {
      return OutOfRange("tensor " + name + ": factor " + std::to_string(i) + " = " +
                        std::to_string(v) + " must be finite and > 0");
    }
  }
  return Status::Ok();
}

// Which layers attend within a sliding window, and their rope. gemma2: window 4096 and every
// other layer (0, 2, ...) unless the file says otherwise; gemma3: five layers of six, only
// when the file gives a window, rotated with their own base (default 10000, scale 1).
Status ReadSlidingWindow(const GgufFile& f, const ArchSpec& a, ModelConfig* c) {
  c->rope_freq_base_swa = c->rope_freq_base;
  c->rope_freq_scale_swa = c->rope_freq_scale;
  if (a.swa_period == 0) return Status::Ok();
  LL_ASSIGN_OR_RETURN(c->swa_window, OptionalInt(f, Key(*c, "attention.sliding_window"),
                                                 a.swa_window, 0, Limits::kMaxContext));
  LL_ASSIGN_OR_RETURN(const int64_t period,
                      OptionalInt(f, Key(*c, "attention.sliding_window_pattern"), a.swa_period,
                                  0, Limits::kMaxLayers));
  if (c->arch == ModelArch::kGemma3) {
    c->rope_freq_scale_swa = 1.0f;
    const float base = 10000.0f;
    LL_ASSIGN_OR_RETURN(c->rope_freq_base_swa,
                        ReadFloat(f, Key(*c, "rope.freq_base_swa"), 0.0, 1e12, &base));
  } else {
    LL_ASSIGN_OR_RETURN(c->rope_freq_base_swa, ReadFloat(f, Key(*c, "rope.freq_base_swa"), 0.0,
                                                         1e12, &c->rope_freq_base));
  }
  if (c->swa_window == 0) return Status::Ok();
  c->swa_layers.assign(static_cast<size_t>(c->n_layer), 0);
  for (int64_t il = 0; il < c->n_layer; ++il) {
    // llama.cpp's set_swa_pattern: period 0 makes every layer SWA.
    c->swa_layers[static_cast<size_t>(il)] = period == 0 || il % period < period - 1;
  }
  return Status::Ok();
}

Status ReadRope(const GgufFile& f, ModelConfig* c) {
  c->rope_layout = SpecOf(c->arch).rope;
  const std::string dim_key = Key(*c, "rope.dimension_count");
  LL_ASSIGN_OR_RETURN(c->rope_dim, OptionalInt(f, dim_key, c->head_dim_k, 2, c->head_dim_k));
  if (c->rope_dim % 2 != 0) {
    return OutOfRange(dim_key + " = " + std::to_string(c->rope_dim) + " must be even");
  }
  const float default_base = 10000.0f;
  LL_ASSIGN_OR_RETURN(c->rope_freq_base,
                      ReadFloat(f, Key(*c, "rope.freq_base"), 0.0, 1e12, &default_base));

  // Scaling: only linear (positions scaled by 1/factor) is run. "none" and an absent type
  // still honour a factor, as llama.cpp does.
  const std::string type_key = Key(*c, "rope.scaling.type");
  if (f.FindKv(type_key) != nullptr) {
    Result<std::string_view> type = f.GetString(type_key);
    if (!type.ok()) return DataLoss(type_key + ": " + type.status().message());
    // longrope: its factors are tensors (ReadLongRopeFactors) and positions are not scaled.
    if (*type != "none" && *type != "linear" && *type != "longrope") {
      return Unimplemented(type_key + " = '" + std::string(*type) +
                           "' is not supported (supported: none, linear, longrope)");
    }
  }
  const float no_factor = 0.0f;
  LL_ASSIGN_OR_RETURN(float legacy,
                      ReadFloat(f, Key(*c, "rope.scale_linear"), -1.0, 1e6, &no_factor));
  LL_ASSIGN_OR_RETURN(float factor,
                      ReadFloat(f, Key(*c, "rope.scaling.factor"), -1.0, 1e6, &legacy));
  if (factor < 0.0f) {
    return OutOfRange(Key(*c, "rope.scaling.factor") + " = " + std::to_string(factor) +
                      " must be >= 0");
  }
  c->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  const float one = 1.0f;
  LL_ASSIGN_OR_RETURN(c->rope_attn_factor,
                      ReadFloat(f, Key(*c, "rope.scaling.attn_factor"), 0.0, 1e3, &one));
  LL_ASSIGN_OR_RETURN(c->rope_orig_ctx,
                      OptionalInt(f, Key(*c, "rope.scaling.original_context_length"),
                                  c->context_length, 1, Limits::kMaxContext));
  LL_RETURN_IF_ERROR(ReadRopeFactorTensor(f, "rope_freqs.weight", c->rope_dim,
                                          &c->rope_freq_factors));
  LL_RETURN_IF_ERROR(ReadRopeFactorTensor(f, "rope_factors_long.weight", c->rope_dim,
                                          &c->rope_factors_long));
  LL_RETURN_IF_ERROR(ReadRopeFactorTensor(f, "rope_factors_short.weight", c->rope_dim,
                                          &c->rope_factors_short));
  if (c->rope_factors_long.empty() != c->rope_factors_short.empty()) {
    return NotFound("rope_factors_long.weight and rope_factors_short.weight come as a pair; "
                    "the file has only one");
  }
  return Status::Ok();
}

// The family's switches and the keys that tune them.
Status ReadArchSwitches(const GgufFile& f, ModelConfig* c) {
  const ArchSpec& a = SpecOf(c->arch);
  c->qkv_bias_required = a.qkv_bias;
  c->qk_norm = a.qk_norm;
  c->post_norms = a.post_norms;
  c->embd_scale = a.embd_scale ? std::sqrt(static_cast<float>(c->n_embd)) : 1.0f;
  c->ffn_act = a.act;
  c->output = a.output;
  // Gemma 2 / 3 (google/gemma_pytorch config): 1/sqrt(n_embd / n_head) for the 27B models,
  // whose query_pre_attn_scalar is not the head size; llama.cpp recognises them by their layer
  // count and reads no key for it. Everyone else: 1/sqrt(head_dim).
  const bool by_width = a.layers_27b != 0 && c->n_layer == a.layers_27b;
  const double scale_dim = by_width ? static_cast<double>(c->n_embd / c->n_head)
                                    : static_cast<double>(c->head_dim_k);
  c->attn_scale = static_cast<float>(1.0 / std::sqrt(scale_dim));
  const float attn_cap = a.attn_softcap, final_cap = a.final_softcap;
  if (attn_cap > 0.0f) {
    LL_ASSIGN_OR_RETURN(c->attn_softcap,
                        ReadFloat(f, Key(*c, "attn_logit_softcapping"), 0.0, 1e6, &attn_cap));
  }
  if (a.swa_period > 0 || final_cap > 0.0f) {  // the gemma2 / gemma3 rows read it
    LL_ASSIGN_OR_RETURN(c->final_softcap,
                        ReadFloat(f, Key(*c, "final_logit_softcapping"), -1.0, 1e6, &final_cap));
    if (c->final_softcap < 0.0f) c->final_softcap = 0.0f;
  }
  return ReadSlidingWindow(f, a, c);
}

Status ReadVocab(const GgufFile& f, ModelConfig* c) {
  if (const GgufKv* kv = f.FindKv("tokenizer.ggml.tokens"); kv != nullptr) {
    if (kv->value.type != GgufValueType::kArray ||
        kv->value.array_type != GgufValueType::kString) {
      return DataLoss("tokenizer.ggml.tokens: expected an array of strings");
    }
    const uint64_t n = kv->value.array_count;
    if (n < 1 || n > static_cast<uint64_t>(Limits::kMaxVocab)) {
      return OutOfRange("tokenizer.ggml.tokens: " + std::to_string(n) + " tokens outside [1, " +
                        std::to_string(Limits::kMaxVocab) + "]");
    }
    c->n_vocab = static_cast<int64_t>(n);
    return Status::Ok();
  }
  const GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr) {
    return NotFound("vocab size: neither tokenizer.ggml.tokens nor token_embd.weight present");
  }
  if (emb->ne[1] < 1 || emb->ne[1] > Limits::kMaxVocab) {
    return RangeError("token_embd.weight ne[1] (vocab)", emb->ne[1], 1, Limits::kMaxVocab);
  }
  c->n_vocab = emb->ne[1];
  return Status::Ok();
}

// Embedding / reranking keys: the pooling, the classifier head's outputs (from cls.output's
// shape; llama.cpp writes its labels as `classifier.output_labels`), and causal attention.
Status ReadPooling(const GgufFile& f, ModelConfig* c) {
  const std::string causal_key = Key(*c, "attention.causal");
  if (f.FindKv(causal_key) != nullptr) {
    Result<bool> causal = f.GetBool(causal_key);
    if (!causal.ok()) return DataLoss(causal_key + ": " + causal.status().message());
    if (!*causal) {
      return Unimplemented(causal_key + " = false: bidirectional attention (encoder "
                           "embedding models) is not supported; only causal decoders run");
    }
  }
  const std::string pool_key = Key(*c, "pooling_type");
  if (f.FindKv(pool_key) != nullptr) {
    LL_ASSIGN_OR_RETURN(const int64_t p, OptionalInt(f, pool_key, 0, 0, 4));
    c->pooling = static_cast<PoolingType>(p);  // the enum follows llama.cpp's numbering
  }
  if (const GgufTensorInfo* t = f.FindTensor("cls.output.weight"); t != nullptr) {
    if (t->n_dims > 2 || t->ne[1] < 1 || t->ne[1] > Limits::kMaxClassifierOutputs) {
      return RangeError("cls.output.weight ne[1] (classifier outputs)", t->ne[1], 1,
                        Limits::kMaxClassifierOutputs);
    }
    c->n_cls_out = t->ne[1];
  }
  const std::string labels_key = Key(*c, "classifier.output_labels");
  if (f.FindKv(labels_key) != nullptr) {
    Result<std::vector<std::string_view>> labels = f.GetStringArray(labels_key);
    if (!labels.ok()) return DataLoss(labels_key + ": " + labels.status().message());
    if (static_cast<int64_t>(labels->size()) != c->n_cls_out) {
      return DataLoss(labels_key + ": " + std::to_string(labels->size()) + " labels for " +
                      std::to_string(c->n_cls_out) + " classifier outputs (cls.output.weight)");
    }
    for (std::string_view l : *labels) c->classifier_labels.emplace_back(l.substr(0, 256));
  }
  if (c->pooling == PoolingType::kRank && c->n_cls_out == 0) {
    return NotFound(pool_key + " = 4 (rank) needs a classifier head: cls.output.weight is absent");
  }
  return Status::Ok();
}

}  // namespace

const char* ModelArchName(ModelArch arch) { return SpecOf(arch).name; }

const char* PoolingName(PoolingType pooling) {
  switch (pooling) {
    case PoolingType::kNone: return "none";
    case PoolingType::kMean: return "mean";
    case PoolingType::kCls: return "cls";
    case PoolingType::kLast: return "last";
    case PoolingType::kRank: return "rank";
    case PoolingType::kUnspecified: break;
  }
  return "unspecified";
}

std::optional<PoolingType> PoolingFromName(std::string_view name) {
  for (PoolingType p : {PoolingType::kNone, PoolingType::kMean, PoolingType::kCls,
                        PoolingType::kLast, PoolingType::kRank}) {
    if (name == PoolingName(p)) return p;
  }
  return std::nullopt;
}

const std::vector<float>& ModelConfig::RopeFactorsFor(int64_t n_ctx) const {
  if (!rope_freq_factors.empty() || rope_factors_long.empty()) return rope_freq_factors;
  return n_ctx > rope_orig_ctx ? rope_factors_long : rope_factors_short;
}

Result<ModelConfig> ReadModelConfig(const GgufFile& file) {
  ModelConfig c;
  LL_ASSIGN_OR_RETURN(c.arch, ReadArch(file, &c.arch_name));
  LL_RETURN_IF_ERROR(ReadDims(file, &c));
  LL_RETURN_IF_ERROR(ReadHeadDims(file, &c));
  LL_RETURN_IF_ERROR(ReadRope(file, &c));
  LL_RETURN_IF_ERROR(ReadArchSwitches(file, &c));
  LL_RETURN_IF_ERROR(ReadVocab(file, &c));
  LL_RETURN_IF_ERROR(ReadPooling(file, &c));
  return c;
}

}  // namespace lifeline
