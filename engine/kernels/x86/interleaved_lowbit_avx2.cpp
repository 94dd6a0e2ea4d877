// AVX2 decode tiles for Q2_K / Q3_K matrices in the row-interleaved layout (interleave.h),
// for CPUs without AVX-512: the units interleaved_lowbit_avx512.cpp describes, each 64-byte
// quad taken as two 256-bit halves (rows 0..7, 8..15).
//
// Without VNNI the integer dot is vpmaddubsw (unsigned levels x the token's 4 activation
// bytes broadcast, neighbouring products added into int16): the 4 quads of a 16-value
// sub-block add up in int16 (Q2_K levels 0..3: at most 4 * 2 * 3 * 127 = 3048; Q3_K levels
// 0..7: 7112), then one vpmaddwd with the sub-block scale as an int16 pair (sc, sc) widens
// and scales them into int32. Q2_K's mins and Q3_K's offset of 4 are vpmaddwd of scale pairs
// with the token's 16-value sums, once per super-block. The integer sums equal the scalar
// twin's exactly (tests/kernels/interleave_test.cpp).
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"
#include "engine/kernels/x86/interleaved_avx2.h"

namespace lifeline::kernels::avx2 {
namespace {

constexpr int64_t kQK = 256;

// vpshufb controls (see PerLaneShuffle). Byte b of every int32 lane in both its int16,
// zero-extended:
static inline __m256i BytePair(int b) {
  return PerLaneShuffle(0x80008000u | (b << 16) | b, 0x00040004u);
}
// bytes b and b + 1 as the lane's two int16, zero-extended:
static inline __m256i TwoBytes16(int b) {
  return PerLaneShuffle(0x80008000u | ((b + 1) << 16) | b, 0x00040004u);
}
// byte b into the high byte of both int16 (vpsraw 8 then sign-extends):
static inline __m256i ByteToBothHigh16(int b) {
  return PerLaneShuffle(0x00800080u | (b << 8) | (b << 24), 0x04000400u);
}
// bytes b, b + 1 into the high bytes of the two int16:
static inline __m256i BytesToHigh16(int b) {
  return PerLaneShuffle(0x00800080u | (b << 8) | ((b + 1) << 24), 0x04000400u);
}

static inline __m256i Shift16(__m256i v, int shift) {
  return shift >= 0 ? _mm256_slli_epi16(v, shift) : _mm256_srli_epi16(v, -shift);
}

template <int64_t kUnit, int64_t kAhead, int kLines>
static inline void PrefetchUnit(const uint8_t* unit) {
  for (int l = 0; l < kLines; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(unit + kAhead + 64 * l), _MM_HINT_T0);
  }
}

// Rows 8rh..8rh+7 of one unit: for each 128-value half h and quarter hl (qs quads
// 8h + 4hl.., values l = 16hl..16hl+15 of each g), sub-blocks s = 8h + 2g + hl. L::Levels
// gives the four level vectors (g = 0..3) of a quad, L::ScalePair(s) the (sc, sc) pairs.
template <typename L, int NT>
static inline void HalfRows(const uint8_t* unit, int rh, const ActRow* a, int64_t i,
                            const L& scales, __m256i (&isum)[NT]) {
  for (int h = 0; h < 2; ++h) {
    for (int hl = 0; hl < 2; ++hl) {
      __m256i d[NT][4];
      for (int t = 0; t < NT; ++t) d[t][0] = d[t][1] = d[t][2] = d[t][3] = _mm256_setzero_si256();
      for (int p8 = 4 * hl; p8 < 4 * hl + 4; ++p8) {
        __m256i v[4];
        L::Levels(unit, rh, h, p8, v);
        for (int t = 0; t < NT; ++t) {
          const int8_t* yq = a[t].qs + kQK * i + 128 * h + 4 * p8;
          for (int g = 0; g < 4; ++g) {
            d[t][g] = _mm256_add_epi16(d[t][g], _mm256_maddubs_epi16(v[g], Bcast4(yq + 32 * g)));
          }
        }
      }
      for (int g = 0; g < 4; ++g) {
        const __m256i sp = scales.ScalePair(8 * h + 2 * g + hl);
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(d[t][g], sp));
      }
    }
  }
}

