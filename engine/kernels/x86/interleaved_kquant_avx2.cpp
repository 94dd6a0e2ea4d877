// AVX2 kernels for Q4_K, Q5_K and Q6_K matrices in the row-interleaved layout (interleave.h), for CPUs
// without AVX-512: the bytes the AVX-512 tile reads (interleaved_kquant_avx512.cpp describes
// the unit), taken as two 8-row halves of every 64-byte quad.
//
// Per super-block, half and token: the 12 scale bytes of the 8 rows unpack bytewise into
// 6-bit scales and mins for all lanes at once; a sub-block's dot for the 8 rows is 8
// vpmaddubsw of nibble levels (0..15) against the token's 4 activation bytes broadcast, added
// in int16 (|sum| <= 8 * 2 * 15 * 127 = 30480, no overflow), then one vpmaddwd with the
// sub-block scale as an int16 pair (sc, sc) widens and scales it in one op (|.| < 2^22). The
// mins term is a vpmaddwd of (m_j, m_j) pairs with the token's 16-value sums. One conversion
// and two FMAs per half and super-block; no horizontal sums. Integer sums equal the scalar
// twin's exactly (tests/kernels/interleave_test.cpp checks every level against it).
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"
#include "engine/kernels/x86/interleaved_avx2.h"

namespace lifeline::kernels::avx2 {
namespace {

constexpr int64_t kQK = 256;

// vpshufb control: (byte b, byte b) of every int32 lane as two zero-extended int16.
static inline __m256i BytePair(int b) {
  return PerLaneShuffle(0x80008000u | (b << 16) | b, 0x00040004u);
}

struct Q4KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 144;
  static constexpr int64_t kQuads = 64;  // after the d and dmin arrays

  // Half h of quad q of a unit: rows 8h..8h+7.
  static inline __m256i Half(const uint8_t* unit, int q, int h) {
    return LoadU256(unit + kQuads + 64 * q + 32 * h);
  }

