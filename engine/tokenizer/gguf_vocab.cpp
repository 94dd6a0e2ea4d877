// Tokenizer::FromGguf: reads tokenizer.ggml.* into a VocabSpec, checking every key's type,
// then hands it to FromVocab for the content checks.
#include <limits>
#include <string>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline {
namespace {

bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }

Result<std::optional<std::string>> OptionalString(const GgufFile& f, std::string_view key) {
  if (f.FindKv(key) == nullptr) return std::optional<std::string>();
  LL_ASSIGN_OR_RETURN(std::string_view v, f.GetString(key));
  return std::optional<std::string>(std::string(v));
}

Result<std::optional<bool>> OptionalBool(const GgufFile& f, std::string_view key) {
  if (f.FindKv(key) == nullptr) return std::optional<bool>();
  LL_ASSIGN_OR_RETURN(bool v, f.GetBool(key));
  return std::optional<bool>(v);
}

// A token id of any integer type, kept as stored (range checks happen in FromVocab, which
// also treats -1 / 0xFFFFFFFF as "unset").
Result<std::optional<int64_t>> OptionalTokenId(const GgufFile& f, std::string_view key) {
  const GgufKv* kv = f.FindKv(key);
  if (kv == nullptr) return std::optional<int64_t>();
  switch (kv->value.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      if (kv->value.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return OutOfRange(std::string(key) + " = " + std::to_string(kv->value.u64) +
                          " is not a token id");
      }
      return std::optional<int64_t>(static_cast<int64_t>(kv->value.u64));
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return std::optional<int64_t>(kv->value.i64);
    default:
      return DataLoss(std::string(key) + " has type " + GgufValueTypeName(kv->value.type) +
                      ", expected an integer token id");
  }
}

template <typename T, typename Getter>
Status OptionalArray(const GgufFile& f, std::string_view key, Getter get, std::vector<T>* out) {
  if (f.FindKv(key) == nullptr) return Status::Ok();
  auto r = (f.*get)(key);
  if (!r.ok()) return r.status();
  out->assign(r->begin(), r->end());
  return Status::Ok();
}

Status ReadSpecialIds(const GgufFile& f, VocabSpec* spec) {
  struct Key {
    const char* name;
    std::optional<int64_t> VocabSpec::*field;
  };
  static constexpr Key kKeys[] = {
      {"tokenizer.ggml.bos_token_id", &VocabSpec::bos_id},
      {"tokenizer.ggml.eos_token_id", &VocabSpec::eos_id},
      {"tokenizer.ggml.unknown_token_id", &VocabSpec::unk_id},
      {"tokenizer.ggml.seperator_token_id", &VocabSpec::sep_id},
      {"tokenizer.ggml.padding_token_id", &VocabSpec::pad_id},
      {"tokenizer.ggml.mask_token_id", &VocabSpec::mask_id},
      {"tokenizer.ggml.eot_token_id", &VocabSpec::eot_id},
      {"tokenizer.ggml.eom_token_id", &VocabSpec::eom_id},
      {"tokenizer.ggml.fim_pre_token_id", &VocabSpec::fim_pre_id},
      {"tokenizer.ggml.fim_suf_token_id", &VocabSpec::fim_suf_id},
      {"tokenizer.ggml.fim_mid_token_id", &VocabSpec::fim_mid_id},
      {"tokenizer.ggml.fim_pad_token_id", &VocabSpec::fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &VocabSpec::fim_rep_id},
      {"tokenizer.ggml.fim_sep_token_id", &VocabSpec::fim_sep_id},
      // Older files: the FIM ids under their previous names (used when the new ones are absent).
      {"tokenizer.ggml.prefix_token_id", &VocabSpec::fim_pre_id},
      {"tokenizer.ggml.suffix_token_id", &VocabSpec::fim_suf_id},
      {"tokenizer.ggml.middle_token_id", &VocabSpec::fim_mid_id},
  };
  for (const Key& k : kKeys) {
    LL_ASSIGN_OR_RETURN(std::optional<int64_t> id, OptionalTokenId(f, k.name));
    if (id.has_value() && !(spec->*(k.field)).has_value()) spec->*(k.field) = id;
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file, const TokenizerLimits& limits) {
  VocabSpec spec;
  {
    auto model = file.GetString("tokenizer.ggml.model");
    if (!model.ok()) {
      if (IsNotFound(model.status())) return NotFound("tokenizer.ggml.model is missing: the file has no vocabulary");
      return model.status();
    }
    spec.model = std::string(*model);
  }
  LL_ASSIGN_OR_RETURN(spec.pre, OptionalString(file, "tokenizer.ggml.pre"));
  {
    auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
    if (!tokens.ok()) {
      if (IsNotFound(tokens.status())) return NotFound("tokenizer.ggml.tokens is missing");
      return tokens.status();
    }
    spec.tokens.assign(tokens->begin(), tokens->end());
  }
  LL_RETURN_IF_ERROR(OptionalArray(file, "tokenizer.ggml.scores", &GgufFile::GetFloatArray, &spec.scores));
  LL_RETURN_IF_ERROR(
      OptionalArray(file, "tokenizer.ggml.token_type", &GgufFile::GetInt32Array, &spec.token_types));
  if (spec.model == "gpt2" && file.FindKv("tokenizer.ggml.merges") == nullptr) {
    return DataLoss("tokenizer.ggml.merges is missing (required when tokenizer.ggml.model is 'gpt2')");
  }
  LL_RETURN_IF_ERROR(
      OptionalArray(file, "tokenizer.ggml.merges", &GgufFile::GetStringArray, &spec.merges));
  LL_RETURN_IF_ERROR(ReadSpecialIds(file, &spec));
  LL_ASSIGN_OR_RETURN(spec.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token"));
  LL_ASSIGN_OR_RETURN(spec.add_eos, OptionalBool(file, "tokenizer.ggml.add_eos_token"));
  LL_ASSIGN_OR_RETURN(spec.add_space_prefix, OptionalBool(file, "tokenizer.ggml.add_space_prefix"));
  return FromVocab(std::move(spec), limits);
}

}  // namespace lifeline
