// Tensor element types as numbered in GGUF files (the ggml type ids), with their block
// geometry. A "block" is the smallest unit a row is stored in: block_elems values packed into
// block_bytes bytes. Rows must hold a whole number of blocks.
//
// Thread-safety: constant tables only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lifeline {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,  // 32 values: f16 d + 16 nibble indices into a fixed non-linear table
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// Elements per super-block for the K-quants.
inline constexpr int64_t kQK_K = 256;

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // "q4_0", as llama.cpp spells it
  int64_t block_elems;    // values per block
  int64_t block_bytes;    // bytes per block
  bool weight_supported;  // Lifeline can dequantize / run it as a weight
};

// Returns nullopt for ids that are not a known ggml type (deprecated or unassigned ids
// included): callers reject the file naming the field.
std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t type_id);
const GgmlTypeTraits& TypeTraits(GgmlType type);  // type must be a known enum value
std::optional<GgmlType> TypeFromName(std::string_view name);

// Bytes of one row of n_elems elements, or nullopt when n_elems is not a whole number of
// blocks (or would overflow).
std::optional<uint64_t> RowBytes(GgmlType type, int64_t n_elems);

}  // namespace lifeline
