// AVX-512 VNNI kernels for Q4_K / Q5_K / Q6_K matrices in the row-interleaved layout (interleave.h).
//
// Decode tile: one unit (super-block b of a 16-row group) holds the 16 rows' f16 scales as
// 16-element arrays, then every 4-byte quad of the block body as a 512-bit vector with row r
// in int32 lane r. A level vector (4 levels of each of the 16 rows) meets the token's 4
// activation bytes broadcast from memory in one vpdpbusd, so the integer dot of a sub-block
// for all 16 rows is a short vpdpbusd chain into a fresh accumulator; vpmulld applies the
// 16 lanes' sub-block scales (one vpshufb pulls sub-block j's scale byte out of every lane)
// and the sum over the super-block stays exact in int32. Per super-block and token: one
// conversion of that sum and one FMA with d (16 lanes, one vcvtph2ps) x d_y. No horizontal
// sums, no per-row scale gathers; the result is the scalar twin's integer sums, exactly,
// scaled in a different float order.
//
// Q4_K: quads 0..2 are the 12 scale bytes (6-bit scales and mins, unpacked bytewise for all
// lanes at once); quad 3 + 8k + j is qs bytes 32k + 4j..+3: low nibbles = sub-block 2k,
// values 4j..4j+3, high nibbles = sub-block 2k + 1. The high nibbles stay in place (x16, one
// AND per quad); their sub-block sums take the plain scale and the low ones scale x 16, so
// the super-block sum is 16x the twin's (|sum| < 2^29, exact) and 1/16 goes into d. Mins:
// vpdpwssd of (m_j, m_j) int16 pairs with the token's 16-value sums (two per broadcast int32).
// Q6_K: ql quads 16h + j / 16h + 8 + j carry the low 4 bits of groups g = 0, 2 / 1, 3 of
// half h (values 128h + 32g + 4j..), qh quad 32 + 8h + j their top 2 bits (bits 2g..2g+1):
// qh & 0x33 / 0xcc, shifted so the wanted pair lands in bits 4..5 with zeros above, joins a
// nibble in one vpternlogd. Levels are q + 32 (0..63, unsigned for vpdpbusd); the offset is
// 32 * sum_s sc_s * bsum_s, a vpdpwssd of sign-extended (sc_2p, sc_2p+1) pairs with the
// bsums, subtracted once per super-block.
//
// GEMM packing: the packed tiles of gemm_kquant_avx512.cpp (64 quads of unsigned levels, the
// 16 rows' d * sc as f32 per sub-block, the correction pairs and scale) come out of a unit with
// the same vector ops, a few per quad.
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/interleaved_avx512.h"
#include "engine/kernels/x86/gemm_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

constexpr int64_t kQK = 256;