  // Bytewise scale / min unpacking (ref/quant_blocks.h UnpackScaleMinK4) for the 8 lanes:
  // sc[0] / mn[0] hold sub-blocks 0..3 (byte j of every lane), sc[1] / mn[1] sub-blocks 4..7.
  static inline void Scales(const uint8_t* unit, int h, __m256i (&sc)[2], __m256i (&mn)[2]) {
    const __m256i a = Half(unit, 0, h), b = Half(unit, 1, h), c = Half(unit, 2, h);
    const __m256i m6 = _mm256_set1_epi8(0x3f);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i top2 = _mm256_set1_epi8(0x30);
    sc[0] = _mm256_and_si256(a, m6);
    mn[0] = _mm256_and_si256(b, m6);
    sc[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_srli_epi32(a, 2), top2));
    mn[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi32(b, 2), top2));
  }

  // n_groups consecutive 16-row groups, NT tokens (1 or 2).
  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        // The unit two ahead (4.5 KiB), once per unit: the second half's pass reads this unit
        // from L1.
        for (int l = 0; l < kUnit / 64; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(unit + 2 * kUnit + 64 * l), _MM_HINT_T0);
        }
        for (int h = 0; h < 2; ++h) {
          __m256i sc[2], mn[2];
          Scales(unit, h, sc, mn);
          __m256i isum[NT];  // 8 lanes x sum_j sc_j * dot_j
          for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
          for (int k = 0; k < 4; ++k) {
            __m256i dl[NT], dh[NT];
            for (int t = 0; t < NT; ++t) dl[t] = dh[t] = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
              const __m256i q = Half(unit, 3 + 8 * k + j, h);
              const __m256i vl = _mm256_and_si256(q, m4);
              const __m256i vh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
              for (int t = 0; t < NT; ++t) {
                const int8_t* yq = a[t].qs + kQK * i + 64 * k + 4 * j;
                dl[t] = _mm256_add_epi16(dl[t], _mm256_maddubs_epi16(vl, Bcast4(yq)));
                dh[t] = _mm256_add_epi16(dh[t], _mm256_maddubs_epi16(vh, Bcast4(yq + 32)));
              }
            }
            // Sub-blocks 2k (low nibbles) and 2k + 1 (high): byte 2k % 4 and 2k % 4 + 1 of sc.
            const __m256i s_lo = _mm256_shuffle_epi8(sc[k / 2], BytePair(2 * (k % 2)));
            const __m256i s_hi = _mm256_shuffle_epi8(sc[k / 2], BytePair(2 * (k % 2) + 1));
            for (int t = 0; t < NT; ++t) {
              isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(dl[t], s_lo),
                                                                   _mm256_madd_epi16(dh[t], s_hi)));
            }
          }
          const __m256 d = LoadF16x8(unit + 16 * h);
          const __m256 dmin = LoadF16x8(unit + 32 + 16 * h);
          for (int t = 0; t < NT; ++t) {
            // Mins: sum_j m_j * (bsum_2j + bsum_2j+1), (m_j, m_j) against (bsum_2j, bsum_2j+1).
            const int16_t* bs = a[t].bsums + 16 * i;
            __m256i msum = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
              const __m256i mp = _mm256_shuffle_epi8(mn[j / 4], BytePair(j % 4));
              msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp, Bcast4(bs + 2 * j)));
            }
            const __m256 part = _mm256_fmsub_ps(_mm256_cvtepi32_ps(isum[t]), d,
                                                _mm256_mul_ps(_mm256_cvtepi32_ps(msum), dmin));
            acc[t][h] = _mm256_fmadd_ps(part, _mm256_set1_ps(a[t].d[i]), acc[t][h]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

// Q5_K (interleaved_kquant_avx512.cpp describes the unit: Q4_K's with the qh quads 3..10
// between the scales and the nibbles). Levels are 0..31: the nibble joined with its fifth
// bit moved to bit 4. A vpmaddubsw pair is at most 2 * 31 * 127 = 7874, so four quads add
// up in int16 (31496) before a vpmaddwd with the scale pair (sc, sc) widens and scales them.
struct Q5KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 176;
  static constexpr int kQh = 3, kQs = 11;  // quad indices

  // Bit b of every byte moved to bit 4, all other bits zero.
  static inline __m256i BitTo4(__m256i v, int bit) {
    const __m256i b4 = _mm256_set1_epi8(0x10);
    return bit <= 4 ? _mm256_and_si256(_mm256_slli_epi16(v, 4 - bit), b4)
                    : _mm256_and_si256(_mm256_srli_epi16(v, bit - 4), b4);
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        // The unit two ahead (5.5 KiB), once per unit.
        for (int l = 0; l < kUnit / 64; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(unit + 2 * kUnit + 64 * l), _MM_HINT_T0);
        }
        for (int h = 0; h < 2; ++h) {
          __m256i sc[2], mn[2];
          Q4KI::Scales(unit, h, sc, mn);
          __m256i isum[NT];
          for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
          for (int k = 0; k < 4; ++k) {
            const __m256i s_lo = _mm256_shuffle_epi8(sc[k / 2], BytePair(2 * (k % 2)));
            const __m256i s_hi = _mm256_shuffle_epi8(sc[k / 2], BytePair(2 * (k % 2) + 1));
            for (int jh = 0; jh < 2; ++jh) {  // quads 4jh..4jh+3: int16 sums without overflow
              __m256i dl[NT], dh[NT];
              for (int t = 0; t < NT; ++t) dl[t] = dh[t] = _mm256_setzero_si256();
              for (int j = 4 * jh; j < 4 * jh + 4; ++j) {
                const __m256i q = Q4KI::Half(unit, kQs + 8 * k + j, h);
                const __m256i qh = Q4KI::Half(unit, kQh + j, h);
                const __m256i vl = _mm256_or_si256(_mm256_and_si256(q, m4), BitTo4(qh, 2 * k));
                const __m256i vh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                                   BitTo4(qh, 2 * k + 1));
                for (int t = 0; t < NT; ++t) {
                  const int8_t* yq = a[t].qs + kQK * i + 64 * k + 4 * j;
                  dl[t] = _mm256_add_epi16(dl[t], _mm256_maddubs_epi16(vl, Bcast4(yq)));
                  dh[t] = _mm256_add_epi16(dh[t], _mm256_maddubs_epi16(vh, Bcast4(yq + 32)));
                }
              }
              for (int t = 0; t < NT; ++t) {
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(dl[t], s_lo),
                                                                     _mm256_madd_epi16(dh[t], s_hi)));
              }
            }
          }
          const __m256 d = LoadF16x8(unit + 16 * h);
          const __m256 dmin = LoadF16x8(unit + 32 + 16 * h);
          for (int t = 0; t < NT; ++t) {
            const int16_t* bs = a[t].bsums + 16 * i;
            __m256i msum = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
              const __m256i mp = _mm256_shuffle_epi8(mn[j / 4], BytePair(j % 4));
              msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp, Bcast4(bs + 2 * j)));
            }
            const __m256 part = _mm256_fmsub_ps(_mm256_cvtepi32_ps(isum[t]), d,
                                                _mm256_mul_ps(_mm256_cvtepi32_ps(msum), dmin));
            acc[t][h] = _mm256_fmadd_ps(part, _mm256_set1_ps(a[t].d[i]), acc[t][h]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

// Q6_K (interleaved_kquant_avx512.cpp describes the unit: the f16 d array, ql quads 0..31,
// qh quads 32..47, the 16 int8 sub-block scales in quads 48..51). Levels are q + 32 (0..63);
// a vpmaddubsw pair is at most 2 * 63 * 127 = 16002, so two quads add up in int16 before a
// vpmaddwd with the sign-extended scale pair (sc, sc) widens and scales them. The offset comes
// back once per super-block: 32 * sum_s sc_s * bsum_s, a vpmaddwd of (sc_2p, sc_2p+1) pairs
// with the token's 16-value sums.
struct Q6KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 210;
  static constexpr int64_t kQuads = 32;  // after the d array
  static constexpr int kQl = 0, kQh = 32, kSc = 48;  // quad indices

  static inline __m256i Half(const uint8_t* unit, int q, int rh) {
    return LoadU256(unit + kQuads + 64 * q + 32 * rh);
  }

  // Levels of values 128h + 32g + 4j..+3 for g = g0 (v_lo) and g0 + 2 (v_hi), rows 8rh..: the
  // nibble of ql quad 16h + 8g0 + j joined with the two top bits from qh quad 32 + 8h + j.
  static inline void Levels(const uint8_t* unit, int rh, int h, int g0, int j, __m256i* v_lo,
                            __m256i* v_hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i ql = Half(unit, kQl + 16 * h + 8 * g0 + j, rh);
    const __m256i qh = Half(unit, kQh + 8 * h + j, rh);
    // Top bits of the wanted group moved to bits 4..5; bits that crossed into the neighbour
    // byte's low nibble are dropped by the andnot.
    __m256i top_lo, top_hi;
    if (g0 == 0) {
      const __m256i hb = _mm256_and_si256(qh, _mm256_set1_epi8(0x33));  // bits 0..1: g 0, 4..5: g 2
      top_lo = _mm256_slli_epi32(hb, 4);
      top_hi = hb;
    } else {
      const __m256i hb = _mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xcc)));  // g 1, g 3
      top_lo = _mm256_slli_epi32(hb, 2);
      top_hi = _mm256_srli_epi32(hb, 2);
    }
    *v_lo = _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_andnot_si256(m4, top_lo));
    *v_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(ql, 4), m4),
                            _mm256_andnot_si256(m4, top_hi));
  }

  // vpshufb control: byte b of every int32 lane into the high byte of both its int16 (then
  // vpsraw 8 gives the sign-extended pair (v, v)).
  static inline __m256i ByteToBothHigh16(int b) {
    return PerLaneShuffle(0x00800080u | (b << 8) | (b << 24), 0x04000400u);
  }
  // Bytes (b, b + 1) of every int32 lane into the high bytes of its two int16.
  static inline __m256i BytesToHigh16(int b) {
    return PerLaneShuffle(0x00800080u | (b << 8) | ((b + 1) << 24), 0x04000400u);
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        // 53 lines from the start of the unit two ahead cover its 3360 bytes whether it
        // starts at 0 or 32 mod 64 (units alternate).
        for (int l = 0; l < 53; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(unit + 2 * kUnit + 64 * l), _MM_HINT_T0);
        }
        for (int rh = 0; rh < 2; ++rh) {
          __m256i scq[4];  // scale bytes 4m..4m+3 of every lane
          for (int m = 0; m < 4; ++m) scq[m] = Half(unit, kSc + m, rh);
          __m256i isum[NT];
          for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
          for (int h = 0; h < 2; ++h) {
            for (int g0 = 0; g0 < 2; ++g0) {
              for (int jh = 0; jh < 2; ++jh) {
                // Sub-blocks s_lo = 8h + 2 g0 + jh (group g0) and s_hi = s_lo + 4 (group g0 + 2).
                const int s_lo = 8 * h + 2 * g0 + jh, s_hi = s_lo + 4;
                const __m256i c_lo = _mm256_srai_epi16(
                    _mm256_shuffle_epi8(scq[s_lo / 4], ByteToBothHigh16(s_lo % 4)), 8);
                const __m256i c_hi = _mm256_srai_epi16(
                    _mm256_shuffle_epi8(scq[s_hi / 4], ByteToBothHigh16(s_hi % 4)), 8);
                for (int jp = 4 * jh; jp < 4 * jh + 4; jp += 2) {  // two quads per int16 sum
                  __m256i vl0, vh0, vl1, vh1;
                  Levels(unit, rh, h, g0, jp, &vl0, &vh0);
                  Levels(unit, rh, h, g0, jp + 1, &vl1, &vh1);
                  for (int t = 0; t < NT; ++t) {
                    const int8_t* yq = a[t].qs + kQK * i + 128 * h + 32 * g0 + 4 * jp;
                    const __m256i dl = _mm256_add_epi16(_mm256_maddubs_epi16(vl0, Bcast4(yq)),
                                                        _mm256_maddubs_epi16(vl1, Bcast4(yq + 4)));
                    const __m256i dh = _mm256_add_epi16(_mm256_maddubs_epi16(vh0, Bcast4(yq + 64)),
                                                        _mm256_maddubs_epi16(vh1, Bcast4(yq + 68)));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(dl, c_lo),
                                                                         _mm256_madd_epi16(dh, c_hi)));
                  }
                }
              }
            }
          }
          const __m256 d = LoadF16x8(unit + 16 * rh);
          for (int t = 0; t < NT; ++t) {
            // Levels were q + 32: subtract 32 * sum_s sc_s * bsum_s.
            const int16_t* bs = a[t].bsums + 16 * i;
            __m256i corr = _mm256_setzero_si256();
            for (int p = 0; p < 8; ++p) {
              const __m256i sp = _mm256_srai_epi16(
                  _mm256_shuffle_epi8(scq[p / 2], BytesToHigh16(2 * (p % 2))), 8);
              corr = _mm256_add_epi32(corr, _mm256_madd_epi16(sp, Bcast4(bs + 2 * p)));
            }
            const __m256 s = _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5)));
            acc[t][rh] = _mm256_fmadd_ps(s, _mm256_mul_ps(d, _mm256_set1_ps(a[t].d[i])), acc[t][rh]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

}  // namespace

void FillInterleavedKQuants(MatmulImpl* impl) {
  RegisterInterleaved<Q4KI>(impl, GgmlType::kQ4_K);
  RegisterInterleaved<Q5KI>(impl, GgmlType::kQ5_K);
  RegisterInterleaved<Q6KI>(impl, GgmlType::kQ6_K);
}

}  // namespace lifeline::kernels::avx2
