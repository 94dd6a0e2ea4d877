// AVX-512 packed-weight GEMM for the 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//
// Packed tile, per block b (kStride bytes): 8 quads x 64 bytes of unsigned levels (level +
// offset, as in the tiles: 8 / 16 / 128 for Q4_0 / Q5_0 / Q8_0, 0 for the _1 types), then the
// 16 rows' d as f32, then (Q4_1 / Q5_1) the 16 rows' m as f32.
// Per token and block: the accumulator starts at -offset * sum(y) (the activation block sum
// from the quantizer), 8 vpdpbusd add the block's integer dot to all 16 rows exactly, one
// conversion and one FMA scale it by d_w (16 lanes) x d_y (broadcast) — plus one FMA for the
// min term m_w x s_y.
#include <type_traits>

#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

// Level bytes of values 4q..4q+3 of one block, as a little-endian uint32 (levels + offset).
struct Q4_0P {
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 2 + 4 * (q % 4));
    return (q < 4 ? v : v >> 4) & 0x0f0f0f0fu;
  }
};
struct Q4_1P {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kMin = true;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 4 + 4 * (q % 4));
    return (q < 4 ? v : v >> 4) & 0x0f0f0f0fu;
  }
};
// Fifth bits: bit j of the little-endian qh word belongs to element j; 4 of them spread to
// bit 4 of 4 bytes through a 16-entry table.
constexpr uint32_t Spread4(uint32_t bits) {
  return ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25);
}
constexpr uint32_t kSpread4[16] = {Spread4(0),  Spread4(1),  Spread4(2),  Spread4(3),
                                   Spread4(4),  Spread4(5),  Spread4(6),  Spread4(7),
                                   Spread4(8),  Spread4(9),  Spread4(10), Spread4(11),
                                   Spread4(12), Spread4(13), Spread4(14), Spread4(15)};
static inline uint32_t HighQuad(uint32_t qh, int q) { return kSpread4[(qh >> (4 * q)) & 0xf]; }
struct Q5_0P {
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 6 + 4 * (q % 4));
    return ((q < 4 ? v : v >> 4) & 0x0f0f0f0fu) | HighQuad(Load32u(blk + 2), q);
  }
};
struct Q5_1P {
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kMin = true;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 8 + 4 * (q % 4));
    return ((q < 4 ? v : v >> 4) & 0x0f0f0f0fu) | HighQuad(Load32u(blk + 4), q);
  }
};
struct Q8_0P {
  static constexpr int kBytes = 34, kOffset = 128;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) { return Load32u(blk + 2 + 4 * q) ^ 0x80808080u; }
};

template <typename P>
struct Legacy {
  static constexpr int64_t kStride = 512 + 64 + (P::kMin ? 64 : 0);

  static uint64_t PackedBytes(int64_t cols) { return static_cast<uint64_t>(cols / 32) * kStride; }

  static void Pack(const uint8_t* w, uint64_t rb, int nr, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* pb = packed + b * kStride;
      float* d = reinterpret_cast<float*>(pb + 512);
      float* m = reinterpret_cast<float*>(pb + 576);
      for (int r = 0; r < kGemmRows; ++r) {
        if (r >= nr) {  // padding rows: zero levels and scales
          for (int q = 0; q < 8; ++q) Store32u(pb + 64 * q + 4 * r, 0);
          d[r] = 0.0f;
          if constexpr (P::kMin) m[r] = 0.0f;
          continue;
        }
        const uint8_t* blk = w + r * rb + b * P::kBytes;
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) Store32u(pb + 64 * q + 4 * r, P::Quad(blk, q));
        d[r] = LoadF16(blk);
        if constexpr (P::kMin) m[r] = LoadF16(blk + 2);
      }
    }
  }

  template <int NT>
  static void Block(const uint8_t* packed, int nr, int64_t cols, const ActRow* a, float* y,
                    int64_t ldy) {
    const int64_t nb = cols / 32;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = packed + b * kStride;
      __m512i qv[8];
      for (int q = 0; q < 8; ++q) qv[q] = _mm512_load_si512(pb + 64 * q);
      const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(pb + 512));
      for (int t = 0; t < NT; ++t) {
        __m512i acci = P::kOffset != 0 ? _mm512_set1_epi32(-P::kOffset * a[t].isum[b])
                                       : _mm512_setzero_si512();
        const int8_t* yq = a[t].qs + 32 * b;
        for (int q = 0; q < 8; ++q) acci = _mm512_dpbusd_epi32(acci, qv[q], Bcast4(yq + 4 * q));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci), _mm512_mul_ps(dw, _mm512_set1_ps(a[t].d[b])), acc[t]);
        if constexpr (P::kMin) {
          const __m512 mw = _mm512_load_ps(reinterpret_cast<const float*>(pb + 576));
          acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a[t].s[b]), acc[t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, RowMask(nr), acc[t]);
  }
};

}  // namespace

// Thresholds: packing costs ~0.2 cycles per weight value, a token through the tiles ~1/30 and
// through the packed kernel ~1/68 cycles per value and row, so packing pays off from ~10
// tokens; 16 leaves a margin.
void FillGemmLegacy(MatmulImpl* impl) {
  impl->gemm[static_cast<int>(GgmlType::kQ4_0)] = MakeGemm<Legacy<Q4_0P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ4_1)] = MakeGemm<Legacy<Q4_1P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ5_0)] = MakeGemm<Legacy<Q5_0P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ5_1)] = MakeGemm<Legacy<Q5_1P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ8_0)] = MakeGemm<Legacy<Q8_0P>>(16);
}

}  // namespace lifeline::kernels::avx512