struct Q4KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 144;
  static constexpr int64_t kQuads = 64;  // after the d and dmin arrays

  // Bytewise scale / min unpacking for all 16 lanes: sc[0] / mn[0] hold sub-blocks 0..3 (byte j
  // of every lane), sc[1] / mn[1] sub-blocks 4..7 (ref/quant_blocks.h UnpackScaleMinK4).
  static inline void Scales(const uint8_t* unit, __m512i (&sc)[2], __m512i (&mn)[2]) {
    const __m512i a = LoadQuad(unit + kQuads);
    const __m512i b = LoadQuad(unit + kQuads + 64);
    const __m512i c = LoadQuad(unit + kQuads + 128);
    const __m512i m6 = _mm512_set1_epi8(0x3f);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    sc[0] = _mm512_and_si512(a, m6);
    mn[0] = _mm512_and_si512(b, m6);
    // (c & 0x0f) | ((a >> 2) & 0x30): bits of m4 pick c, bits of top2 pick a >> 2, others 0.
    sc[1] = _mm512_or_si512(_mm512_and_si512(c, m4), _mm512_and_si512(_mm512_srli_epi32(a, 2), top2));
    mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), m4),
                            _mm512_and_si512(_mm512_srli_epi32(b, 2), top2));
  }

  // n_groups consecutive 16-row groups, NT tokens.
  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    const __m512i hi4 = _mm512_set1_epi8(static_cast<char>(0xf0));
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        __m512i sc[2], mn[2];
        Scales(unit, sc, mn);
        __m512i isum[NT];  // 16 x sum_j sc_j * dot_j
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) {
          if (k % 2 == 0) PrefetchLines<kUnit>(unit, 9 * k, 18);  // 36 lines
          const __m512i s_lo = _mm512_slli_epi32(_mm512_shuffle_epi8(sc[k / 2], ByteOfLane(2 * (k % 2))), 4);
          const __m512i s_hi = _mm512_shuffle_epi8(sc[k / 2], ByteOfLane(2 * (k % 2) + 1));
          // Two chains per sub-block (quads 0..3 and 4..7) so consecutive vpdpbusd of one token
          // do not wait on each other's latency.
          __m512i dl[NT][2], dh[NT][2];
          for (int t = 0; t < NT; ++t) {
            dl[t][0] = dl[t][1] = dh[t][0] = dh[t][1] = _mm512_setzero_si512();
          }
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            const __m512i q = LoadOnce(unit + kQuads + 64 * (3 + 8 * k + j));
            const __m512i vl = _mm512_and_si512(q, lo4);
            const __m512i vh = _mm512_and_si512(q, hi4);
            for (int t = 0; t < NT; ++t) {
              const uint8_t* yq = reinterpret_cast<const uint8_t*>(a[t].qs + kQK * i + 64 * k + 4 * j);
              dl[t][j / 4] = DpbusdBcast(dl[t][j / 4], vl, yq);
              dh[t][j / 4] = DpbusdBcast(dh[t][j / 4], vh, yq + 32);
            }
          }
          for (int t = 0; t < NT; ++t) {
            const __m512i l = _mm512_mullo_epi32(_mm512_add_epi32(dl[t][0], dl[t][1]), s_lo);
            const __m512i h = _mm512_mullo_epi32(_mm512_add_epi32(dh[t][0], dh[t][1]), s_hi);
            isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(l, h));
          }
        }
        // Mins: sum_j m_j * (bsum_2j + bsum_2j+1), the pair (m_j, m_j) against (bsum_2j, bsum_2j+1).
        __m512i mp[8];
        for (int j = 0; j < 8; ++j) mp[j] = _mm512_shuffle_epi8(mn[j / 4], BytePair(j % 4));
        const __m512 d16 = _mm512_mul_ps(LoadF16x16(unit), _mm512_set1_ps(1.0f / 16.0f));
        const __m512 dmin = LoadF16x16(unit + 32);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* bs = reinterpret_cast<const uint8_t*>(a[t].bsums + 16 * i);
          __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
          for (int j = 0; j < 8; j += 2) {
            m0 = _mm512_dpwssd_epi32(m0, mp[j], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * j)));
            m1 = _mm512_dpwssd_epi32(m1, mp[j + 1], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * j + 4)));
          }
          const __m512 msum = _mm512_cvtepi32_ps(_mm512_add_epi32(m0, m1));
          const __m512 part = _mm512_fmsub_ps(_mm512_cvtepi32_ps(isum[t]), d16, _mm512_mul_ps(msum, dmin));
          acc[t] = _mm512_fmadd_ps(part, _mm512_set1_ps(a[t].d[i]), acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
    }
  }

  // The packed GEMM tile of gemm_kquant_avx512.cpp (Q45K<false>): per super-block 64 level
  // quads, 8 x 16 f32 d * sc_j, 8 x 16 int32 (m_j, m_j), 16 f32 dmin.
  static constexpr int64_t kDsc = 4096, kMins = 4096 + 512, kDmin = 4096 + 1024;
  static constexpr int64_t kStride = 4096 + 1024 + 64;

  static void Pack(const uint8_t* w, uint64_t, int64_t cols, uint8_t* packed) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    const int64_t nb = cols / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* unit = w + i * kUnit;
      uint8_t* pb = packed + i * kStride;
      for (int k = 0; k < 4; ++k) {
        for (int j = 0; j < 8; ++j) {
          const __m512i q = LoadQuad(unit + kQuads + 64 * (3 + 8 * k + j));
          _mm512_storeu_si512(pb + 64 * (16 * k + j), _mm512_and_si512(q, lo4));
          _mm512_storeu_si512(pb + 64 * (16 * k + 8 + j), _mm512_and_si512(_mm512_srli_epi16(q, 4), lo4));
        }
      }
      PackScales(unit, pb);
    }
  }

  // The tile's d * sc_j, (m_j, m_j) pairs and dmin (Q4_K and Q5_K alike).
  static void PackScales(const uint8_t* unit, uint8_t* pb) {
    __m512i sc[2], mn[2];
    Scales(unit, sc, mn);
    const __m512 d = LoadF16x16(unit);
    for (int j = 0; j < 8; ++j) {
      const __m512 s = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(sc[j / 4], ByteOfLane(j % 4)));
      _mm512_storeu_ps(pb + kDsc + 64 * j, _mm512_mul_ps(d, s));
      _mm512_storeu_si512(pb + kMins + 64 * j, _mm512_shuffle_epi8(mn[j / 4], BytePair(j % 4)));
    }
    _mm512_storeu_ps(pb + kDmin, LoadF16x16(unit + 32));
  }
};

