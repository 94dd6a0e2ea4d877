#include "engine/model/kv_storage.h"

#include <cstring>
#include <new>
#include <string>

#include "base/check.h"
#include "base/checked_math.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/fp16_row.h"

namespace lifeline {

const char* KvTypeName(KvType type) { return type == KvType::kF16 ? "f16" : "f32"; }

Result<std::unique_ptr<KvStorage>> KvStorage::Create(const KvStorageShape& shape,
                                                     uint64_t max_bytes) {
  if (shape.n_layer < 1 || shape.n_blocks < 1 || shape.k_row_elems < 1 ||
      shape.v_row_elems < 1 || shape.n_blocks > INT32_MAX) {
    return InvalidArgument("kv storage: n_layer " + std::to_string(shape.n_layer) +
                           ", n_blocks " + std::to_string(shape.n_blocks) + ", rows " +
                           std::to_string(shape.k_row_elems) + "/" +
                           std::to_string(shape.v_row_elems) + " must all be >= 1 (n_blocks <= "
                           "INT32_MAX)");
  }
  std::unique_ptr<KvStorage> s(new KvStorage(shape));
  const uint64_t elem = static_cast<uint64_t>(KvTypeBytes(shape.type));
  uint64_t k_layer = 0, v_layer = 0, per_layer = 0, total = 0;
  const uint64_t slots = static_cast<uint64_t>(shape.n_blocks) * kKvBlockTokens;
  const bool ok = CheckedMul(static_cast<uint64_t>(shape.k_row_elems), elem, &s->k_row_bytes_) &&
                  CheckedMul(static_cast<uint64_t>(shape.v_row_elems), elem, &s->v_row_bytes_) &&
                  CheckedMul(s->k_row_bytes_, slots, &k_layer) &&
                  CheckedMul(s->v_row_bytes_, slots, &v_layer) &&
                  CheckedAdd(k_layer, v_layer, &per_layer) &&
                  CheckedMul(per_layer, static_cast<uint64_t>(shape.n_layer), &total);
  if (!ok || total > max_bytes) {
    return ResourceExhausted("kv storage: " + std::to_string(shape.n_layer) + " layers x " +
                             std::to_string(shape.n_blocks) + " blocks x " +
                             std::to_string(kKvBlockTokens) + " tokens x (" +
                             std::to_string(shape.k_row_elems) + " + " +
                             std::to_string(shape.v_row_elems) + ") " + KvTypeName(shape.type) +
                             " values exceeds the cap of " + std::to_string(max_bytes) +
                             " bytes");
  }
  s->size_bytes_ = total;
  for (int64_t il = 0; il < shape.n_layer; ++il) {
    // Note: left uninitialised on purpose; a slot is always written before it is read, and
    // zeroing would commit every page of a large cache up front.
    s->k_.emplace_back(new (std::nothrow) uint8_t[k_layer]);
    s->v_.emplace_back(new (std::nothrow) uint8_t[v_layer]);
    if (!s->k_.back() || !s->v_.back()) {
      return ResourceExhausted("kv storage: allocating " + std::to_string(total) +
                               " bytes failed");
    }
  }
  return s;
}

uint8_t* KvStorage::Row(std::vector<std::unique_ptr<uint8_t[]>>& bufs, uint64_t row_bytes,
                        int64_t layer, int32_t block, int64_t slot) {
  LL_CHECK(layer >= 0 && layer < shape_.n_layer);
  LL_CHECK(block >= 0 && block < shape_.n_blocks);
  LL_CHECK(slot >= 0 && slot < kKvBlockTokens);
  const uint64_t index =
      static_cast<uint64_t>(block) * kKvBlockTokens + static_cast<uint64_t>(slot);
  return bufs[static_cast<size_t>(layer)].get() + index * row_bytes;
}

void KvStorage::StoreRow(const float* src, uint8_t* dst, int64_t n) const {
  if (shape_.type == KvType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToFp16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

void KvStorage::LoadRow(const uint8_t* src, float* dst, int64_t n) const {
  if (shape_.type == KvType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  // Note: rows are 2-byte aligned (slot offsets are multiples of the row width in halves).
  Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(src), dst, n);
}

}  // namespace lifeline
