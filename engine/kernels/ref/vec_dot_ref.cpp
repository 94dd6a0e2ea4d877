// Scalar twins (see vec_dot_ref.h). Each block is first unpacked to plain integer levels in
// natural element order, then dotted group by group in int32 — the clearest statement of the
// format, and still a reasonable fallback on CPUs without a SIMD table.
#include "engine/kernels/ref/vec_dot_ref.h"

#include <cstring>

#include "base/check.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/ref/quant_blocks.h"

namespace lifeline::ref {
namespace {

template <typename Block>
Block LoadBlock(const uint8_t* row, int64_t i) {
  Block b;
  std::memcpy(&b, row + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

inline float H(uint16_t h) { return Fp16ToFp32(h); }

// Dot of N int levels (already offset) with N activation values. N is a compile-time
// constant (16 or 32) so the loop vectorises without remainder handling.
template <int N>
inline int32_t DotI(const int8_t* q, const int8_t* y) {
  int32_t s = 0;
  for (int j = 0; j < N; ++j) s += static_cast<int32_t>(q[j]) * static_cast<int32_t>(y[j]);
  return s;
}

// ---- 32-value blocks --------------------------------------------------------------------

// Q4_0/Q4_1 nibbles: element j is the low nibble of qs[j], element j+16 the high nibble.
inline void Unpack4(const uint8_t* qs, int offset, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0x0f) - offset);
    q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
  }
}

// Q5_0/Q5_1: as Unpack4 plus bit j of the little-endian uint32 qh as the fifth bit.
inline void Unpack5(const uint8_t* qs, const uint8_t* qh_bytes, int offset, int8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
    q[j] = static_cast<int8_t>(((qs[j] & 0x0f) | h0) - offset);
    q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | h1) - offset);
  }
}

float DotQ4_0(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ4_0>(w, b);
    Unpack4(blk.qs, 8, q);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(q, a.qs + b * 32));
  }
  return sum;
}

float DotIQ4_NL(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockIQ4_NL>(w, b);
    for (int j = 0; j < 16; ++j) {
      q[j] = kIq4nlValues[blk.qs[j] & 0x0f];
      q[j + 16] = kIq4nlValues[blk.qs[j] >> 4];
    }
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(q, a.qs + b * 32));
  }
  return sum;
}

float DotQ5_0(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ5_0>(w, b);
    Unpack5(blk.qs, blk.qh, 16, q);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(q, a.qs + b * 32));
  }
  return sum;
}

float DotQ8_0(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ8_0>(w, b);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(blk.qs, a.qs + b * 32));
  }
  return sum;
}

float DotQ4_1(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ4_1>(w, b);
    Unpack4(blk.qs, 0, q);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(q, a.qs + b * 32)) +
           H(blk.m) * a.s[b];
  }
  return sum;
}

float DotQ5_1(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ5_1>(w, b);
    Unpack5(blk.qs, blk.qh, 0, q);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(DotI<32>(q, a.qs + b * 32)) +
           H(blk.m) * a.s[b];
  }
  return sum;
}

// ---- K-quants (256-value super-blocks) --------------------------------------------------

// Q2_K / Q3_K 2-bit field: in each 128-value half (32 bytes), element 32*g + l is bits
// 2g..2g+1 of byte l.
inline int Get2(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
// Q4_K / Q5_K nibbles: in each 64-value chunk (32 bytes), element l is the low nibble of byte
// l and element 32 + l the high nibble.
inline int Get4(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
}
// Q3_K high bit / Q5_K fifth bit: element e is bit e / 32 of byte e % 32.
inline int GetBit(const uint8_t* bits, int e) { return (bits[e % 32] >> (e / 32)) & 1; }

float DotQ2K(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ2K>(w, b);
    for (int e = 0; e < kQK; ++e) q[e] = static_cast<int8_t>(Get2(blk.qs, e));
    const int8_t* y = a.qs + b * kQK;
    int32_t isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      isum += (blk.scales[g] & 0x0f) * DotI<16>(q + 16 * g, y + 16 * g);
      msum += (blk.scales[g] >> 4) * a.bsums[b * 16 + g];
    }
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(isum) -
           (H(blk.dmin) * a.d[b]) * static_cast<float>(msum);
  }
  return sum;
}

float DotQ3K(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ3K>(w, b);
    for (int e = 0; e < kQK; ++e) {
      q[e] = static_cast<int8_t>(Get2(blk.qs, e) - (GetBit(blk.hmask, e) ? 0 : 4));
    }
    const int8_t* y = a.qs + b * kQK;
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      isum += UnpackScaleQ3K(g, blk.scales) * DotI<16>(q + 16 * g, y + 16 * g);
    }
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(isum);
  }
  return sum;
}