struct Q2KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 84;
  static constexpr int kQuads = 64;  // after the d and dmin arrays
  static constexpr int kSc = 0, kQs = 4;

  __m256i raw[4];  // scale bytes 4m..4m+3 of every lane (rows of one half)

  static inline __m256i Half(const uint8_t* unit, int q, int rh) {
    return LoadU256(unit + kQuads + 64 * q + 32 * rh);
  }
  static inline void Levels(const uint8_t* unit, int rh, int h, int p8, __m256i (&v)[4]) {
    const __m256i m3 = _mm256_set1_epi8(0x03);
    const __m256i q = Half(unit, kQs + 8 * h + p8, rh);
    v[0] = _mm256_and_si256(q, m3);
    v[1] = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
    v[2] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3);
    v[3] = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
  }
  inline __m256i ScalePair(int s) const {
    return _mm256_and_si256(_mm256_shuffle_epi8(raw[s / 4], BytePair(s % 4)), _mm256_set1_epi16(0x0f));
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        PrefetchUnit<kUnit, 4 * kUnit, 21>(unit);
        for (int rh = 0; rh < 2; ++rh) {
          Q2KI sc;
          for (int m = 0; m < 4; ++m) sc.raw[m] = Half(unit, kSc + m, rh);
          __m256i isum[NT];
          for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
          HalfRows<Q2KI, NT>(unit, rh, a, i, sc, isum);
          const __m256 d = LoadF16x8(unit + 16 * rh);
          const __m256 dmin = LoadF16x8(unit + 32 + 16 * rh);
          for (int t = 0; t < NT; ++t) {
            const int16_t* bs = a[t].bsums + 16 * i;
            __m256i msum = _mm256_setzero_si256();
            for (int p = 0; p < 8; ++p) {
              const __m256i mp = _mm256_srli_epi16(_mm256_shuffle_epi8(sc.raw[p / 2], TwoBytes16(2 * (p % 2))), 4);
              msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp, Bcast4(bs + 2 * p)));
            }
            const __m256 part = _mm256_fmsub_ps(_mm256_cvtepi32_ps(isum[t]), d,
                                                _mm256_mul_ps(_mm256_cvtepi32_ps(msum), dmin));
            acc[t][rh] = _mm256_fmadd_ps(part, _mm256_set1_ps(a[t].d[i]), acc[t][rh]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

struct Q3KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 110;
  static constexpr int kQuads = 32;  // after the d array
  static constexpr int kHm = 0, kQs = 8, kSc = 24;

  __m256i sc[4];  // signed scales: byte j of sc[m] = scale 4m + j

  static inline __m256i Half(const uint8_t* unit, int q, int rh) {
    return LoadU256(unit + kQuads + 64 * q + 32 * rh);
  }
  // u = low2 | hbit << 2 for g = 0..3 (hbit: bit 4h + g of the hmask byte).
  static inline void Levels(const uint8_t* unit, int rh, int h, int p8, __m256i (&v)[4]) {
    const __m256i m3 = _mm256_set1_epi8(0x03);
    const __m256i b2 = _mm256_set1_epi8(0x04);
    const __m256i q = Half(unit, kQs + 8 * h + p8, rh);
    const __m256i hm = Half(unit, kHm + p8, rh);
    for (int g = 0; g < 4; ++g) {
      const __m256i lo = _mm256_and_si256(g == 0 ? q : _mm256_srli_epi16(q, 2 * g), m3);
      v[g] = _mm256_or_si256(lo, _mm256_and_si256(Shift16(hm, 2 - 4 * h - g), b2));
    }
  }
  inline __m256i ScalePair(int s) const {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(sc[s / 4], ByteToBothHigh16(s % 4)), 8);
  }
  // The 16 six-bit scales (ref/quant_blocks.h UnpackScaleQ3K) bytewise, minus 32.
  inline void Unpack(const uint8_t* unit, int rh) {
    const __m256i a = Half(unit, kSc, rh), b = Half(unit, kSc + 1, rh), c = Half(unit, kSc + 2, rh);
    const __m256i lo4 = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    const __m256i k32 = _mm256_set1_epi8(32);
    const auto join = [&](__m256i low, __m256i high) {
      return _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(low, lo4), _mm256_and_si256(high, top)), k32);
    };
    sc[0] = join(a, _mm256_slli_epi16(c, 4));
    sc[1] = join(b, _mm256_slli_epi16(c, 2));
    sc[2] = join(_mm256_srli_epi16(a, 4), c);
    sc[3] = join(_mm256_srli_epi16(b, 4), _mm256_srli_epi16(c, 2));
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        PrefetchUnit<kUnit, 3 * kUnit, 28>(unit);
        for (int rh = 0; rh < 2; ++rh) {
          Q3KI sc;
          sc.Unpack(unit, rh);
          __m256i isum[NT];
          for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
          HalfRows<Q3KI, NT>(unit, rh, a, i, sc, isum);
          const __m256 d = LoadF16x8(unit + 16 * rh);
          for (int t = 0; t < NT; ++t) {
            // Levels were q + 4: subtract 4 * sum_s sc_s * bsum_s.
            const int16_t* bs = a[t].bsums + 16 * i;
            __m256i corr = _mm256_setzero_si256();
            for (int p = 0; p < 8; ++p) {
              const __m256i sp = _mm256_srai_epi16(_mm256_shuffle_epi8(sc.sc[p / 2], BytesToHigh16(2 * (p % 2))), 8);
              corr = _mm256_add_epi32(corr, _mm256_madd_epi16(sp, Bcast4(bs + 2 * p)));
            }
            const __m256 s = _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 2)));
            acc[t][rh] = _mm256_fmadd_ps(s, _mm256_mul_ps(d, _mm256_set1_ps(a[t].d[i])), acc[t][rh]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

}  // namespace

void FillInterleavedLowBit(MatmulImpl* impl) {
  RegisterInterleaved<Q2KI>(impl, GgmlType::kQ2_K);
  RegisterInterleaved<Q3KI>(impl, GgmlType::kQ3_K);
}

}  // namespace lifeline::kernels::avx2
