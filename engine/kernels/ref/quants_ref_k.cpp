// Reference (de)quantization of the K-quants (Q2_K .. Q6_K) and of Q8_K, the activation type
// their dot products use. One super-block holds 256 values split into 16 sub-blocks of 16
// (Q2_K, Q3_K, Q6_K) or 8 of 32 (Q4_K, Q5_K), each with its own small integer scale (and min)
// relative to the super-block's f16 scale(s).
//
// As in quants_ref.cpp, every float expression keeps ggml's operand order so results are
// bit-identical to dequantize_row_* / quantize_row_*_ref. Element placement is written as
// "element e lives at byte ..., bit ..." helpers instead of ggml's pointer walks; the layouts
// are documented on each helper.
#include <cmath>
#include <cstring>

#include "engine/kernels/fp16.h"
#include "engine/kernels/ref/quant_blocks.h"
#include "engine/kernels/ref/quants_ref_internal.h"

namespace lifeline::ref::internal {
namespace {

int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// ---- Element placement -----------------------------------------------------------------

// Q2_K / Q3_K 2-bit field: each 128-value half uses 32 bytes; within it, value 32*g + l
// (g = 0..3) is bits 2g..2g+1 of byte l.
int Get2Bit(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
void Pack2Bit(const uint8_t* L, uint8_t* qs) {  // L: [256] values 0..3
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* v = L + 128 * half + l;
      qs[32 * half + l] = static_cast<uint8_t>(v[0] | (v[32] << 2) | (v[64] << 4) | (v[96] << 6));
    }
  }
}

// Q3_K high bit / Q5_K fifth bit: value e is bit e / 32 of byte e % 32.
int GetHighBit(const uint8_t* bits, int e) { return (bits[e % 32] >> (e / 32)) & 1; }

// Q4_K / Q5_K nibbles: each 64-value chunk uses 32 bytes; value l of the chunk is the low
// nibble of byte l, value 32 + l the high nibble.
int Get4Bit(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
}
void Pack4Bit(const uint8_t* L, uint8_t* qs) {  // L: [256] values 0..15
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * chunk + l] = static_cast<uint8_t>(L[64 * chunk + l] | (L[64 * chunk + l + 32] << 4));
    }
  }
}

// Q6_K: each 128-value half uses 64 ql bytes and 32 qh bytes. Value 32*g + l (g = 0..3):
// low 4 bits in ql[l + 32*(g%2)], nibble g/2; high 2 bits in qh[l], bits 2g..2g+1.
int Get6Bit(const uint8_t* ql, const uint8_t* qh, int e) {
  const int half = e / 128;
  const int g = (e % 128) / 32;
  const int l = e % 32;
  const int low = (ql[64 * half + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0x0f;
  const int high = (qh[32 * half + l] >> (2 * g)) & 3;
  return low | (high << 4);
}
void Pack6Bit(const uint8_t* L, uint8_t* ql, uint8_t* qh) {  // L: [256] values 0..63
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* v = L + 128 * half + l;
      ql[64 * half + l] = static_cast<uint8_t>((v[0] & 0x0f) | ((v[64] & 0x0f) << 4));
      ql[64 * half + 32 + l] = static_cast<uint8_t>((v[32] & 0x0f) | ((v[96] & 0x0f) << 4));
      qh[32 * half + l] = static_cast<uint8_t>((v[0] >> 4) | ((v[32] >> 4) << 2) |
                                               ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
    }
  }
}

// Inverse of UnpackScaleMinK4 (quant_blocks.h) for 8 pairs of 6-bit values.
void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = ls[j];
    scales[j + 4] = lm[j];
  }
  for (int j = 4; j < 8; ++j) {
    scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
    scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | ((ls[j] >> 4) << 6));
    scales[j] = static_cast<uint8_t>(scales[j] | ((lm[j] >> 4) << 6));
  }
}

