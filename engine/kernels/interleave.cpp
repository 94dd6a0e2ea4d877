#include "engine/kernels/interleave.h"

#include <cstring>

#include "base/check.h"

namespace lifeline::kernels {
namespace {

// Block layouts (ggml): Q4_0 {d, qs[16]}, Q4_1 {d, m, qs[16]}, Q5_0 {d, qh[4], qs[16]},
// Q5_1 {d, m, qh[4], qs[16]}, Q8_0 {d, qs[32]}, Q4_K {d, dmin, scales[12], qs[128]},
// Q5_K {d, dmin, scales[12], qh[32], qs[128]}, Q6_K {ql[128], qh[64], scales[16], d},
// Q2_K {scales[16], qs[64], d, dmin}, Q3_K {hmask[32], qs[64], scales[12], d}, IQ4_NL {d, qs[16]}.
constexpr InterleaveDesc kQ4_0{1, {0, 0}, 2, 4, 0, 32};
constexpr InterleaveDesc kQ4_1{2, {0, 2}, 4, 4, 0, 32};
constexpr InterleaveDesc kQ5_0{1, {0, 0}, 2, 5, 0, 32};
constexpr InterleaveDesc kQ5_1{2, {0, 2}, 4, 5, 0, 32};
constexpr InterleaveDesc kQ8_0{1, {0, 0}, 2, 8, 0x80, 32};
constexpr InterleaveDesc kQ4_K{2, {0, 2}, 4, 35, 0, 256};
constexpr InterleaveDesc kQ5_K{2, {0, 2}, 4, 43, 0, 256};
constexpr InterleaveDesc kQ6_K{1, {208, 0}, 0, 52, 0, 256};
constexpr InterleaveDesc kQ2_K{2, {80, 82}, 0, 20, 0, 256};
constexpr InterleaveDesc kQ3_K{1, {108, 0}, 0, 27, 0, 256};
constexpr InterleaveDesc kIQ4_NL{1, {0, 0}, 2, 4, 0, 32};
// 32 values of 2 bytes as 16 quads of value pairs (interleave.h).
constexpr InterleaveDesc kF16{0, {0, 0}, 0, 16, 0, 32};
constexpr InterleaveDesc kBF16{0, {0, 0}, 0, 16, 0, 32};

uint64_t UnitBytes(const InterleaveDesc& d) {
  return static_cast<uint64_t>(kInterleaveRows) * InterleaveBlockBytes(d);
}

}  // namespace

const InterleaveDesc* InterleaveDescFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return &kQ4_0;
    case GgmlType::kQ4_1: return &kQ4_1;
    case GgmlType::kQ5_0: return &kQ5_0;
    case GgmlType::kQ5_1: return &kQ5_1;
    case GgmlType::kQ8_0: return &kQ8_0;
    case GgmlType::kQ4_K: return &kQ4_K;
    case GgmlType::kQ5_K: return &kQ5_K;
    case GgmlType::kQ6_K: return &kQ6_K;
    case GgmlType::kQ2_K: return &kQ2_K;
    case GgmlType::kQ3_K: return &kQ3_K;
    case GgmlType::kIQ4_NL: return &kIQ4_NL;
    case GgmlType::kF16: return &kF16;
    case GgmlType::kBF16: return &kBF16;
    default: return nullptr;
  }
}

bool CanInterleave(const WeightMatrix& w) {
  const InterleaveDesc* d = InterleaveDescFor(w.type);
  return w.layout == WeightLayout::kRows && d != nullptr && w.rows > 0 &&
         w.rows % kInterleaveRows == 0 && w.cols > 0 && w.cols % d->block_elems == 0;
}

namespace {

// Groups [g0, g1) of w into dst. The descriptor is a template argument so the per-row
// copies unroll into plain 4-byte moves: a loop reading it at run time moved ~200 MB/s, and
// a load of a 1.1B model took seconds.
template <const InterleaveDesc& D>
void InterleaveGroups(const WeightMatrix& w, int64_t g0, int64_t g1, uint8_t* dst,
                      uint64_t group_stride) {
  constexpr int64_t kBlockBytes = 2 * D.n_f16 + 4 * D.n_quads;
  constexpr int64_t kUnitBytes = kInterleaveRows * kBlockBytes;
  constexpr uint32_t kX4 = 0x01010101u * D.body_xor;
  const int64_t nb = static_cast<int64_t>(w.row_bytes) / kBlockBytes;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* src = w.data + static_cast<uint64_t>(g) * kInterleaveRows * w.row_bytes;
    uint8_t* out = dst + static_cast<uint64_t>(g) * group_stride;
    for (int64_t b = 0; b < nb; ++b, out += kUnitBytes) {
      for (int r = 0; r < kInterleaveRows; ++r) {
        const uint8_t* blk = src + r * w.row_bytes + b * kBlockBytes;
        for (int f = 0; f < D.n_f16; ++f) {
          std::memcpy(out + InterleaveF16Offset(f) + 2 * r, blk + D.f16_offset[f], 2);
        }
        for (int q = 0; q < D.n_quads; ++q) {
          uint32_t v;
          std::memcpy(&v, blk + D.body_begin + 4 * q, 4);
          v ^= kX4;
          std::memcpy(out + 32 * D.n_f16 + 64 * q + 4 * r, &v, 4);
        }
      }
    }
  }
}

