#include "engine/model/model_config.h"

#include <cmath>
#include <string>
#include <string_view>

#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

using Limits = ModelConfigLimits;

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
  if (*arch == "llama") return ModelArch::kLlama;
  if (*arch == "qwen2") return ModelArch::kQwen2;
  return Unimplemented("unsupported architecture '" + *name + "' (supported: llama, qwen2)");
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

  const int64_t experts = 0;
  LL_ASSIGN_OR_RETURN(int64_t n_expert, OptionalInt(f, Key(*c, "expert_count"), experts, 0,
                                                    Limits::kMaxHeads));
  if (n_expert > 0) {
    return Unimplemented(Key(*c, "expert_count") + " = " + std::to_string(n_expert) +
                         ": mixture-of-experts models are not supported");
  }
  return Status::Ok();
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

Status ReadRopeFreqFactors(const GgufFile& f, ModelConfig* c) {
  const GgufTensorInfo* t = f.FindTensor("rope_freqs.weight");
  if (t == nullptr) return Status::Ok();
  const int64_t want = c->rope_dim / 2;
  if (t->n_dims != 1 || t->ne[0] != want) {
    return DataLoss("tensor rope_freqs.weight: shape [" + std::to_string(t->ne[0]) + ", " +
                    std::to_string(t->ne[1]) + "] (n_dims " + std::to_string(t->n_dims) +
                    "), expected [" + std::to_string(want) + "] (rope_dim / 2)");
  }
  if (!ref::CanDequantize(t->type)) {
    return Unimplemented("tensor rope_freqs.weight: type " +
                         std::string(TypeTraits(t->type).name) + " is not supported");
  }
  c->rope_freq_factors.resize(static_cast<size_t>(want));  // [rope_dim/2]
  ref::DequantizeRow(t->type, t->data, c->rope_freq_factors.data(), want);
  for (int64_t i = 0; i < want; ++i) {
    const float v = c->rope_freq_factors[static_cast<size_t>(i)];
    if (!std::isfinite(v) || v <= 0.0f) {
      return OutOfRange("tensor rope_freqs.weight: factor " + std::to_string(i) + " = " +
                        std::to_string(v) + " must be finite and > 0");
    }
  }
  return Status::Ok();
}

Status ReadRope(const GgufFile& f, ModelConfig* c) {
  c->rope_layout = c->arch == ModelArch::kQwen2 ? RopeLayout::kNeox : RopeLayout::kNormal;
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
    if (*type != "none" && *type != "linear") {
      return Unimplemented(type_key + " = '" + std::string(*type) +
                           "' is not supported (supported: none, linear)");
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
  return ReadRopeFreqFactors(f, c);
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

}  // namespace

const char* ModelArchName(ModelArch arch) {
  switch (arch) {
    case ModelArch::kLlama: return "llama";
    case ModelArch::kQwen2: return "qwen2";
  }
  return "unknown";
}

Result<ModelConfig> ReadModelConfig(const GgufFile& file) {
  ModelConfig c;
  LL_ASSIGN_OR_RETURN(c.arch, ReadArch(file, &c.arch_name));
  LL_RETURN_IF_ERROR(ReadDims(file, &c));
  LL_RETURN_IF_ERROR(ReadHeadDims(file, &c));
  LL_RETURN_IF_ERROR(ReadRope(file, &c));
  LL_RETURN_IF_ERROR(ReadVocab(file, &c));
  return c;
}

}  // namespace lifeline