// Q5_K: the Q4_K unit with the fifth bits between the scales and the nibbles: quads 0..2
// scales, 3 + j the qh bytes 4j..4j+3 (bit 2k: value 4j.. of sub-block 2k, bit 2k + 1: of
// sub-block 2k + 1), 11 + 8k + j the nibbles as in Q4_K. Levels are 0..31 as plain bytes
// (the high nibble is shifted down: a fifth bit above it would not fit the byte); each
// fifth bit is moved to bit 4 (a shift and an AND) and joined with its nibble in one
// vpternlogd. Scales, mins and the GEMM tile are Q4_K's (Q45K<true> in gemm_kquant_avx512.cpp).
struct Q5KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 176;
  static constexpr int64_t kQuads = 64;  // after the d and dmin arrays
  static constexpr int kQh = 3, kQs = 11;  // quad indices

  // Bit b of every byte moved to bit 4, all other bits zero.
  template <int kBit>
  static inline __m512i BitTo4(__m512i v) {
    const __m512i b4 = _mm512_set1_epi8(0x10);
    if constexpr (kBit <= 4) {
      return _mm512_and_si512(_mm512_slli_epi16(v, 4 - kBit), b4);
    } else {
      return _mm512_and_si512(_mm512_srli_epi16(v, kBit - 4), b4);
    }
  }

  // Levels (0..31) of values 4j..4j+3 of sub-blocks 2k (v_lo) and 2k + 1 (v_hi), 16 rows.
  template <int kK>
  static inline void Levels(const uint8_t* unit, int j, __m512i* v_lo, __m512i* v_hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i q = LoadOnce(unit + kQuads + 64 * (kQs + 8 * kK + j));
    const __m512i qh = LoadOnce(unit + kQuads + 64 * (kQh + j));
    // ternlog 0xca: a ? b : c (a = m4: the nibble; elsewhere the fifth bit, zero above it).
    *v_lo = _mm512_ternarylogic_epi32(m4, q, BitTo4<2 * kK>(qh), 0xca);
    *v_hi = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi16(q, 4), BitTo4<2 * kK + 1>(qh), 0xca);
  }

  template <int kK, int NT>
  static inline void SubBlockPair(const uint8_t* unit, const __m512i (&sc)[2], const ActRow* a,
                                  int64_t i, __m512i (&isum)[NT]) {
    const __m512i s_lo = _mm512_shuffle_epi8(sc[kK / 2], ByteOfLane(2 * (kK % 2)));
    const __m512i s_hi = _mm512_shuffle_epi8(sc[kK / 2], ByteOfLane(2 * (kK % 2) + 1));
    __m512i dl[NT][2], dh[NT][2];
    for (int t = 0; t < NT; ++t) dl[t][0] = dl[t][1] = dh[t][0] = dh[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i vl, vh;
      Levels<kK>(unit, j, &vl, &vh);
      for (int t = 0; t < NT; ++t) {
        const uint8_t* yq = reinterpret_cast<const uint8_t*>(a[t].qs + kQK * i + 64 * kK + 4 * j);
        dl[t][j / 4] = DpbusdBcast(dl[t][j / 4], vl, yq);
        dh[t][j / 4] = DpbusdBcast(dh[t][j / 4], vh, yq + 32);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m512i l = _mm512_mullo_epi32(_mm512_add_epi32(dl[t][0], dl[t][1]), s_lo);
      const __m512i h = _mm512_mullo_epi32(_mm512_add_epi32(dh[t][0], dh[t][1]), s_hi);
      isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(l, h));
    }
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        __m512i sc[2], mn[2];
        Q4KI::Scales(unit, sc, mn);
        __m512i isum[NT];  // 16 x sum_j sc_j * dot_j
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        // The unit two ahead (5.5 KiB), 44 lines in two bursts.
        PrefetchLines<kUnit>(unit, 0, 22);
        SubBlockPair<0, NT>(unit, sc, a, i, isum);
        SubBlockPair<1, NT>(unit, sc, a, i, isum);
        PrefetchLines<kUnit>(unit, 22, 22);
        SubBlockPair<2, NT>(unit, sc, a, i, isum);
        SubBlockPair<3, NT>(unit, sc, a, i, isum);
        __m512i mp[8];
        for (int j = 0; j < 8; ++j) mp[j] = _mm512_shuffle_epi8(mn[j / 4], BytePair(j % 4));
        const __m512 d = LoadF16x16(unit);
        const __m512 dmin = LoadF16x16(unit + 32);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* bs = reinterpret_cast<const uint8_t*>(a[t].bsums + 16 * i);
          __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
          for (int j = 0; j < 8; j += 2) {
            m0 = _mm512_dpwssd_epi32(m0, mp[j], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * j)));
            m1 = _mm512_dpwssd_epi32(m1, mp[j + 1], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * j + 4)));
          }
          const __m512 msum = _mm512_cvtepi32_ps(_mm512_add_epi32(m0, m1));
          const __m512 part = _mm512_fmsub_ps(_mm512_cvtepi32_ps(isum[t]), d, _mm512_mul_ps(msum, dmin));
          acc[t] = _mm512_fmadd_ps(part, _mm512_set1_ps(a[t].d[i]), acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
    }
  }

  // The packed GEMM tile of Q45K<true>: Q4KI::Pack's layout with levels 0..31.
  template <int kK>
  static inline void PackLevels(const uint8_t* unit, uint8_t* pb) {
    for (int j = 0; j < 8; ++j) {
      __m512i vl, vh;
      Levels<kK>(unit, j, &vl, &vh);
      _mm512_storeu_si512(pb + 64 * (16 * kK + j), vl);
      _mm512_storeu_si512(pb + 64 * (16 * kK + 8 + j), vh);
    }
  }

  static void Pack(const uint8_t* w, uint64_t, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* unit = w + i * kUnit;
      uint8_t* pb = packed + i * Q4KI::kStride;
      PackLevels<0>(unit, pb);
      PackLevels<1>(unit, pb);
      PackLevels<2>(unit, pb);
      PackLevels<3>(unit, pb);
      Q4KI::PackScales(unit, pb);
    }
  }
};