using GroupsFn = void (*)(const WeightMatrix&, int64_t, int64_t, uint8_t*, uint64_t);

GroupsFn GroupsFnFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return &InterleaveGroups<kQ4_0>;
    case GgmlType::kQ4_1: return &InterleaveGroups<kQ4_1>;
    case GgmlType::kQ5_0: return &InterleaveGroups<kQ5_0>;
    case GgmlType::kQ5_1: return &InterleaveGroups<kQ5_1>;
    case GgmlType::kQ8_0: return &InterleaveGroups<kQ8_0>;
    case GgmlType::kQ4_K: return &InterleaveGroups<kQ4_K>;
    case GgmlType::kQ5_K: return &InterleaveGroups<kQ5_K>;
    case GgmlType::kQ6_K: return &InterleaveGroups<kQ6_K>;
    case GgmlType::kQ2_K: return &InterleaveGroups<kQ2_K>;
    case GgmlType::kQ3_K: return &InterleaveGroups<kQ3_K>;
    case GgmlType::kIQ4_NL: return &InterleaveGroups<kIQ4_NL>;
    case GgmlType::kF16: return &InterleaveGroups<kF16>;
    case GgmlType::kBF16: return &InterleaveGroups<kBF16>;
    default: return nullptr;
  }
}

}  // namespace

void InterleaveRows(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1,
                    uint64_t group_stride_bytes) {
  LL_CHECK(CanInterleave(w));
  LL_CHECK(0 <= g0 && g0 <= g1 && g1 <= w.rows / kInterleaveRows);
  LL_CHECK(group_stride_bytes >= kInterleaveRows * w.row_bytes);
  const GroupsFn fn = GroupsFnFor(w.type);
  LL_CHECK(fn != nullptr);
  fn(w, g0, g1, dst, group_stride_bytes);
}

void InterleaveRows(const WeightMatrix& w, uint8_t* dst, int64_t g0, int64_t g1) {
  InterleaveRows(w, dst, g0, g1, kInterleaveRows * w.row_bytes);
}

void InterleaveRows(const WeightMatrix& w, uint8_t* dst) {
  InterleaveRows(w, dst, 0, w.rows / kInterleaveRows);
}

void DeinterleaveRow(const WeightMatrix& w, int64_t r, uint8_t* out) {
  LL_CHECK(w.layout == WeightLayout::kInterleaved16 && r >= 0 && r < w.rows);
  const InterleaveDesc& d = *InterleaveDescFor(w.type);
  const int64_t bb = InterleaveBlockBytes(d);
  const int64_t nb = w.cols / d.block_elems;
  const uint32_t x4 = 0x01010101u * d.body_xor;
  const int64_t g = r / kInterleaveRows;
  const int lane = static_cast<int>(r % kInterleaveRows);
  const uint8_t* unit = w.data + static_cast<uint64_t>(g) * kInterleaveRows * w.row_bytes;
  for (int64_t b = 0; b < nb; ++b, unit += UnitBytes(d)) {
    uint8_t* blk = out + b * bb;
    for (int f = 0; f < d.n_f16; ++f) {
      std::memcpy(blk + d.f16_offset[f], unit + InterleaveF16Offset(f) + 2 * lane, 2);
    }
    for (int q = 0; q < d.n_quads; ++q) {
      uint32_t v;
      std::memcpy(&v, unit + InterleaveQuadOffset(d, q) + 4 * lane, 4);
      v ^= x4;
      std::memcpy(blk + d.body_begin + 4 * q, &v, 4);
    }
  }
}

const uint8_t* GgufRow(const WeightMatrix& w, int64_t r, uint8_t* tmp) {
  if (w.layout == WeightLayout::kRows) return w.data + static_cast<uint64_t>(r) * w.row_bytes;
  DeinterleaveRow(w, r, tmp);
  return tmp;
}

}  // namespace lifeline::kernels
