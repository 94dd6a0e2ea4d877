// AVX-512 attention kernel (compiled with the AVX-512 flags; called only after dispatch).
// A KV block of 16 positions is one zmm of scores: lane s is position s of the block.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/x86/attention_simd.h"

// GCC 12 flags the deliberately undefined lanes inside its own AVX-512 intrinsics
// (`__m512 __Y = __Y;`) as maybe-uninitialized, as in avx512_util.h: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lifeline::kernels {
namespace {

inline __m512 Exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 y = _mm512_set1_ps(kC7);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kC6));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kC5));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kC4));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kC3));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kC2));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) (no cancellation for large |x|; for
// small |x| the absolute error stays at the exp's ~2e-7).
inline __m512 Tanh512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 e = Exp512(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
  const __m512 t = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e),
                                 _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

struct Avx512 {
  static constexpr int64_t kLanes = 16;
  // Scores from the K step transposed (ScoresT): 16 keys per vector.
  static constexpr bool kTransposedK = true;
  // Positions per step: four 16-position vectors of scores per row, so each broadcast q
  // value meets four K vectors (the scores' loads per FMA halve against one vector) and the
  // softmax's reductions and rescaling run once per 64 positions instead of per 16.
  static constexpr int64_t kStepSlots = 64;

  // kt[d * 16 + s] = k[s * hk + d] for the 16 rows of a block (hk a multiple of 16): 16x16
  // tiles through the unpack / shuffle network.
  static void Transpose16(const float* k, int64_t hk, float* kt) {
    for (int64_t c = 0; c < hk; c += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int s = 0; s < 16; ++s) r[s] = _mm512_loadu_ps(k + s * hk + c);
      __m512 t[16];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved by element
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {  // quads of rows
        const int a = 4 * i;
        const __m512d lo0 = _mm512_castps_pd(t[a]), hi0 = _mm512_castps_pd(t[a + 1]);
        const __m512d lo1 = _mm512_castps_pd(t[a + 2]), hi1 = _mm512_castps_pd(t[a + 3]);
        r[a] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
        r[a + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
        r[a + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
        r[a + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
      }
      // Now 128-bit chunk m of r[4i + j] holds rows 4i..4i+3 of column 4m + j.
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Gather chunk m of r[j], r[4 + j], r[8 + j], r[12 + j] into one vector per m.
        const __m512 a01lo = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);   // chunks 0,1 | 0,1
        const __m512 a01hi = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee);   // chunks 2,3 | 2,3
        const __m512 b01lo = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        const __m512 b01hi = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
        const __m512 m0 = _mm512_shuffle_f32x4(a01lo, b01lo, 0x88);  // chunk 0 of each
        const __m512 m1 = _mm512_shuffle_f32x4(a01lo, b01lo, 0xdd);  // chunk 1
        const __m512 m2 = _mm512_shuffle_f32x4(a01hi, b01hi, 0x88);  // chunk 2
        const __m512 m3 = _mm512_shuffle_f32x4(a01hi, b01hi, 0xdd);  // chunk 3
        _mm512_storeu_ps(kt + (c + 0 + j) * 16, m0);
        _mm512_storeu_ps(kt + (c + 4 + j) * 16, m1);
        _mm512_storeu_ps(kt + (c + 8 + j) * 16, m2);
        _mm512_storeu_ps(kt + (c + 12 + j) * 16, m3);
      }
    }
  }

  // p[c * 64 + 16 g + s] = q[c] . K[16 g + s] for n (1..4) rows and the step's n_groups (1..4)
  // groups of 16 positions, against the transposed step kt ([group][hk][16]). One chain per
  // (row, group) in dimension order, so a row's scores do not depend on how many rows or
  // groups share the call.
  static inline __attribute__((always_inline)) void ScoresT(const float* const* q, int n,
                                                            const float* kt, int64_t hk,
                                                            int n_groups, float* p) {
    switch (n * 8 + n_groups) {
      case 8 + 1: ScoresTN<1, 1>(q, kt, hk, p); break;
      case 8 + 2: ScoresTN<1, 2>(q, kt, hk, p); break;
      case 8 + 3: ScoresTN<1, 3>(q, kt, hk, p); break;
      case 8 + 4: ScoresTN<1, 4>(q, kt, hk, p); break;
      case 16 + 1: ScoresTN<2, 1>(q, kt, hk, p); break;
      case 16 + 2: ScoresTN<2, 2>(q, kt, hk, p); break;
      case 16 + 3: ScoresTN<2, 3>(q, kt, hk, p); break;
      case 16 + 4: ScoresTN<2, 4>(q, kt, hk, p); break;
      case 24 + 1: ScoresTN<3, 1>(q, kt, hk, p); break;
      case 24 + 2: ScoresTN<3, 2>(q, kt, hk, p); break;
      case 24 + 3: ScoresTN<3, 3>(q, kt, hk, p); break;
      case 24 + 4: ScoresTN<3, 4>(q, kt, hk, p); break;
      case 32 + 1: ScoresTN<4, 1>(q, kt, hk, p); break;
      case 32 + 2: ScoresTN<4, 2>(q, kt, hk, p); break;
      case 32 + 3: ScoresTN<4, 3>(q, kt, hk, p); break;
      case 32 + 4: ScoresTN<4, 4>(q, kt, hk, p); break;
      default: break;
    }
  }
  template <int N, int G>
  static inline __attribute__((always_inline)) void ScoresTN(const float* const* q,
                                                             const float* kt, int64_t hk,
                                                             float* p) {
    __m512 acc[N][G];
#pragma GCC unroll 4
    for (int r = 0; r < N; ++r) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t d = 0; d < hk; ++d) {
      __m512 kv[G];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) kv[g] = _mm512_loadu_ps(kt + (g * hk + d) * 16);
#pragma GCC unroll 4
      for (int r = 0; r < N; ++r) {
        const __m512 qb = _mm512_set1_ps(q[r][d]);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(qb, kv[g], acc[r][g]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < N; ++r) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) _mm512_storeu_ps(p + r * kStepSlots + 16 * g, acc[r][g]);
    }
  }

  // n values of one head's row -> dst[0, n_pad), zero past n.
  static void LoadRow(AttnKvType type, const uint8_t* src, float* dst, int64_t n,
                      int64_t n_pad) {
    for (int64_t c = 0; c < n_pad; c += 16) {
      const int64_t m = n - c;  // >= 1: n_pad is n rounded up to 16
      const __mmask16 mask = m >= 16 ? static_cast<__mmask16>(0xffff)
                                     : static_cast<__mmask16>((1u << m) - 1);
      __m512 v;
      switch (type) {
        case AttnKvType::kF32:
          v = _mm512_maskz_loadu_ps(mask, src + 4 * c);
          break;
        case AttnKvType::kF16:
          v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, src + 2 * c));
          break;
        default: {  // kQ8_0: chunk c lies in block c / 32 at offset c % 32 (0 or 16)
          const uint8_t* blk = src + (c / kAttnQ8BlockElems) * kAttnQ8BlockBytes;
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          const __m128i q8 = _mm_maskz_loadu_epi8(mask, blk + 2 + c % kAttnQ8BlockElems);
          v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)),
                            _mm512_set1_ps(_cvtsh_ss(dh)));
          break;
        }
      }
      _mm512_storeu_ps(dst + c, v);
    }
  }

  // p: a row's 64 raw dots in, probabilities out (0 outside [lo, n_valid)). Returns the
  // factor the row's accumulator must be scaled by (exp(old max - new max)). Lanes past the
  // step's last group hold stale values: they are masked like any invisible position.
  static inline __attribute__((always_inline)) float Softmax(float* p, int lo, int n_valid,
                                                             float scale, float softcap,
                                                             float* run_max, float* run_den) {
    const uint64_t below = n_valid >= 64 ? ~uint64_t{0} : (uint64_t{1} << n_valid) - 1;
    const uint64_t valid = below & ~((uint64_t{1} << lo) - 1);
    __mmask16 m[4];
    __m512 sv[4];
    __m512 mv = _mm512_set1_ps(-__builtin_inff());
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      m[g] = static_cast<__mmask16>(valid >> (16 * g));
      sv[g] = _mm512_mul_ps(_mm512_loadu_ps(p + 16 * g), _mm512_set1_ps(scale));
      if (softcap > 0.0f) {
        sv[g] = _mm512_mul_ps(Tanh512(_mm512_div_ps(sv[g], _mm512_set1_ps(softcap))),
                              _mm512_set1_ps(softcap));
      }
      mv = _mm512_mask_max_ps(mv, m[g], mv, sv[g]);
    }
    const float block_max = _mm512_reduce_max_ps(mv);
    const float old_max = *run_max;
    const float new_max = block_max > old_max ? block_max : old_max;
    // The vector exp (no library call in the loop); on the first step old_max is -inf and
    // the clamp gives exp(-87) ~ 1.6e-38 times an accumulator and denominator of zero.
    const float corr = new_max == old_max
                           ? 1.0f
                           : _mm512_cvtss_f32(Exp512(_mm512_set1_ps(old_max - new_max)));
    const __m512 nm = _mm512_set1_ps(new_max);
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512 e = _mm512_maskz_mov_ps(m[g], Exp512(_mm512_sub_ps(sv[g], nm)));
      _mm512_storeu_ps(p + 16 * g, e);
      sum = _mm512_add_ps(sum, e);
    }
    *run_den = *run_den * corr + _mm512_reduce_add_ps(sum);
    *run_max = new_max;
    return corr;
  }

  // For each of n (1..4) rows: acc_r = acc_r * corr_r + sum_{s < n_valid_r} p_r[s] * V[s]
  // (p_r = p + 64 r). The rows share each V load: per position, four V vectors meet four
  // broadcast probabilities (16 FMAs for 8 loads; one row alone issued 10 loads per 8 FMAs
  // and waited on them). Every row's sum runs in position order over the chunk's longest
  // n_valid: past its own n_valid a row's p is 0 (Softmax stores zeros there) and adds
  // exactly nothing, so a row's result does not depend on the rows beside it. (Exactly
  // nothing for finite V: an Inf in a later position's V row, which only an overflowed
  // forward pass writes, would reach an earlier token of the same chunk as NaN; with grouped
  // heads a chunk's rows are one token's heads and share n_valid.)
  static inline __attribute__((always_inline)) void AccumulateVRows(
      float* const* acc, const float* p, const float* v, const int* n_valid, int n, int64_t hv,
      const float* corr) {
    switch (n) {
      case 1: AccumulateVN<1>(acc, p, v, n_valid, hv, corr); break;
      case 2: AccumulateVN<2>(acc, p, v, n_valid, hv, corr); break;
      case 3: AccumulateVN<3>(acc, p, v, n_valid, hv, corr); break;
      case 4: AccumulateVN<4>(acc, p, v, n_valid, hv, corr); break;
      default: break;
    }
  }
  template <int N>
  static inline __attribute__((always_inline)) void AccumulateVN(
      float* const* acc, const float* p, const float* v, const int* n_valid, int64_t hv,
      const float* corr) {
    int n_max = 0;
#pragma GCC unroll 4
    for (int r = 0; r < N; ++r) n_max = n_valid[r] > n_max ? n_valid[r] : n_max;
    for (int64_t c = 0; c < hv; c += 64) {
      const int nv = hv - c >= 64 ? 4 : static_cast<int>((hv - c) / 16);  // hv: whole vectors
      __m512 a[N][4];
#pragma GCC unroll 4
      for (int r = 0; r < N; ++r) {
        const __m512 cv = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          a[r][u] = u < nv ? _mm512_mul_ps(_mm512_loadu_ps(acc[r] + c + 16 * u), cv)
                           : _mm512_setzero_ps();
        }
      }
      if (nv == 4) {
        for (int s = 0; s < n_max; ++s) {
          const float* vs = v + s * hv + c;
          const __m512 v0 = _mm512_loadu_ps(vs), v1 = _mm512_loadu_ps(vs + 16);
          const __m512 v2 = _mm512_loadu_ps(vs + 32), v3 = _mm512_loadu_ps(vs + 48);
#pragma GCC unroll 4
          for (int r = 0; r < N; ++r) {
            const __m512 pr = _mm512_set1_ps(p[kStepSlots * r + s]);
            a[r][0] = _mm512_fmadd_ps(pr, v0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(pr, v1, a[r][1]);
            a[r][2] = _mm512_fmadd_ps(pr, v2, a[r][2]);
            a[r][3] = _mm512_fmadd_ps(pr, v3, a[r][3]);
          }
        }
      } else {
        for (int s = 0; s < n_max; ++s) {
          const float* vs = v + s * hv + c;
#pragma GCC unroll 4
          for (int u = 0; u < 4; ++u) {
            if (u >= nv) break;
            const __m512 vu = _mm512_loadu_ps(vs + 16 * u);
#pragma GCC unroll 4
            for (int r = 0; r < N; ++r) {
              a[r][u] = _mm512_fmadd_ps(_mm512_set1_ps(p[kStepSlots * r + s]), vu, a[r][u]);
            }
          }
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < N; ++r) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          if (u < nv) _mm512_storeu_ps(acc[r] + c + 16 * u, a[r][u]);
        }
      }
    }
  }

  static void ExpStore(const float* x, float* y) {
    _mm512_storeu_ps(y, Exp512(_mm512_loadu_ps(x)));
  }
};

}  // namespace

void AttendAvx512(const AttnKvView& kv, const AttnShape& s, const AttnTile& tile,
                  AttnScratch& scratch) {
  AttendSimd<Avx512>(kv, s, tile, scratch);
}

void ExpRowAvx512(const float* x, float* y, int64_t n) { ExpRowSimd<Avx512>(x, y, n); }

}  // namespace lifeline::kernels
