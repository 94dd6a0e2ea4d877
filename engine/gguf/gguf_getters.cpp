// Typed metadata getters of GgufFile. The parser stored every value as read; these decide
// which stored types satisfy a request and reject the rest naming the key and both types.
#include <cinttypes>
#include <cstring>
#include <limits>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_text.h"

namespace lifeline {
namespace {

bool IsUnsignedInt(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}

bool IsSignedInt(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}

std::string KvName(const GgufKv& kv) {
  return "key '" + SanitizeForMessage(kv.key) + "' (at byte " + std::to_string(kv.file_offset) +
         ")";
}

Status TypeMismatch(const GgufKv& kv, const char* expected) {
  std::string found = GgufValueTypeName(kv.value.type);
  if (kv.value.type == GgufValueType::kArray) {
    found += " of ";
    found += GgufValueTypeName(kv.value.array_type);
  }
  return DataLoss(KvName(kv) + ": type is " + found + ", expected " + expected);
}

Result<const GgufKv*> Lookup(const GgufFile& f, std::string_view key) {
  const GgufKv* kv = f.FindKv(key);
  if (kv == nullptr) return NotFound("key '" + SanitizeForMessage(key) + "' is not in the file");
  return kv;
}

// Array of exactly `elem` elements, or a DataLoss naming both types.
Result<const GgufKv*> LookupArray(const GgufFile& f, std::string_view key, GgufValueType elem,
                                  const char* expected) {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(f, key));
  if (kv->value.type != GgufValueType::kArray || kv->value.array_type != elem) {
    return TypeMismatch(*kv, expected);
  }
  return kv;
}

}  // namespace

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  if (IsUnsignedInt(kv->value.type)) return kv->value.u64;
  if (IsSignedInt(kv->value.type)) {
    if (kv->value.i64 < 0) {
      return DataLoss(KvName(*kv) + ": value " + std::to_string(kv->value.i64) +
                      " is negative, expected an unsigned integer");
    }
    return static_cast<uint64_t>(kv->value.i64);
  }
  return TypeMismatch(*kv, "an unsigned integer");
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  if (IsSignedInt(kv->value.type)) return kv->value.i64;
  if (IsUnsignedInt(kv->value.type)) {
    if (kv->value.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLoss(KvName(*kv) + ": value " + std::to_string(kv->value.u64) +
                      " exceeds the int64 maximum");
    }
    return static_cast<int64_t>(kv->value.u64);
  }
  return TypeMismatch(*kv, "an integer");
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  const GgufValueType t = kv->value.type;
  if (t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64) return kv->value.f64;
  if (IsUnsignedInt(t)) return static_cast<double>(kv->value.u64);
  if (IsSignedInt(t)) return static_cast<double>(kv->value.i64);
  return TypeMismatch(*kv, "a number");
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  if (kv->value.type != GgufValueType::kBool) return TypeMismatch(*kv, "bool");
  return kv->value.b;
}

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  if (kv->value.type != GgufValueType::kString) return TypeMismatch(*kv, "string");
  return kv->value.str;
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv,
                      LookupArray(*this, key, GgufValueType::kString, "array of string"));
  return kv->value.strings;
}

Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv,
                      LookupArray(*this, key, GgufValueType::kFloat32, "array of float32"));
  // [array_count] little-endian f32, validated to lie inside the file; may be unaligned.
  std::vector<float> out(kv->value.array_count);
  if (!out.empty()) std::memcpy(out.data(), kv->value.array_data, out.size() * sizeof(float));
  return out;
}

Result<std::vector<int32_t>> GgufFile::GetInt32Array(std::string_view key) const {
  LL_ASSIGN_OR_RETURN(const GgufKv* kv, Lookup(*this, key));
  const GgufValue& v = kv->value;
  if (v.type != GgufValueType::kArray ||
      (v.array_type != GgufValueType::kInt32 && v.array_type != GgufValueType::kUint32)) {
    return TypeMismatch(*kv, "array of int32 or uint32");
  }
  std::vector<int32_t> out(v.array_count);
  if (!out.empty()) std::memcpy(out.data(), v.array_data, out.size() * sizeof(int32_t));
  if (v.array_type == GgufValueType::kUint32) {
    // The same bits read as int32 are negative exactly when the uint32 exceeds INT32_MAX.
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] < 0) {
        return DataLoss(KvName(*kv) + ": element " + std::to_string(i) + " = " +
                        std::to_string(static_cast<uint32_t>(out[i])) +
                        " exceeds the int32 maximum");
      }
    }
  }
  return out;
}

}  // namespace lifeline
