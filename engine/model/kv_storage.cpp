#include "engine/model/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "base/check.h"
#include "base/checked_math.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/fp16_row.h"

namespace lifeline {

namespace {

constexpr int64_t kQ8Block = 32;       // values per Q8_0 block
constexpr int64_t kQ8BlockBytes = 34;  // f16 scale + 32 int8

// One head of n values -> ceil(n / 32) Q8_0 blocks, as ggml's quantize_row_q8_0_ref
// (d = amax / 127, q = round(x / d)); the unused tail of a partial block is zeroed.
void QuantizeHeadQ8(const float* x, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b * kQ8Block < n; ++b) {
    const int64_t m = std::min<int64_t>(kQ8Block, n - b * kQ8Block);
    const float* xb = x + b * kQ8Block;
    float amax = 0.0f;
    for (int64_t i = 0; i < m; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = dst + b * kQ8BlockBytes;
    const uint16_t dh = Fp32ToFp16(d);
    std::memcpy(blk, &dh, 2);
    std::memset(blk + 2, 0, kQ8Block);
    for (int64_t i = 0; i < m; ++i) {
      blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(xb[i] * id)));
    }
  }
}

void DequantizeHeadQ8(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b * kQ8Block < n; ++b) {
    const uint8_t* blk = src + b * kQ8BlockBytes;
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const float d = Fp16ToFp32(dh);
    const int64_t m = std::min<int64_t>(kQ8Block, n - b * kQ8Block);
    for (int64_t i = 0; i < m; ++i) {
      dst[b * kQ8Block + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
    }
  }
}

}  // namespace

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF16: return "f16";
    case KvType::kF32: return "f32";
    case KvType::kQ8_0: return "q8_0";
  }
  return "?";
}

std::optional<KvType> ParseKvType(std::string_view name) {
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kQ8_0}) {
    if (name == KvTypeName(t)) return t;
  }
  return std::nullopt;
}

int64_t KvHeadBytes(KvType type, int64_t head_dim) {
  switch (type) {
    case KvType::kF16: return 2 * head_dim;
    case KvType::kF32: return 4 * head_dim;
    case KvType::kQ8_0: return (head_dim + kQ8Block - 1) / kQ8Block * kQ8BlockBytes;
  }
  return 0;
}

uint64_t KvBlockBytes(KvType type, int64_t n_layer, int64_t n_head_kv, int64_t head_dim_k,
                      int64_t head_dim_v) {
  const uint64_t row = static_cast<uint64_t>(n_head_kv) *
                       static_cast<uint64_t>(KvHeadBytes(type, head_dim_k) +
                                             KvHeadBytes(type, head_dim_v));
  return static_cast<uint64_t>(n_layer) * kKvBlockTokens * row;
}

Result<std::unique_ptr<KvStorage>> KvStorage::Create(const KvStorageShape& shape,
                                                     uint64_t max_bytes) {
  if (shape.n_layer < 1 || shape.n_blocks < 1 || shape.k_row_elems < 1 ||
      shape.v_row_elems < 1 || shape.n_blocks > INT32_MAX || shape.n_head_kv < 1) {
    return InvalidArgument("kv storage: n_layer " + std::to_string(shape.n_layer) +
                           ", n_blocks " + std::to_string(shape.n_blocks) + ", rows " +
                           std::to_string(shape.k_row_elems) + "/" +
                           std::to_string(shape.v_row_elems) + ", n_head_kv " +
                           std::to_string(shape.n_head_kv) + " must all be >= 1 (n_blocks <= "
                           "INT32_MAX)");
  }
  if (shape.k_row_elems % shape.n_head_kv != 0 || shape.v_row_elems % shape.n_head_kv != 0) {
    return InvalidArgument("kv storage: rows of " + std::to_string(shape.k_row_elems) + "/" +
                           std::to_string(shape.v_row_elems) + " values do not split into " +
                           std::to_string(shape.n_head_kv) + " heads (n_head_kv)");
  }
  std::unique_ptr<KvStorage> s(new KvStorage(shape));
  // Row sizes are small (model dims are capped), so the per-head products cannot overflow.
  s->k_head_bytes_ = KvHeadBytes(shape.type, shape.k_row_elems / shape.n_head_kv);
  s->v_head_bytes_ = KvHeadBytes(shape.type, shape.v_row_elems / shape.n_head_kv);
  const uint64_t heads = static_cast<uint64_t>(shape.n_head_kv);
  uint64_t k_layer = 0, v_layer = 0, per_layer = 0, total = 0;
  const uint64_t slots = static_cast<uint64_t>(shape.n_blocks) * kKvBlockTokens;
  const bool ok = CheckedMul(static_cast<uint64_t>(s->k_head_bytes_), heads, &s->k_row_bytes_) &&
                  CheckedMul(static_cast<uint64_t>(s->v_head_bytes_), heads, &s->v_row_bytes_) &&
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
  // One mapping for all layers, in transparent huge pages where the kernel grants them:
  // attention reads one head's rows a whole cache row apart, one 4 KiB page per few
  // positions, and decode re-reads them every token after the weights have streamed through
  // the TLB. The kernel zero-fills pages on first touch, so an unused cache commits nothing.
  Result<HugePageBuffer> buf = HugePageBuffer::Allocate(total);
  if (!buf.ok()) {
    return ResourceExhausted("kv storage: allocating " + std::to_string(total) +
                             " bytes failed");
  }
  s->buf_ = std::move(*buf);
  uint8_t* p = s->buf_.data();
  for (int64_t il = 0; il < shape.n_layer; ++il, p += per_layer) {
    s->k_.push_back(p);
    s->v_.push_back(p + k_layer);
  }
  return s;
}