// Shared by Q4_K and Q5_K once the levels are unpacked.
float ScaleMinDot(const int8_t* q, const uint8_t* scales, uint16_t d, uint16_t dmin,
                  const ActRow& a, int64_t b) {
  const int8_t* y = a.qs + b * kQK;
  int32_t isum = 0, msum = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    UnpackScaleMinK4(j, scales, &sc, &m);
    isum += sc * DotI<32>(q + 32 * j, y + 32 * j);
    msum += m * (a.bsums[b * 16 + 2 * j] + a.bsums[b * 16 + 2 * j + 1]);
  }
  return (H(d) * a.d[b]) * static_cast<float>(isum) -
         (H(dmin) * a.d[b]) * static_cast<float>(msum);
}

float DotQ4K(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ4K>(w, b);
    for (int e = 0; e < kQK; ++e) q[e] = static_cast<int8_t>(Get4(blk.qs, e));
    sum += ScaleMinDot(q, blk.scales, blk.d, blk.dmin, a, b);
  }
  return sum;
}

float DotQ5K(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ5K>(w, b);
    for (int e = 0; e < kQK; ++e) {
      q[e] = static_cast<int8_t>(Get4(blk.qs, e) | (GetBit(blk.qh, e) << 4));
    }
    sum += ScaleMinDot(q, blk.scales, blk.d, blk.dmin, a, b);
  }
  return sum;
}

// Q6_K: in each 128-value half (64 ql bytes, 32 qh bytes), element 32*g + l has its low 4
// bits in nibble g/2 of ql[32*(g%2) + l] and its high 2 bits in bits 2g..2g+1 of qh[l].
float DotQ6K(const uint8_t* w, const ActRow& a, int64_t nb) {
  float sum = 0.0f;
  int8_t q[kQK];
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = LoadBlock<BlockQ6K>(w, b);
    for (int e = 0; e < kQK; ++e) {
      const int half = e / 128, g = (e % 128) / 32, l = e % 32;
      const int lo = (blk.ql[64 * half + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0x0f;
      const int hi = (blk.qh[32 * half + l] >> (2 * g)) & 3;
      q[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    const int8_t* y = a.qs + b * kQK;
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) isum += blk.scales[g] * DotI<16>(q + 16 * g, y + 16 * g);
    sum += (H(blk.d) * a.d[b]) * static_cast<float>(isum);
  }
  return sum;
}

// ---- Float types ------------------------------------------------------------------------
// Eight interleaved partial sums (element i goes to sum i % 8), combined pairwise at the end:
// the order a SIMD kernel would use, and short enough dependency chains that the compiler can
// vectorise this fallback.

template <typename Load>
float DotFloat(int64_t n, Load&& load) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += load(i + j);
  }
  for (; i < n; ++i) part[i % 8] += load(i);
  return ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
}

float DotF32(const uint8_t* w, const ActRow& a, int64_t n) {
  return DotFloat(n, [&](int64_t i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v * a.f[i];
  });
}

float DotF16(const uint8_t* w, const ActRow& a, int64_t n) {
  return DotFloat(n, [&](int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Fp16ToFp32(h) * a.f[i];
  });
}

float DotBF16(const uint8_t* w, const ActRow& a, int64_t n) {
  return DotFloat(n, [&](int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Bf16ToFp32(h) * Bf16ToFp32(a.bf[i]);
  });
}

}  // namespace

bool HasVecDot(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K: return true;
    default: return false;
  }
}

float VecDot(GgmlType type, const uint8_t* w_row, const ActRow& a, int64_t n) {
  switch (type) {
    case GgmlType::kF32: return DotF32(w_row, a, n);
    case GgmlType::kF16: return DotF16(w_row, a, n);
    case GgmlType::kBF16: return DotBF16(w_row, a, n);
    case GgmlType::kQ4_0: return DotQ4_0(w_row, a, n / 32);
    case GgmlType::kQ4_1: return DotQ4_1(w_row, a, n / 32);
    case GgmlType::kQ5_0: return DotQ5_0(w_row, a, n / 32);
    case GgmlType::kQ5_1: return DotQ5_1(w_row, a, n / 32);
    case GgmlType::kQ8_0: return DotQ8_0(w_row, a, n / 32);
    case GgmlType::kIQ4_NL: return DotIQ4_NL(w_row, a, n / 32);
    case GgmlType::kQ2_K: return DotQ2K(w_row, a, n / kQK);
    case GgmlType::kQ3_K: return DotQ3K(w_row, a, n / kQK);
    case GgmlType::kQ4_K: return DotQ4K(w_row, a, n / kQK);
    case GgmlType::kQ5_K: return DotQ5K(w_row, a, n / kQK);
    case GgmlType::kQ6_K: return DotQ6K(w_row, a, n / kQK);
    default: break;
  }
  LL_CHECK(false && "VecDot: weight type without a dot product");
  return 0.0f;
}

}  // namespace lifeline::ref
