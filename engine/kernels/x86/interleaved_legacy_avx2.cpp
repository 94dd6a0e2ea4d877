// AVX2 kernels for the 32-value block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL; the last
// four below) in the row-interleaved layout (interleave.h), for
// CPUs without AVX-512: the same repacked bytes the AVX-512 tiles read, so one layout serves
// every x86 level that asks for it.
//
// A unit (block b of a 16-row group) is the 16 rows' f16 d, then the block's quads, each 64
// bytes with row r's 4 bytes in int32 lane r. AVX2 takes a quad as two 256-bit halves (rows
// 0..7, 8..15). Without VNNI the integer dot is vpmaddubsw (unsigned levels x signed
// activation bytes broadcast per quad, neighbouring products added into int16) and then
// vpmaddwd by 1 into int32 lanes: lane r of the result is row r's dot with those 4 activation
// bytes. No horizontal sums and no per-row scale loads: per unit and token one conversion and
// one FMA per half with d_w (8 lanes, one vcvtph2ps) x d_y.
//
// Q4_0: levels 0..15 (low nibbles: values 4k..4k+3 of quad k, high nibbles: 16 + 4k..), so a
// vpmaddubsw pair is at most 2 * 15 * 127 = 3810 and the 8 of a block add up in int16 without
// overflow (|sum| <= 30480); one vpmaddwd per block and half. The level offset 8 comes back as
// -8 * sum(y of the block) (the activation's isum), added once per block in int32.
// Q8_0: levels are stored xor 0x80 (unsigned w + 128); w + 128 up to 255 would saturate
// vpmaddubsw, so the signed w is restored (xor) and multiplied as |w| x sign(y, w) (pairs
// <= 2 * 128 * 127 = 32512), widened per quad.
// The scalar twin of both is the interleaved reference tile (interleave.cpp), which gives the
// same integer block sums; tests/kernels/interleave_test.cpp checks every level against it.
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"
#include "engine/kernels/x86/interleaved_avx2.h"

namespace lifeline::kernels::avx2 {
namespace {

// Software prefetch: every line of the two units a little over kAheadBytes ahead, issued
// once per pair of units (the pattern the AVX-512 tile had before its unrolled 8-unit chunks,
// interleaved_legacy_avx512.cpp; those chunks here, `--isa avx2` on an AVX-512 machine, read
// the same for Q4_0 / Q8_0 and 12 % slower for Q5_1 end to end, so this loop stays).
// Distances measured with this table forced on the Zen 5 development machine (`--isa avx2`,
// decode, two threads): binaries with 4 KiB and with these distances alternated as separate
// processes, order flipped each round, median of 8 rounds: 1.1B Q4_0 +2.5 %, 110M Q8_0
// +2.8 %, 1.1B Q8_0 +1.0 % (8 KiB for Q8_0 had looked worse on 1.1B in a first, one-process
// comparison). Not measured on an AVX2-only CPU.
template <int64_t kUnit, int64_t kAheadBytes>
static inline void PrefetchPair(const uint8_t* unit) {
  constexpr int64_t kAhead = (kAheadBytes / kUnit + 1) * kUnit;
  const uint8_t* line = reinterpret_cast<const uint8_t*>(
      reinterpret_cast<uintptr_t>(unit + kAhead) & ~uintptr_t{63});
  for (int64_t off = 0; off < 2 * kUnit; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line + off), _MM_HINT_T0);
  }
}

// Per unit b and token t: the int32 block sums of the 16 rows (rows 0..7 in s[t][0], 8..15 in
// s[t][1]), level offset included.
struct Q4_0I {
  static constexpr int64_t kBlockElems = 32;
  static constexpr int64_t kUnit = 16 * 18;
  static constexpr int64_t kAheadBytes = 8192;
  static constexpr bool kMin = false;

  template <int NT>
  static inline void BlockSums(const uint8_t* unit, const ActRow* a, int64_t b,
                               __m256i (&s)[NT][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s16[NT][2];
    for (int t = 0; t < NT; ++t) s16[t][0] = s16[t][1] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i lo[2], hi[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i q = LoadU256(unit + 32 + 64 * k + 32 * h);
        lo[h] = _mm256_and_si256(q, m4);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      }
      for (int t = 0; t < NT; ++t) {
        const __m256i yl = Bcast4(a[t].qs + 32 * b + 4 * k);
        const __m256i yh = Bcast4(a[t].qs + 32 * b + 16 + 4 * k);
        for (int h = 0; h < 2; ++h) {
          s16[t][h] = _mm256_add_epi16(s16[t][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], yl),
                                                                  _mm256_maddubs_epi16(hi[h], yh)));
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m256i off = _mm256_set1_epi32(-8 * a[t].isum[b]);
      for (int h = 0; h < 2; ++h) s[t][h] = _mm256_add_epi32(_mm256_madd_epi16(s16[t][h], ones), off);
    }
  }
};