uint8_t* KvStorage::HeadRow(const std::vector<uint8_t*>& bufs, uint64_t row_bytes,
                            int64_t head_bytes, int64_t layer, int32_t block, int64_t slot,
                            int64_t head) const {
  LL_CHECK(layer >= 0 && layer < shape_.n_layer);
  LL_CHECK(block >= 0 && block < shape_.n_blocks);
  LL_CHECK(slot >= 0 && slot < kKvBlockTokens);
  LL_CHECK(head >= 0 && head < shape_.n_head_kv);
  const uint64_t offset = static_cast<uint64_t>(block) * kKvBlockTokens * row_bytes +
                          static_cast<uint64_t>(head * kKvBlockTokens + slot) *
                              static_cast<uint64_t>(head_bytes);
  return bufs[static_cast<size_t>(layer)] + offset;
}

// Within a layer's K (or V) buffer a block is one contiguous run: [head][slot][row] of
// kKvBlockTokens x row_bytes bytes at block x that size.
void KvStorage::CopyBlockOut(int32_t block, uint8_t* dst) const {
  LL_CHECK(block >= 0 && block < shape_.n_blocks);
  const uint64_t kb = kKvBlockTokens * k_row_bytes_, vb = kKvBlockTokens * v_row_bytes_;
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    std::memcpy(dst, k_[static_cast<size_t>(l)] + static_cast<uint64_t>(block) * kb, kb);
    dst += kb;
    std::memcpy(dst, v_[static_cast<size_t>(l)] + static_cast<uint64_t>(block) * vb, vb);
    dst += vb;
  }
}

void KvStorage::CopyBlockIn(int32_t block, const uint8_t* src) {
  LL_CHECK(block >= 0 && block < shape_.n_blocks);
  const uint64_t kb = kKvBlockTokens * k_row_bytes_, vb = kKvBlockTokens * v_row_bytes_;
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    std::memcpy(k_[static_cast<size_t>(l)] + static_cast<uint64_t>(block) * kb, src, kb);
    src += kb;
    std::memcpy(v_[static_cast<size_t>(l)] + static_cast<uint64_t>(block) * vb, src, vb);
    src += vb;
  }
}

KvStorage::HeadLayout KvStorage::KHead(int64_t layer, int64_t head) const {
  return {HeadRow(k_, k_row_bytes_, k_head_bytes_, layer, 0, 0, head),
          kKvBlockTokens * k_row_bytes_, static_cast<uint64_t>(k_head_bytes_)};
}

KvStorage::HeadLayout KvStorage::VHead(int64_t layer, int64_t head) const {
  return {HeadRow(v_, v_row_bytes_, v_head_bytes_, layer, 0, 0, head),
          kKvBlockTokens * v_row_bytes_, static_cast<uint64_t>(v_head_bytes_)};
}

void KvStorage::StoreK(int64_t layer, int32_t block, int64_t slot, const float* src) {
  const int64_t hd = shape_.k_row_elems / shape_.n_head_kv;
  for (int64_t h = 0; h < shape_.n_head_kv; ++h) {
    Store(src + h * hd, hd, HeadRow(k_, k_row_bytes_, k_head_bytes_, layer, block, slot, h));
  }
}

void KvStorage::StoreV(int64_t layer, int32_t block, int64_t slot, const float* src) {
  const int64_t hd = shape_.v_row_elems / shape_.n_head_kv;
  for (int64_t h = 0; h < shape_.n_head_kv; ++h) {
    Store(src + h * hd, hd, HeadRow(v_, v_row_bytes_, v_head_bytes_, layer, block, slot, h));
  }
}

void KvStorage::LoadK(int64_t layer, int32_t block, int64_t slot, float* dst) const {
  const int64_t hd = shape_.k_row_elems / shape_.n_head_kv;
  for (int64_t h = 0; h < shape_.n_head_kv; ++h) {
    Load(HeadRow(k_, k_row_bytes_, k_head_bytes_, layer, block, slot, h), hd, dst + h * hd);
  }
}

void KvStorage::LoadV(int64_t layer, int32_t block, int64_t slot, float* dst) const {
  const int64_t hd = shape_.v_row_elems / shape_.n_head_kv;
  for (int64_t h = 0; h < shape_.n_head_kv; ++h) {
    Load(HeadRow(v_, v_row_bytes_, v_head_bytes_, layer, block, slot, h), hd, dst + h * hd);
  }
}

void KvStorage::Store(const float* src, int64_t n, uint8_t* dst) const {
  switch (shape_.type) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kQ8_0:
      QuantizeHeadQ8(src, n, dst);
      return;
    case KvType::kF16:
      // F16C where the CPU has it: in decode this runs on one thread between two pool ops.
      Fp32ToFp16Row(src, reinterpret_cast<uint16_t*>(dst), n);
      return;
  }
}

void KvStorage::Load(const uint8_t* src, int64_t n, float* dst) const {
  switch (shape_.type) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kQ8_0:
      DequantizeHeadQ8(src, n, dst);
      return;
    case KvType::kF16:
      // Note: head rows are 2-byte aligned (offsets are multiples of the row width in halves).
      Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(src), dst, n);
      return;
  }
}

}  // namespace lifeline
