// AVX2 tiles for Q4_K, Q5_K and Q6_K against Q8_K activations: 32 levels per register,
// vpmaddubsw into int16 pairs, vpmaddwd by the lane's sub-block scale (int16) into int32, one
// f32 conversion per super-block and token. Mins (Q4_K/Q5_K) and Q6_K's offset of 32 are
// integer dot products of the scales with the activations' 16-value sums. Same integer
// semantics as the scalar twin (ref/vec_dot_ref.h).
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"

namespace lifeline::kernels::avx2 {
namespace {

constexpr int64_t kQK = 256;

// See kquant_avx512.cpp / ref/quant_blocks.h UnpackScaleMinK4 for the packing.
static inline void UnpackScalesK4(const uint8_t* s12, uint8_t* sc, uint8_t* mn) {
  uint32_t q0, q1, q2;
  std::memcpy(&q0, s12, 4);
  std::memcpy(&q1, s12 + 4, 4);
  std::memcpy(&q2, s12 + 8, 4);
  const uint32_t s[2] = {q0 & 0x3f3f3f3fu, (q2 & 0x0f0f0f0fu) | (((q0 >> 6) & 0x03030303u) << 4)};
  const uint32_t m[2] = {q1 & 0x3f3f3f3fu,
                         ((q2 >> 4) & 0x0f0f0f0fu) | (((q1 >> 6) & 0x03030303u) << 4)};
  std::memcpy(sc, s, 8);
  std::memcpy(mn, m, 8);
}

template <bool kFifthBit>
struct Q45K {
  static constexpr int kRows = 2;
  static constexpr int kTokens = 2;
  static constexpr int64_t kBytes = kFifthBit ? 176 : 144;
  static constexpr int kQsOffset = kFifthBit ? 48 : 16;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / kQK;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 accf[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) accf[r][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = w + r * rb + i * kBytes;
        PrefetchSpan(blk + PrefetchAhead(NR * rb), kBytes);
        alignas(16) uint8_t sc[8], mn[8];
        UnpackScalesK4(blk + 4, sc, mn);
        // mins duplicated per 16-value group: [m0 m0 m1 m1 ... m7 m7] (int16)
        const __m128i mn16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
        const __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(mn16, mn16), _mm_unpacklo_epi16(mn16, mn16));
        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kFifthBit) hbits = LoadU256(blk + 16);
        __m256i acci[NT];
        for (int t = 0; t < NT; ++t) acci[t] = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) {
          const __m256i q = LoadU256(blk + kQsOffset + 32 * k);
          __m256i lo = _mm256_and_si256(q, low4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
          if constexpr (kFifthBit) {
            const __m256i blo = _mm256_set1_epi8(static_cast<char>(1 << (2 * k)));
            const __m256i bhi = _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1)));
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, blo), blo),
                                                      _mm256_set1_epi8(16)));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, bhi), bhi),
                                                      _mm256_set1_epi8(16)));
          }
          const __m256i s_lo = _mm256_set1_epi16(sc[2 * k]);
          const __m256i s_hi = _mm256_set1_epi16(sc[2 * k + 1]);
          for (int t = 0; t < NT; ++t) {
            const int8_t* yq = a[t].qs + i * kQK + 64 * k;
            const __m256i p_lo = _mm256_maddubs_epi16(lo, LoadU256(yq));
            const __m256i p_hi = _mm256_maddubs_epi16(hi, LoadU256(yq + 32));
            acci[t] = _mm256_add_epi32(acci[t], _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo),
                                                                 _mm256_madd_epi16(p_hi, s_hi)));
          }
        }
        const float dw = LoadF16(blk);
        const float dmin = LoadF16(blk + 2);
        for (int t = 0; t < NT; ++t) {
          const float dy = a[t].d[i];
          const __m256i msum = _mm256_madd_epi16(LoadU256(a[t].bsums + 16 * i), mdup);
          accf[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acci[t]), _mm256_set1_ps(dw * dy), accf[r][t]);
          accf[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin * dy), accf[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = HsumPs(accf[r][t]);
    }
  }
};

struct Q6K {
  static constexpr int kRows = 2;
  static constexpr int kTokens = 2;
  static constexpr int64_t kBytes = 210;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / kQK;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i three = _mm256_set1_epi8(3);
    __m256 accf[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) accf[r][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = w + r * rb + i * kBytes;
        PrefetchSpan(blk + PrefetchAhead(NR * rb), kBytes);
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
        __m256i acci[NT];
        for (int t = 0; t < NT; ++t) acci[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
          const __m256i ql0 = LoadU256(blk + 64 * h);
          const __m256i ql1 = LoadU256(blk + 64 * h + 32);
          const __m256i qh = LoadU256(blk + 128 + 32 * h);
          // Element 32 * g + l of the half: nibble g / 2 of ql[32 * (g % 2) + l], bits 2g of qh[l].
          __m256i v[4];
          v[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                 _mm256_slli_epi16(_mm256_and_si256(qh, three), 4));
          v[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4));
          v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4));
          v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4));
          for (int g = 0; g < 4; ++g) {
            // 32 elements = two groups of 16 with their own scales.
            const int gi = 8 * h + 2 * g;
            const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[gi + 1]), _mm_set1_epi16(sc[gi]));
            for (int t = 0; t < NT; ++t) {
              const __m256i p = _mm256_maddubs_epi16(v[g], LoadU256(a[t].qs + i * kQK + 128 * h + 32 * g));
              acci[t] = _mm256_add_epi32(acci[t], _mm256_madd_epi16(p, s));
            }
          }
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(LoadU128(sc));
        const float dw = LoadF16(blk + 208);
        for (int t = 0; t < NT; ++t) {
          // Levels were used as q + 32: subtract 32 * sum_g sc_g * bsum_g.
          const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(LoadU256(a[t].bsums + 16 * i), sc16), 5);
          const __m256i isum = _mm256_sub_epi32(acci[t], corr);
          accf[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * a[t].d[i]), accf[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = HsumPs(accf[r][t]);
    }
  }
};

}  // namespace

void FillKQuants(MatmulImpl* impl) {
  impl->tiles[static_cast<int>(GgmlType::kQ4_K)] = MakeTile<Q45K<false>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_K)] = MakeTile<Q45K<true>>();
  impl->tiles[static_cast<int>(GgmlType::kQ6_K)] = MakeTile<Q6K>();
}

}  // namespace lifeline::kernels::avx2