struct Q8_0I {
  static constexpr int64_t kBlockElems = 32;
  static constexpr int64_t kUnit = 16 * 34;
  static constexpr int64_t kAheadBytes = 6144;
  static constexpr bool kMin = false;

  template <int NT>
  static inline void BlockSums(const uint8_t* unit, const ActRow* a, int64_t b,
                               __m256i (&s)[NT][2]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < NT; ++t) s[t][0] = s[t][1] = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      __m256i sw[2], aw[2];
      for (int h = 0; h < 2; ++h) {
        sw[h] = _mm256_xor_si256(LoadU256(unit + 32 + 64 * k + 32 * h), flip);  // signed w
        aw[h] = _mm256_abs_epi8(sw[h]);
      }
      for (int t = 0; t < NT; ++t) {
        const __m256i y4 = Bcast4(a[t].qs + 32 * b + 4 * k);
        for (int h = 0; h < 2; ++h) {
          const __m256i p = _mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(y4, sw[h]));
          s[t][h] = _mm256_add_epi32(s[t][h], _mm256_madd_epi16(p, ones));
        }
      }
    }
  }
};

// Q4_1: the d and m arrays, then Q4_0's nibble quads; levels 0..15 without offset (Q4_0's
// int16 bound holds); the min term m_w * s_y is added per unit (Groups).
struct Q4_1I {
  static constexpr int64_t kBlockElems = 32;
  static constexpr int64_t kUnit = 16 * 20;
  static constexpr int64_t kAheadBytes = 8192;
  static constexpr bool kMin = true;

  template <int NT>
  static inline void BlockSums(const uint8_t* unit, const ActRow* a, int64_t b,
                               __m256i (&s)[NT][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i s16[NT][2];
    for (int t = 0; t < NT; ++t) s16[t][0] = s16[t][1] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i lo[2], hi[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i q = LoadU256(unit + 64 + 64 * k + 32 * h);
        lo[h] = _mm256_and_si256(q, m4);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      }
      for (int t = 0; t < NT; ++t) {
        const __m256i yl = Bcast4(a[t].qs + 32 * b + 4 * k);
        const __m256i yh = Bcast4(a[t].qs + 32 * b + 16 + 4 * k);
        for (int h = 0; h < 2; ++h) {
          s16[t][h] = _mm256_add_epi16(s16[t][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], yl),
                                                                  _mm256_maddubs_epi16(hi[h], yh)));
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      for (int h = 0; h < 2; ++h) s[t][h] = SumPairs16(s16[t][h]);
    }
  }
};

// Q5_0 / Q5_1 (interleaved_legacy_avx512.cpp describes the unit): levels 0..31, the nibble
// plus 16 where the fifth bit is set (the lane's qh byte copied to its four bytes, one bit
// tested per byte). A vpmaddubsw pair is at most 2 * 31 * 127 = 7874, so the sums widen to
// int32 every two quads of each half (31496). Offset 16 for Q5_0; the min term for Q5_1.
template <int kQh, int kOffsetV, bool kMinV>
struct Q5I {
  static constexpr int64_t kBlockElems = 32;
  static constexpr int64_t kUnit = 16 * (kMinV ? 24 : 22);
  static constexpr int64_t kAheadBytes = 8192;
  static constexpr bool kMin = kMinV;

  // 0x10 in byte i of every int32 lane whose bit s + i of qh byte `b` is set.
  static inline __m256i FifthBits(__m256i qh, int b, int s) {
    const __m256i sel = _mm256_set1_epi32(static_cast<int>((1u << s) | (2u << s) << 8 | (4u << s) << 16 | (8u << s) << 24));
    const __m256i rep = _mm256_shuffle_epi8(qh, PerLaneShuffle(0x01010101u * b, 0x04040404u));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(rep, sel), sel);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
  }

  template <int NT>
  static inline void BlockSums(const uint8_t* unit, const ActRow* a, int64_t b,
                               __m256i (&s)[NT][2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int t = 0; t < NT; ++t) {
      const __m256i off = _mm256_set1_epi32(-kOffsetV * a[t].isum[b]);
      s[t][0] = s[t][1] = off;
    }
    for (int k2 = 0; k2 < 4; k2 += 2) {
      __m256i s16[NT][2];
      for (int t = 0; t < NT; ++t) s16[t][0] = s16[t][1] = _mm256_setzero_si256();
      for (int k = k2; k < k2 + 2; ++k) {
        __m256i lo[2], hi[2];
        for (int h = 0; h < 2; ++h) {
          const __m256i qh = LoadU256(unit + kQh + 32 * h);
          const __m256i q = LoadU256(unit + kQh + 64 + 64 * k + 32 * h);
          lo[h] = _mm256_or_si256(_mm256_and_si256(q, m4), FifthBits(qh, k / 2, 4 * (k % 2)));
          hi[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                  FifthBits(qh, 2 + k / 2, 4 * (k % 2)));
        }
        for (int t = 0; t < NT; ++t) {
          const __m256i yl = Bcast4(a[t].qs + 32 * b + 4 * k);
          const __m256i yh = Bcast4(a[t].qs + 32 * b + 16 + 4 * k);
          for (int h = 0; h < 2; ++h) {
            s16[t][h] = _mm256_add_epi16(s16[t][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], yl),
                                                                    _mm256_maddubs_epi16(hi[h], yh)));
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        for (int h = 0; h < 2; ++h) s[t][h] = _mm256_add_epi32(s[t][h], SumPairs16(s16[t][h]));
      }
    }
  }
};
using Q5_0I = Q5I<32, 16, false>;
using Q5_1I = Q5I<64, 0, true>;