// Inverse of UnpackScaleQ3K for 16 stored (unsigned, +32) 6-bit scales.
void PackScalesQ3K(const int* stored, uint8_t* scales) {
  std::memset(scales, 0, kKScaleBytes);
  for (int j = 0; j < 16; ++j) {
    const int l = stored[j];
    if (j < 8) {
      scales[j] = static_cast<uint8_t>(l & 0x0f);
    } else {
      scales[j - 8] = static_cast<uint8_t>(scales[j - 8] | ((l & 0x0f) << 4));
    }
    scales[8 + j % 4] = static_cast<uint8_t>(scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
  }
}

// Largest value and largest min over the sub-blocks (both start at 0: scales and negated
// mins from FitScaleAndMin are never negative).
void MaxScaleAndMin(const float* scales, const float* mins, int n, float* max_scale,
                    float* max_min) {
  *max_scale = 0;
  *max_min = 0;
  for (int j = 0; j < n; ++j) {
    if (scales[j] > *max_scale) *max_scale = scales[j];
    if (mins[j] > *max_min) *max_min = mins[j];
  }
}

// Shared tail of Q4_K / Q5_K: 6-bit quantization of the 8 sub-block scales and mins against
// d = max / 63, then requantization of every value against the stored (rounded) scales.
void QuantizeScalesAndLevelsK4(const float* x, const float* scales, const float* mins,
                               int nmax, uint16_t* d_out, uint16_t* dmin_out,
                               uint8_t* packed_scales, uint8_t* L) {
  float max_scale, max_min;
  MaxScaleAndMin(scales, mins, 8, &max_scale, &max_min);
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // ggml stores the rounded value in a uint8_t before clamping; keep that wrap.
    ls[j] = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    lm[j] = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    if (ls[j] > 63) ls[j] = 63;
    if (lm[j] > 63) lm[j] = 63;
  }
  PackScaleMinK4(ls, lm, packed_scales);
  *d_out = Fp32ToFp16(max_scale / 63.f);
  *dmin_out = Fp32ToFp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    UnpackScaleMinK4(j, packed_scales, &sc, &m);
    const float d = Fp16ToFp32(*d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keep the search's levels; they dequantize to -dm anyway
    const float dm = Fp16ToFp32(*dmin_out) * static_cast<float>(m);
    for (int i = 32 * j; i < 32 * j + 32; ++i) {
      L[i] = static_cast<uint8_t>(Clamp(NearestInt((x[i] + dm) / d), 0, nmax));
    }
  }
}

// Sub-block fits for Q4_K / Q5_K: weights favour large values (rms of the sub-block plus
// |x|), as ggml's reference does.
void FitSubBlocksK4(const float* x, int nmax, const ScaleMinSearch& search, float* scales,
                    float* mins, uint8_t* L) {
  float weights[32];
  uint8_t scratch[32];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = FitScaleAndMin(32, nmax, xs, weights, L + 32 * j, &mins[j], scratch, search);
  }
}

}  // namespace

// ---- Dequantization ----------------------------------------------------------------------

void DequantizeRowQ2K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ2K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    float* y = dst + i * kQK;  // [256]
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(b.scales[s] & 0x0f);
      const float ml = dmin * static_cast<float>(b.scales[s] >> 4);
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        y[e] = dl * static_cast<float>(Get2Bit(b.qs, e)) - ml;
      }
    }
  }
}

void DequantizeRowQ3K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ3K>(src, i);
    const float d = Fp16ToFp32(b.d);
    float* y = dst + i * kQK;  // [256]
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(UnpackScaleQ3K(s, b.scales));
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        // A clear high bit means "subtract 4": levels are stored as q + 4, q in [-4, 3].
        const int q = Get2Bit(b.qs, e) - (GetHighBit(b.hmask, e) ? 0 : 4);
        y[e] = dl * static_cast<float>(q);
      }
    }
  }
}

