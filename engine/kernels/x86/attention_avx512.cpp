// AVX-512 attention kernel (compiled with the AVX-512 flags; called only after dispatch).
// A KV block of 16 positions is one zmm of scores: lane s is position s of the block.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/x86/attention_simd.h"

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

// Lane k of the result = sum of the 8 lanes of h[k].
inline __m256 Reduce8(const __m256* h) {
  const __m256 t01 = _mm256_hadd_ps(h[0], h[1]);
  const __m256 t23 = _mm256_hadd_ps(h[2], h[3]);
  const __m256 t45 = _mm256_hadd_ps(h[4], h[5]);
  const __m256 t67 = _mm256_hadd_ps(h[6], h[7]);
  const __m256 u03 = _mm256_hadd_ps(t01, t23);  // [0..3 low halves | 0..3 high halves]
  const __m256 u47 = _mm256_hadd_ps(t45, t67);
  return _mm256_add_ps(_mm256_permute2f128_ps(u03, u47, 0x20),
                       _mm256_permute2f128_ps(u03, u47, 0x31));
}

struct Avx512 {
  static constexpr int64_t kLanes = 16;

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

  // p[s] = q . K[s] for the 16 rows of the block (rows are hk floats, zero-padded).
  static void Scores(const float* q, const float* k, int64_t hk, float* p) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) acc[s] = _mm512_setzero_ps();
    for (int64_t c = 0; c < hk; c += 16) {
      const __m512 qv = _mm512_loadu_ps(q + c);
#pragma GCC unroll 16
      for (int s = 0; s < 16; ++s) {
        acc[s] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + s * hk + c), acc[s]);
      }
    }
    __m256 h[16];
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) {
      h[s] = _mm256_add_ps(_mm512_castps512_ps256(acc[s]), _mm512_extractf32x8_ps(acc[s], 1));
    }
    _mm256_storeu_ps(p, Reduce8(h));
    _mm256_storeu_ps(p + 8, Reduce8(h + 8));
  }

  // p: raw dots in, probabilities out (0 outside [lo, n_valid)). Returns the factor the
  // row's accumulator must be scaled by (exp(old max - new max)).
  static float Softmax(float* p, int lo, int n_valid, float scale, float softcap,
                       float* run_max, float* run_den) {
    const __mmask16 valid = static_cast<__mmask16>(((1u << n_valid) - 1) & ~((1u << lo) - 1));
    __m512 sv = _mm512_mul_ps(_mm512_loadu_ps(p), _mm512_set1_ps(scale));
    if (softcap > 0.0f) {
      sv = _mm512_mul_ps(Tanh512(_mm512_div_ps(sv, _mm512_set1_ps(softcap))),
                         _mm512_set1_ps(softcap));
    }
    const float block_max = _mm512_mask_reduce_max_ps(valid, sv);
    const float old_max = *run_max;
    const float new_max = block_max > old_max ? block_max : old_max;
    // exp(-inf) == 0 clears the empty state on the first block.
    const float corr = new_max == old_max ? 1.0f : __builtin_expf(old_max - new_max);
    const __m512 e = _mm512_maskz_mov_ps(valid, Exp512(_mm512_sub_ps(sv, _mm512_set1_ps(new_max))));
    _mm512_storeu_ps(p, e);
    *run_den = *run_den * corr + _mm512_reduce_add_ps(e);
    *run_max = new_max;
    return corr;
  }

  // acc = acc * corr + sum_{s < n_valid} p[s] * V[s]. Four vectors of the row at a time with
  // two chains each (even / odd positions) to hide FMA latency.
  static void AccumulateV(float* acc, const float* p, const float* v, int n_valid, int64_t hv,
                          float corr) {
    const __m512 cv = _mm512_set1_ps(corr);
    int64_t c = 0;
    for (; c + 64 <= hv; c += 64) {
      __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + c), cv);
      __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(acc + c + 16), cv);
      __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc + c + 32), cv);
      __m512 a3 = _mm512_mul_ps(_mm512_loadu_ps(acc + c + 48), cv);
      __m512 b0 = _mm512_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
      int s = 0;
      for (; s + 2 <= n_valid; s += 2) {
        const __m512 pe = _mm512_set1_ps(p[s]);
        const __m512 po = _mm512_set1_ps(p[s + 1]);
        const float* ve = v + s * hv + c;
        const float* vo = ve + hv;
        a0 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve), a0);
        a1 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 16), a1);
        a2 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 32), a2);
        a3 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 48), a3);
        b0 = _mm512_fmadd_ps(po, _mm512_loadu_ps(vo), b0);
        b1 = _mm512_fmadd_ps(po, _mm512_loadu_ps(vo + 16), b1);
        b2 = _mm512_fmadd_ps(po, _mm512_loadu_ps(vo + 32), b2);
        b3 = _mm512_fmadd_ps(po, _mm512_loadu_ps(vo + 48), b3);
      }
      if (s < n_valid) {
        const __m512 pe = _mm512_set1_ps(p[s]);
        const float* ve = v + s * hv + c;
        a0 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve), a0);
        a1 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 16), a1);
        a2 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 32), a2);
        a3 = _mm512_fmadd_ps(pe, _mm512_loadu_ps(ve + 48), a3);
      }
      _mm512_storeu_ps(acc + c, _mm512_add_ps(a0, b0));
      _mm512_storeu_ps(acc + c + 16, _mm512_add_ps(a1, b1));
      _mm512_storeu_ps(acc + c + 32, _mm512_add_ps(a2, b2));
      _mm512_storeu_ps(acc + c + 48, _mm512_add_ps(a3, b3));
    }
    for (; c < hv; c += 16) {
      __m512 a = _mm512_mul_ps(_mm512_loadu_ps(acc + c), cv);
      __m512 b = _mm512_setzero_ps();
      int s = 0;
      for (; s + 2 <= n_valid; s += 2) {
        a = _mm512_fmadd_ps(_mm512_set1_ps(p[s]), _mm512_loadu_ps(v + s * hv + c), a);
        b = _mm512_fmadd_ps(_mm512_set1_ps(p[s + 1]), _mm512_loadu_ps(v + (s + 1) * hv + c), b);
      }
      if (s < n_valid) {
        a = _mm512_fmadd_ps(_mm512_set1_ps(p[s]), _mm512_loadu_ps(v + s * hv + c), a);
      }
      _mm512_storeu_ps(acc + c, _mm512_add_ps(a, b));
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