// IQ4_NL: Q4_0's unit, the nibbles index the signed 16-entry grid (one vpshufb each); the
// products go through |w| x sign(y, w) as Q8_0's (a pair is at most 2 * 127 * 127), widened
// per quad.
struct IQ4_NLI {
  static constexpr int64_t kBlockElems = 32;
  static constexpr int64_t kUnit = 16 * 18;
  static constexpr int64_t kAheadBytes = 8192;
  static constexpr bool kMin = false;

  template <int NT>
  static inline void BlockSums(const uint8_t* unit, const ActRow* a, int64_t b,
                               __m256i (&s)[NT][2]) {
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_setr_epi8(
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int t = 0; t < NT; ++t) s[t][0] = s[t][1] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      __m256i sw[2][2], aw[2][2];  // [lo / hi][half]
      for (int h = 0; h < 2; ++h) {
        const __m256i q = LoadU256(unit + 32 + 64 * k + 32 * h);
        sw[0][h] = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, m4));
        sw[1][h] = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        aw[0][h] = _mm256_abs_epi8(sw[0][h]);
        aw[1][h] = _mm256_abs_epi8(sw[1][h]);
      }
      for (int t = 0; t < NT; ++t) {
        const __m256i y4[2] = {Bcast4(a[t].qs + 32 * b + 4 * k), Bcast4(a[t].qs + 32 * b + 16 + 4 * k)};
        for (int n = 0; n < 2; ++n) {
          for (int h = 0; h < 2; ++h) {
            const __m256i p = _mm256_maddubs_epi16(aw[n][h], _mm256_sign_epi8(y4[n], sw[n][h]));
            s[t][h] = _mm256_add_epi32(s[t][h], SumPairs16(p));
          }
        }
      }
    }
  }
};

// n_groups consecutive 16-row groups, NT tokens: per unit the block sums, then one conversion
// and one FMA per half with d_w x d_y.
template <typename B>
struct Groups {
  static constexpr int64_t kBlockElems = B::kBlockElems;

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[NT][2];
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b, unit += B::kUnit) {
        if ((b & 1) == 0) PrefetchPair<B::kUnit, B::kAheadBytes>(unit);
        __m256i s[NT][2];
        B::template BlockSums<NT>(unit, a, b, s);
        const __m256 d0 = LoadF16x8(unit), d1 = LoadF16x8(unit + 16);
        for (int t = 0; t < NT; ++t) {
          const __m256 dy = _mm256_set1_ps(a[t].d[b]);
          acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][0]), _mm256_mul_ps(d0, dy), acc[t][0]);
          acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][1]), _mm256_mul_ps(d1, dy), acc[t][1]);
        }
        if constexpr (B::kMin) {  // + m_w * s_y
          const __m256 m0 = LoadF16x8(unit + 32), m1 = LoadF16x8(unit + 48);
          for (int t = 0; t < NT; ++t) {
            const __m256 sy = _mm256_set1_ps(a[t].s[b]);
            acc[t][0] = _mm256_fmadd_ps(m0, sy, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(m1, sy, acc[t][1]);
          }
        }
      }
      StoreGroup<NT>(acc, y, ldy, g);
    }
  }
};

}  // namespace

void FillInterleavedLegacy(MatmulImpl* impl) {
  RegisterInterleaved<Groups<Q4_0I>>(impl, GgmlType::kQ4_0);
  RegisterInterleaved<Groups<Q8_0I>>(impl, GgmlType::kQ8_0);
  RegisterInterleaved<Groups<Q4_1I>>(impl, GgmlType::kQ4_1);
  RegisterInterleaved<Groups<Q5_0I>>(impl, GgmlType::kQ5_0);
  RegisterInterleaved<Groups<Q5_1I>>(impl, GgmlType::kQ5_1);
  RegisterInterleaved<Groups<IQ4_NLI>>(impl, GgmlType::kIQ4_NL);
}

}  // namespace lifeline::kernels::avx2
