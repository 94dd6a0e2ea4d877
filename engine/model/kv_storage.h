// KvStorage: the memory of a paged key/value cache and nothing else. It owns one byte buffer
// per layer for K and one for V, laid out as [block][kKvBlockTokens][row], where a row is
// one token's K (n_head_kv heads of head_dim_k values) or V (n_head_kv heads of head_dim_v
// values) in the storage type: F16 by default, F32, or Q8_0. Q8_0 quantizes each head on its
// own in blocks of 32 values with an f16 scale (ggml's block_q8_0, 34 bytes; a head whose
// dim is not a multiple of 32 ends in a partly used block), so a head's bytes never straddle
// another head's and attention can read one KV head alone. Which block belongs to which
// sequence is kept by the bookkeeping in kv_blocks.h; this class only answers "where is K of
// (layer, block, slot)".
//
// Ownership: owns its buffers. Thread-safety: Create/destroy from one thread; concurrent
// writes to distinct (layer, block, slot) rows and concurrent reads are safe.
// Failure: Create returns ResourceExhausted when the size overflows or exceeds max_bytes;
// an out-of-range index is a programming error (LL_CHECK aborts) since callers validate
// positions and block ids first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lifeline {

// Token positions per KV block.
inline constexpr int64_t kKvBlockTokens = 16;

enum class KvType : uint8_t { kF16, kF32, kQ8_0 };

// "f16", "f32", "q8_0" (the spelling of the --kv-type flag); ParseKvType is its inverse.
const char* KvTypeName(KvType type);
std::optional<KvType> ParseKvType(std::string_view name);
// Bytes of one head's row of head_dim values in the storage type.
int64_t KvHeadBytes(KvType type, int64_t head_dim);
// Bytes of one KV block (kKvBlockTokens positions, K and V, all layers): for sizing a pool
// from a memory budget. Dims must be >= 1 and small enough not to overflow (model limits).
uint64_t KvBlockBytes(KvType type, int64_t n_layer, int64_t n_head_kv, int64_t head_dim_k,
                      int64_t head_dim_v);

struct KvStorageShape {
  int64_t n_layer = 0;
  int64_t n_blocks = 0;
  int64_t k_row_elems = 0;  // n_head_kv * head_dim_k
  int64_t v_row_elems = 0;  // n_head_kv * head_dim_v
  KvType type = KvType::kF16;
  // Heads per row: Q8_0 quantizes each head separately (F16/F32 rows do not depend on it).
  int64_t n_head_kv = 1;
};

class KvStorage {
 public:
  static Result<std::unique_ptr<KvStorage>> Create(const KvStorageShape& shape,
                                                   uint64_t max_bytes);

  const KvStorageShape& shape() const { return shape_; }
  KvType type() const { return shape_.type; }
  uint64_t size_bytes() const { return size_bytes_; }

  // Pointer to one token row in the storage type: K [k_row_elems], V [v_row_elems].
  uint8_t* K(int64_t layer, int32_t block, int64_t slot) {
    return Row(k_, k_row_bytes_, layer, block, slot);
  }
  uint8_t* V(int64_t layer, int32_t block, int64_t slot) {
    return Row(v_, v_row_bytes_, layer, block, slot);
  }
  const uint8_t* K(int64_t layer, int32_t block, int64_t slot) const {
    return const_cast<KvStorage*>(this)->K(layer, block, slot);
  }
  const uint8_t* V(int64_t layer, int32_t block, int64_t slot) const {
    return const_cast<KvStorage*>(this)->V(layer, block, slot);
  }

  // Conversions between one f32 token row and the storage type; n is k_row_elems or
  // v_row_elems (the row's n_head_kv heads of n / n_head_kv values each).
  void StoreRow(const float* src, uint8_t* dst, int64_t n) const;
  void LoadRow(const uint8_t* src, float* dst, int64_t n) const;

  // Raw layout for the attention kernels: a layer's buffers, bytes between slots (rows) and
  // between blocks, and bytes per head within a row.
  const uint8_t* KLayer(int64_t layer) const;
  const uint8_t* VLayer(int64_t layer) const;
  uint64_t k_row_bytes() const { return k_row_bytes_; }
  uint64_t v_row_bytes() const { return v_row_bytes_; }
  int64_t k_head_bytes() const { return k_head_bytes_; }
  int64_t v_head_bytes() const { return v_head_bytes_; }

 private:
  explicit KvStorage(const KvStorageShape& shape) : shape_(shape) {}
  uint8_t* Row(std::vector<std::unique_ptr<uint8_t[]>>& bufs, uint64_t row_bytes, int64_t layer,
               int32_t block, int64_t slot);

  KvStorageShape shape_;
  uint64_t k_row_bytes_ = 0;
  uint64_t v_row_bytes_ = 0;
  int64_t k_head_bytes_ = 0;
  int64_t v_head_bytes_ = 0;
  uint64_t size_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> k_;  // [n_layer] x [n_blocks][16][k_row_elems]
  std::vector<std::unique_ptr<uint8_t[]>> v_;  // [n_layer] x [n_blocks][16][v_row_elems]
};

}  // namespace lifeline
