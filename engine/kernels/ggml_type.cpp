#include "engine/kernels/ggml_type.h"

#include <array>

#include "base/check.h"
#include "base/checked_math.h"

namespace lifeline {
namespace {

// Block sizes are part of the GGUF on-disk format (ggml's block_* structs).
constexpr std::array<GgmlTypeTraits, 21> kTraits = {{
    {GgmlType::kF32, "f32", 1, 4, true},
    {GgmlType::kF16, "f16", 1, 2, true},
    {GgmlType::kQ4_0, "q4_0", 32, 2 + 16, true},
    {GgmlType::kQ4_1, "q4_1", 32, 2 + 2 + 16, true},
    {GgmlType::kQ5_0, "q5_0", 32, 2 + 4 + 16, true},
    {GgmlType::kQ5_1, "q5_1", 32, 2 + 2 + 4 + 16, true},
    {GgmlType::kQ8_0, "q8_0", 32, 2 + 32, true},
    {GgmlType::kQ8_1, "q8_1", 32, 2 + 2 + 32, false},
    {GgmlType::kQ2_K, "q2_k", kQK_K, kQK_K / 16 + kQK_K / 4 + 2 + 2, true},
    {GgmlType::kQ3_K, "q3_k", kQK_K, kQK_K / 8 + kQK_K / 4 + 12 + 2, true},
    {GgmlType::kQ4_K, "q4_k", kQK_K, 2 + 2 + 12 + kQK_K / 2, true},
    {GgmlType::kQ5_K, "q5_k", kQK_K, 2 + 2 + 12 + kQK_K / 8 + kQK_K / 2, true},
    {GgmlType::kQ6_K, "q6_k", kQK_K, kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2, true},
    {GgmlType::kQ8_K, "q8_k", kQK_K, 4 + kQK_K + kQK_K / 16 * 2, false},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 2 + 16, true},
    {GgmlType::kI8, "i8", 1, 1, false},
    {GgmlType::kI16, "i16", 1, 2, false},
    {GgmlType::kI32, "i32", 1, 4, false},
    {GgmlType::kI64, "i64", 1, 8, false},
    {GgmlType::kF64, "f64", 1, 8, false},
    {GgmlType::kBF16, "bf16", 1, 2, true},
}};

}  // namespace

std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t type_id) {
  for (const auto& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& TypeTraits(GgmlType type) {
  for (const auto& t : kTraits) {
    if (t.type == type) return t;
  }
  LL_CHECK(false && "unknown GgmlType enum value");
  return kTraits[0];
}

std::optional<GgmlType> TypeFromName(std::string_view name) {
  for (const auto& t : kTraits) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> RowBytes(GgmlType type, int64_t n_elems) {
  const auto& t = TypeTraits(type);
  if (n_elems < 0 || n_elems % t.block_elems != 0) return std::nullopt;
  uint64_t out;
  if (!CheckedMul(static_cast<uint64_t>(n_elems / t.block_elems),
                  static_cast<uint64_t>(t.block_bytes), &out)) {
    return std::nullopt;
  }
  return out;
}

}  // namespace lifeline