struct Q6KI {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int64_t kUnit = 16 * 210;
  static constexpr int64_t kQuads = 32;  // after the d array
  static constexpr int kQl = 0, kQh = 32, kSc = 48;  // quad indices

  static inline const uint8_t* Quad(const uint8_t* unit, int q) { return unit + kQuads + 64 * q; }

  // Levels (0..63) of values 128h + 32g + 4j..+3 for g = g0 and g0 + 2 (g0 = 0: the low and
  // high nibbles of ql quad 16h + j; g0 = 1: of ql quad 16h + 8 + j); top bits from qh quad
  // 32 + 8h + j. Bits where `m4` is set come from the nibble, the rest from the shifted qh
  // bits, which are zero outside bits 4..5.
  static inline void Levels(const uint8_t* unit, int h, int g0, int j, __m512i* v_lo,
                            __m512i* v_hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i ql = LoadOnce(Quad(unit, kQl + 16 * h + 8 * g0 + j));
    const __m512i qh = LoadOnce(Quad(unit, kQh + 8 * h + j));
    // ternlog 0xca: a ? b : c (a = m4, b = nibble source, c = top-bit source).
    if (g0 == 0) {
      const __m512i hb = _mm512_and_si512(qh, _mm512_set1_epi8(0x33));  // bits 0..1: g 0, 4..5: g 2
      *v_lo = _mm512_ternarylogic_epi32(m4, ql, _mm512_slli_epi32(hb, 4), 0xca);
      *v_hi = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi32(ql, 4), hb, 0xca);
    } else {
      const __m512i hb = _mm512_and_si512(qh, _mm512_set1_epi8(static_cast<char>(0xcc)));  // 2..3: g 1, 6..7: g 3
      *v_lo = _mm512_ternarylogic_epi32(m4, ql, _mm512_slli_epi32(hb, 2), 0xca);
      *v_hi = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi32(ql, 4), _mm512_srli_epi32(hb, 2), 0xca);
    }
  }

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i, unit += kUnit) {
        __m512i scq[4];  // scale bytes 4m..4m+3 of every lane
        for (int m = 0; m < 4; ++m) scq[m] = LoadQuad(Quad(unit, kSc + m));
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
          // 53 lines, 64 bytes apart from the unit's start, cover its 3360 bytes whether it
          // starts at 0 or 32 mod 64 (units alternate).
          PrefetchLines<kUnit>(unit, 27 * h, 27 - h);
#pragma GCC unroll 8
          for (int g0 = 0; g0 < 2; ++g0) {
#pragma GCC unroll 8
            for (int jh = 0; jh < 2; ++jh) {
              // Sub-blocks s_lo = 8h + 2 g0 + jh (group g0) and s_hi = s_lo + 4 (group g0 + 2).
              __m512i dl[NT], dh[NT];
              for (int t = 0; t < NT; ++t) dl[t] = dh[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
              for (int j = 4 * jh; j < 4 * jh + 4; ++j) {
                __m512i vl, vh;
                Levels(unit, h, g0, j, &vl, &vh);
                for (int t = 0; t < NT; ++t) {
                  const uint8_t* yq = reinterpret_cast<const uint8_t*>(a[t].qs + kQK * i + 128 * h + 32 * g0 + 4 * j);
                  dl[t] = DpbusdBcast(dl[t], vl, yq);
                  dh[t] = DpbusdBcast(dh[t], vh, yq + 64);
                }
              }
              const int s_lo = 8 * h + 2 * g0 + jh, s_hi = s_lo + 4;
              const __m512i c_lo = _mm512_srai_epi32(_mm512_shuffle_epi8(scq[s_lo / 4], ByteToTop(s_lo % 4)), 24);
              const __m512i c_hi = _mm512_srai_epi32(_mm512_shuffle_epi8(scq[s_hi / 4], ByteToTop(s_hi % 4)), 24);
              for (int t = 0; t < NT; ++t) {
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(dl[t], c_lo),
                                                                     _mm512_mullo_epi32(dh[t], c_hi)));
              }
            }
          }
        }
        // Levels were q + 32: subtract 32 * sum_s sc_s * bsum_s.
        __m512i sp[8];  // (sc_2p, sc_2p+1) as int16
        for (int p = 0; p < 8; ++p) {
          sp[p] = _mm512_srai_epi16(_mm512_shuffle_epi8(scq[p / 2], BytesToHigh16(2 * (p % 2))), 8);
        }
        const __m512 d = LoadF16x16(unit);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* bs = reinterpret_cast<const uint8_t*>(a[t].bsums + 16 * i);
          __m512i c0 = _mm512_setzero_si512(), c1 = _mm512_setzero_si512();
          for (int p = 0; p < 8; p += 2) {
            c0 = _mm512_dpwssd_epi32(c0, sp[p], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p)));
            c1 = _mm512_dpwssd_epi32(c1, sp[p + 1], Bcast4(reinterpret_cast<const int8_t*>(bs + 4 * p + 4)));
          }
          const __m512i corr = _mm512_slli_epi32(_mm512_add_epi32(c0, c1), 5);
          const __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t], corr));
          acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(d, _mm512_set1_ps(a[t].d[i])), acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + 16 * g, acc[t]);
    }
  }

  // The packed GEMM tile of gemm_kquant_avx512.cpp (Q6K): per super-block 64 level quads
  // (quad 32h + 8g + j: values 128h + 32g + 4j..), 16 x 16 f32 d * sc_s, 8 x 16 int32
  // (sc_2p, sc_2p+1) int16 pairs, 16 f32 32 * d.
  static constexpr int64_t kDsc = 4096, kScp = 4096 + 1024, kD32 = 4096 + 1536;
  static constexpr int64_t kStride = 4096 + 1536 + 64;

  static void Pack(const uint8_t* w, uint64_t, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* unit = w + i * kUnit;
      uint8_t* pb = packed + i * kStride;
      for (int h = 0; h < 2; ++h) {
        for (int g0 = 0; g0 < 2; ++g0) {
          for (int j = 0; j < 8; ++j) {
            __m512i vl, vh;
            Levels(unit, h, g0, j, &vl, &vh);
            _mm512_storeu_si512(pb + 64 * (32 * h + 8 * g0 + j), vl);
            _mm512_storeu_si512(pb + 64 * (32 * h + 8 * (g0 + 2) + j), vh);
          }
        }
      }
      __m512i scq[4];
      for (int m = 0; m < 4; ++m) scq[m] = LoadQuad(Quad(unit, kSc + m));
      const __m512 d = LoadF16x16(unit);
      for (int s = 0; s < 16; ++s) {
        const __m512i c = _mm512_srai_epi32(_mm512_shuffle_epi8(scq[s / 4], ByteToTop(s % 4)), 24);
        _mm512_storeu_ps(pb + kDsc + 64 * s, _mm512_mul_ps(d, _mm512_cvtepi32_ps(c)));
      }
      for (int p = 0; p < 8; ++p) {
        _mm512_storeu_si512(pb + kScp + 64 * p,
                            _mm512_srai_epi16(_mm512_shuffle_epi8(scq[p / 2], BytesToHigh16(2 * (p % 2))), 8));
      }
      _mm512_storeu_ps(pb + kD32, _mm512_mul_ps(d, _mm512_set1_ps(32.0f)));
    }
  }
};

// nr / 16 whole groups (the driver guarantees nr % 16 == 0), nt <= 4 tokens.
}  // namespace

void FillInterleavedKQuants(MatmulImpl* impl) {
  RegisterInterleaved<Q4KI, kKQuantTileTokens>(impl, GgmlType::kQ4_K);
  RegisterInterleaved<Q5KI, kKQuantTileTokens>(impl, GgmlType::kQ5_K);
  RegisterInterleaved<Q6KI, kKQuantTileTokens>(impl, GgmlType::kQ6_K);
}

}  // namespace lifeline::kernels::avx512
