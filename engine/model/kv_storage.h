// KvStorage: the memory of a paged key/value cache and nothing else. It owns one byte buffer
// per layer for K and one for V, laid out as [block][kKvBlockTokens][row], where a row is
// one token's K (n_head_kv * head_dim_k values) or V (n_head_kv * head_dim_v values) in the
// storage type (F16 by default, or F32). Which block belongs to which sequence is kept by
// the bookkeeping in kv_blocks.h; this class only answers "where is K of (layer, block,
// slot)".
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
#include <vector>

#include "base/status.h"

namespace lifeline {

// Token positions per KV block.
inline constexpr int64_t kKvBlockTokens = 16;

enum class KvType : uint8_t { kF16, kF32 };

const char* KvTypeName(KvType type);
inline int64_t KvTypeBytes(KvType type) { return type == KvType::kF16 ? 2 : 4; }

struct KvStorageShape {
  int64_t n_layer = 0;
  int64_t n_blocks = 0;
  int64_t k_row_elems = 0;  // n_head_kv * head_dim_k
  int64_t v_row_elems = 0;  // n_head_kv * head_dim_v
  KvType type = KvType::kF16;
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

  // Conversions between f32 activations and the storage type (n values).
  void StoreRow(const float* src, uint8_t* dst, int64_t n) const;
  void LoadRow(const uint8_t* src, float* dst, int64_t n) const;

 private:
  explicit KvStorage(const KvStorageShape& shape) : shape_(shape) {}
  uint8_t* Row(std::vector<std::unique_ptr<uint8_t[]>>& bufs, uint64_t row_bytes, int64_t layer,
               int32_t block, int64_t slot);

  KvStorageShape shape_;
  uint64_t k_row_bytes_ = 0;
  uint64_t v_row_bytes_ = 0;
  uint64_t size_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> k_;  // [n_layer] x [n_blocks][16][k_row_elems]
  std::vector<std::unique_ptr<uint8_t[]>> v_;  // [n_layer] x [n_blocks][16][v_row_elems]
};

}  // namespace lifeline
