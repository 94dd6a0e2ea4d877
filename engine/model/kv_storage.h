// KvStorage: the memory of a paged key/value cache and nothing else. It owns one mapping
// holding, per layer, a K buffer and a V buffer laid out as [block][head][kKvBlockTokens]
// [head row]: within a block, each KV head's 16 positions are contiguous, so attention, which
// reads one KV head at a time, streams one run of bytes per block (2 KiB for an F16 head of
// 64) instead of picking one head's slice out of every token's row. A head row is head_dim_k
// (K) or head_dim_v (V) values in the storage type: F16 by default, F32, or Q8_0. Q8_0
// quantizes each head on its own in blocks of 32 values with an f16 scale (ggml's
// block_q8_0, 34 bytes; a head whose dim is not a multiple of 32 ends in a partly used
// block). Which block belongs to which sequence is kept by the bookkeeping in kv_blocks.h;
// this class only answers "where is K of (layer, block, head, slot)".
//
// Ownership: owns its buffers. Thread-safety: Create/destroy from one thread; concurrent
// writes to distinct (layer, block, slot) positions and concurrent reads are safe.
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

#include "base/huge_page_buffer.h"
#include "base/kv_block.h"
#include "base/status.h"

namespace lifeline {

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

  // One token's K [k_row_elems] / V [v_row_elems] (n_head_kv heads of head_dim values, head
  // after head) into / out of position (block, slot) of a layer, converted to / from the
  // storage type.
  void StoreK(int64_t layer, int32_t block, int64_t slot, const float* src);
  void StoreV(int64_t layer, int32_t block, int64_t slot, const float* src);
  void LoadK(int64_t layer, int32_t block, int64_t slot, float* dst) const;
  void LoadV(int64_t layer, int32_t block, int64_t slot, float* dst) const;

  // Raw layout of one KV head of a layer for the attention kernels: the head's row of
  // (block b, slot s) is at base + b * block_bytes + s * slot_bytes.
  struct HeadLayout {
    const uint8_t* base = nullptr;
    uint64_t block_bytes = 0;
    uint64_t slot_bytes = 0;
  };
  HeadLayout KHead(int64_t layer, int64_t head) const;
  HeadLayout VHead(int64_t layer, int64_t head) const;

  // One block's K and V over every layer as one opaque run of block_bytes() bytes (layer 0 K,
  // layer 0 V, layer 1 K, ...), in the storage type: what a prefix-cache tier below the pool
  // keeps of an evicted block and copies back into another block id (serving/kv_tier.h).
  uint64_t block_bytes() const {
    return static_cast<uint64_t>(shape_.n_layer) * kKvBlockTokens * (k_row_bytes_ + v_row_bytes_);
  }
  void CopyBlockOut(int32_t block, uint8_t* dst) const;
  void CopyBlockIn(int32_t block, const uint8_t* src);

  // Bytes of one token's K / V over all heads, and of one head's row.
  uint64_t k_row_bytes() const { return k_row_bytes_; }
  uint64_t v_row_bytes() const { return v_row_bytes_; }
  int64_t k_head_bytes() const { return k_head_bytes_; }
  int64_t v_head_bytes() const { return v_head_bytes_; }

 private:
  explicit KvStorage(const KvStorageShape& shape) : shape_(shape) {}
  // Head h's row of (layer, block, slot) in bufs (k_ or v_) of head rows of head_bytes.
  uint8_t* HeadRow(const std::vector<uint8_t*>& bufs, uint64_t row_bytes, int64_t head_bytes,
                   int64_t layer, int32_t block, int64_t slot, int64_t head) const;
  void Store(const float* src, int64_t head_dim, uint8_t* dst) const;
  void Load(const uint8_t* src, int64_t head_dim, float* dst) const;

  KvStorageShape shape_;
  uint64_t k_row_bytes_ = 0;
  uint64_t v_row_bytes_ = 0;
  int64_t k_head_bytes_ = 0;
  int64_t v_head_bytes_ = 0;
  uint64_t size_bytes_ = 0;
  HugePageBuffer buf_;       // every layer's K then V, one mapping
  std::vector<uint8_t*> k_;  // [n_layer] -> [n_blocks][n_head_kv][16][k head row], in buf_
  std::vector<uint8_t*> v_;  // [n_layer] -> [n_blocks][n_head_kv][16][v head row], in buf_
};

}  // namespace lifeline
