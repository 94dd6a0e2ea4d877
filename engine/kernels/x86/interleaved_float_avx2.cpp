// AVX2 kernels for F16 and BF16 weights in the row-interleaved layout (interleave.h): a block
// is 32 values of 16 rows stored as 16 quads, quad q holding values (2q, 2q + 1) of every
// row, row r in 32-bit lane r (the AVX-512 file, interleaved_float_avx512.cpp, says why).
//
// AVX2 reads a quad as four 16-byte quarters of 4 rows x 2 values, each widened to 8 f32
// (F16: vcvtph2ps; BF16: zero-extend and shift by 16, exact), and adds them with one FMA per
// quarter and token against the token's value pair broadcast as 64 bits. The lane pairs are
// summed once per group (vhaddps). At one token the even and odd quads sum in separate
// accumulators, eight chains in all, so consecutive quads do not wait on the FMA's latency.
#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/interleaved_avx2.h"
#include "engine/kernels/x86/interleaved_float.h"

namespace lifeline::kernels::avx2 {
namespace {

// Rows 4k .. 4k + 3 of a quad as (row, value) pairs: lanes (2i, 2i + 1) are row 4k + i.
struct F16Q {
  static __m256 Quarter(const uint8_t* quad, int k) {
    return _mm256_cvtph_ps(LoadU128(quad + 16 * k));
  }
  // The token's value pair (2q, 2q + 1) of block b, in every 64-bit lane.
  static __m256 Pair(const ActRow& a, int64_t i) {
    double v;
    std::memcpy(&v, a.f + i, sizeof(v));
    return _mm256_castpd_ps(_mm256_set1_pd(v));
  }
};

struct Bf16Q {
  static __m256 Quarter(const uint8_t* quad, int k) {
    const __m256i widened = _mm256_cvtepu16_epi32(LoadU128(quad + 16 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
  }
  static __m256 Pair(const ActRow& a, int64_t i) {
    uint32_t v;
    std::memcpy(&v, a.bf + i, sizeof(v));
    // bf16 -> f32 is the value's 16 bits on top: (lo << 16) in the low float, (hi << 16) high.
    const uint64_t both = (static_cast<uint64_t>(v & 0xffff0000u) << 32) | (v << 16);
    return _mm256_castsi256_ps(_mm256_set1_epi64x(static_cast<int64_t>(both)));
  }
};

// acc[0..3] lanes (2i, 2i + 1) are row 4k + i: the sums of the pairs, rows 0..7 and 8..15.
static inline void SumLanePairs(const __m256 (&acc)[4], __m256* rows0_7, __m256* rows8_15) {
  // vhaddps per 128-bit half: [r0 r1 r4 r5 | r2 r3 r6 r7]; the qword permute orders them.
  const __m256 a = _mm256_hadd_ps(acc[0], acc[1]);
  const __m256 b = _mm256_hadd_ps(acc[2], acc[3]);
  *rows0_7 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(a), 0xd8));
  *rows8_15 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(b), 0xd8));
}

template <typename Q>
struct FloatI {
  static constexpr int64_t kBlockElems = 32;

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    constexpr int kSets = NT == 1 ? 2 : 1;
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m256 acc[kSets][NT][4];
      for (int s = 0; s < kSets; ++s) {
        for (int t = 0; t < NT; ++t) {
          for (int k = 0; k < 4; ++k) acc[s][t][k] = _mm256_setzero_ps();
        }
      }
      for (int64_t b = 0; b < nb; ++b, unit += kFloatUnit) {
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
          const uint8_t* quad = unit + 64 * q;
          if ((q & 7) == 0) PrefetchFloatHalfUnit(quad);
          const int s = q % kSets;
          __m256 xv[NT];
          for (int t = 0; t < NT; ++t) xv[t] = Q::Pair(a[t], 32 * b + 2 * q);
          for (int k = 0; k < 4; ++k) {
            const __m256 wv = Q::Quarter(quad, k);
            for (int t = 0; t < NT; ++t) acc[s][t][k] = _mm256_fmadd_ps(wv, xv[t], acc[s][t][k]);
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        for (int s = 1; s < kSets; ++s) {
          for (int k = 0; k < 4; ++k) acc[0][t][k] = _mm256_add_ps(acc[0][t][k], acc[s][t][k]);
        }
        __m256 lo, hi;
        SumLanePairs(acc[0][t], &lo, &hi);
        _mm256_storeu_ps(y + t * ldy + 16 * g, lo);
        _mm256_storeu_ps(y + t * ldy + 16 * g + 8, hi);
      }
    }
  }
};

}  // namespace

void FillInterleavedFloat(MatmulImpl* impl) {
  RegisterInterleaved<FloatI<F16Q>>(impl, GgmlType::kF16);
  RegisterInterleaved<FloatI<Bf16Q>>(impl, GgmlType::kBF16);
}

}  // namespace lifeline::kernels::avx2