void DequantizeRowQ4K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ4K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    float* y = dst + i * kQK;  // [256]
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      UnpackScaleMinK4(s, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      for (int e = 32 * s; e < 32 * s + 32; ++e) {
        y[e] = d1 * static_cast<float>(Get4Bit(b.qs, e)) - m1;
      }
    }
  }
}

void DequantizeRowQ5K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ5K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    float* y = dst + i * kQK;  // [256]
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      UnpackScaleMinK4(s, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      for (int e = 32 * s; e < 32 * s + 32; ++e) {
        const int q = Get4Bit(b.qs, e) + (GetHighBit(b.qh, e) << 4);
        y[e] = d1 * static_cast<float>(q) - m1;
      }
    }
  }
}

void DequantizeRowQ6K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ6K>(src, i);
    const float d = Fp16ToFp32(b.d);
    float* y = dst + i * kQK;  // [256]
    for (int s = 0; s < 16; ++s) {
      const float ds = d * static_cast<float>(b.scales[s]);
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        y[e] = ds * static_cast<float>(Get6Bit(b.ql, b.qh, e) - 32);
      }
    }
  }
}

void DequantizeRowQ8K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const auto b = LoadBlock<BlockQ8K>(src, i);
    for (int e = 0; e < kQK; ++e) dst[i * kQK + e] = b.d * static_cast<float>(b.qs[e]);
  }
}

// ---- Quantization ------------------------------------------------------------------------

void QuantizeRowQ2K(const float* src, void* dst, int64_t n) {
  constexpr float kScaleLevels = 15.f;  // 4-bit sub-block scales and mins
  const ScaleMinSearch search{-0.5f, 0.1f, 15, /*use_mad=*/true};
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    uint8_t L[kQK];
    uint8_t scratch[16];
    float weights[16];
    float scales[16], mins[16];
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = FitScaleAndMin(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], scratch,
                                 search);
    }
    float max_scale, max_min;
    MaxScaleAndMin(scales, mins, 16, &max_scale, &max_min);

    BlockQ2K b;
    std::memset(&b, 0, sizeof(b));
    if (max_scale > 0) {
      const float iscale = kScaleLevels / max_scale;
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      b.d = Fp32ToFp16(max_scale / kScaleLevels);
    } else {
      b.d = Fp32ToFp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kScaleLevels / max_min;
      for (int j = 0; j < 16; ++j) {
        b.scales[j] = static_cast<uint8_t>(b.scales[j] | (NearestInt(iscale * mins[j]) << 4));
      }
      b.dmin = Fp32ToFp16(max_min / kScaleLevels);
    } else {
      b.dmin = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(b.d) * static_cast<float>(b.scales[j] & 0x0f);
      if (d == 0.0f) continue;
      const float dm = Fp16ToFp32(b.dmin) * static_cast<float>(b.scales[j] >> 4);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        L[e] = static_cast<uint8_t>(Clamp(NearestInt((x[e] + dm) / d), 0, 3));
      }
    }
    Pack2Bit(L, b.qs);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ3K(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    int8_t L[kQK];
    float scales[16];
    float max_scale = 0;  // signed value of the largest-magnitude sub-block scale
    float amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSymmetricScaleIterative(16, 4, x + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }

    BlockQ3K b;
    std::memset(&b, 0, sizeof(b));
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      int stored[16];
      for (int j = 0; j < 16; ++j) {
        // ggml rounds into an int8_t; |iscale * scale| <= 32, so no wrap is possible.
        stored[j] = Clamp(static_cast<int8_t>(NearestInt(iscale * scales[j])), -32, 31) + 32;
      }
      PackScalesQ3K(stored, b.scales);
      b.d = Fp32ToFp16(1 / iscale);
    } else {
      b.d = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(b.d) * static_cast<float>(UnpackScaleQ3K(j, b.scales));
      if (d == 0.0f) continue;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        L[e] = static_cast<int8_t>(Clamp(NearestInt(x[e] / d), -4, 3) + 4);
      }
    }
    // Levels 0..7: bit 2 goes to hmask, bits 0..1 to qs.
    uint8_t low[kQK];
    for (int e = 0; e < kQK; ++e) {
      if (L[e] > 3) b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1 << (e / 32)));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    Pack2Bit(low, b.qs);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ4K(const float* src, void* dst, int64_t n) {
  const ScaleMinSearch search{-1.f, 0.1f, 20, /*use_mad=*/false};
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    uint8_t L[kQK];
    float scales[8], mins[8];
    FitSubBlocksK4(x, 15, search, scales, mins, L);
    BlockQ4K b;
    QuantizeScalesAndLevelsK4(x, scales, mins, 15, &b.d, &b.dmin, b.scales, L);
    Pack4Bit(L, b.qs);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ5K(const float* src, void* dst, int64_t n) {
  const ScaleMinSearch search{-0.5f, 0.1f, 15, /*use_mad=*/false};
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    uint8_t L[kQK];
    float scales[8], mins[8];
    FitSubBlocksK4(x, 31, search, scales, mins, L);
    BlockQ5K b;
    QuantizeScalesAndLevelsK4(x, scales, mins, 31, &b.d, &b.dmin, b.scales, L);
    // Levels 0..31: bit 4 goes to qh (value e -> bit e/32 of byte e%32), the rest to qs.
    std::memset(b.qh, 0, sizeof(b.qh));
    uint8_t low[kQK];
    for (int e = 0; e < kQK; ++e) {
      if (L[e] > 15) b.qh[e % 32] = static_cast<uint8_t>(b.qh[e % 32] | (1 << (e / 32)));
      low[e] = static_cast<uint8_t>(L[e] & 0x0f);
    }
    Pack4Bit(low, b.qs);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ6K(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    int8_t L[kQK];
    float scales[16];
    float max_scale = 0;  // signed value of the largest-magnitude sub-block scale
    float max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitSymmetricScale(16, 32, x + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[j];
      }
    }
    BlockQ6K b;
    std::memset(&b, 0, sizeof(b));
    if (max_abs_scale < 1e-15f) {  // all-zero super-block
      b.d = Fp32ToFp16(0.f);
      StoreBlock(b, dst, i);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = Fp32ToFp16(1 / iscale);
    for (int j = 0; j < 16; ++j) {
      const int s = NearestInt(iscale * scales[j]);
      b.scales[j] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(b.d) * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        L[e] = static_cast<int8_t>(Clamp(NearestInt(x[e] / d), -32, 31) + 32);
      }
    }
    uint8_t levels[kQK];
    for (int e = 0; e < kQK; ++e) levels[e] = static_cast<uint8_t>(L[e]);
    Pack6Bit(levels, b.ql, b.qh);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ8K(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;  // [256]
    BlockQ8K b;
    std::memset(&b, 0, sizeof(b));
    float max = 0, amax = 0;
    for (int e = 0; e < kQK; ++e) {
      const float ax = std::fabs(x[e]);
      if (ax > amax) {
        amax = ax;
        max = x[e];
      }
    }
    if (amax != 0.0f) {
      // -127 rather than -128 keeps every value in [-127, 127], so SIMD code may negate or
      // take absolute values of int8 lanes without overflow.
      const float iscale = -127.f / max;
      for (int e = 0; e < kQK; ++e) {
        const int v = NearestInt(iscale * x[e]);
        b.qs[e] = static_cast<int8_t>(v < 127 ? v : 127);
      }
      for (int g = 0; g < kQK / 16; ++g) {
        int sum = 0;
        for (int e = 16 * g; e < 16 * g + 16; ++e) sum += b.qs[e];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
      b.d = 1 / iscale;
    }
    StoreBlock(b, dst, i);
  }
}

}  // namespace lifeline::ref::internal
