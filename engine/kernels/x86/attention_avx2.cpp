// AVX2 + FMA + F16C attention kernel (compiled with -mavx2 -mfma -mf16c; called only after
// dispatch). A KV block of 16 positions is two ymm of scores.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/x86/attention_simd.h"

namespace lifeline::kernels {
namespace {

inline __m256 Exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 y = _mm256_set1_ps(kC7);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kC6));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kC5));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kC4));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kC3));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kC2));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
  // 2^n through the exponent field; n is in [-126, 127] after the clamp.
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) (no cancellation for large |x|; for
// small |x| the absolute error stays at the exp's ~2e-7).
inline __m256 Tanh256(__m256 x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 e = Exp256(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), e),
                                 _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_or_ps(t, _mm256_and_ps(x, sign_bit));
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

inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float Hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Avx2 {
  static constexpr int64_t kLanes = 8;
  static constexpr bool kTransposedK = false;
  // Positions per step: one KV block of up to 16 (two ymm of scores).
  static constexpr int64_t kStepSlots = 16;

  // n values of one head's row -> dst[0, n_pad), zero past n.
  static void LoadRow(AttnKvType type, const uint8_t* src, float* dst, int64_t n,
                      int64_t n_pad) {
    int64_t c = 0;
    switch (type) {
      case AttnKvType::kF32:
        for (; c + 8 <= n; c += 8) _mm256_storeu_ps(dst + c, _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * c)));
        std::memcpy(dst + c, src + 4 * c, static_cast<size_t>(n - c) * sizeof(float));
        break;
      case AttnKvType::kF16:
        for (; c + 8 <= n; c += 8) {
          const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * c));
          _mm256_storeu_ps(dst + c, _mm256_cvtph_ps(h));
        }
        for (int64_t i = c; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, src + 2 * i, 2);
          dst[i] = _cvtsh_ss(h);
        }
        break;
      default:  // kQ8_0: chunk c lies in block c / 32 at offset c % 32
        for (; c + 8 <= n; c += 8) {
          const uint8_t* blk = src + (c / kAttnQ8BlockElems) * kAttnQ8BlockBytes;
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          const __m128i q8 =
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + c % kAttnQ8BlockElems));
          _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)),
                                                  _mm256_set1_ps(_cvtsh_ss(dh))));
        }
        for (int64_t i = c; i < n; ++i) {
          const uint8_t* blk = src + (i / kAttnQ8BlockElems) * kAttnQ8BlockBytes;
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          dst[i] = _cvtsh_ss(dh) *
                   static_cast<float>(static_cast<int8_t>(blk[2 + i % kAttnQ8BlockElems]));
        }
        break;
    }
    for (int64_t i = n; i < n_pad; ++i) dst[i] = 0.0f;
  }

  // p[s] = q . K[s] for the 16 rows of the block, 8 rows at a time (16 ymm registers).
  static void Scores(const float* q, const float* k, int64_t hk, float* p) {
    for (int half = 0; half < 2; ++half) {
      const float* kh = k + half * 8 * hk;
      __m256 acc[8];
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) acc[s] = _mm256_setzero_ps();
      for (int64_t c = 0; c < hk; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          acc[s] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kh + s * hk + c), acc[s]);
        }
      }
      _mm256_storeu_ps(p + half * 8, Reduce8(acc));
    }
  }

  // p: raw dots in, probabilities out (0 outside [lo, n_valid)). Returns the factor the
  // row's accumulator must be scaled by (exp(old max - new max)).
  static float Softmax(float* p, int lo, int n_valid, float scale, float softcap,
                       float* run_max, float* run_den) {
    const __m256 nv = _mm256_set1_ps(static_cast<float>(n_valid));
    const __m256 lv = _mm256_set1_ps(static_cast<float>(lo));
    const __m256 idx0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 idx1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    const __m256 valid0 = _mm256_and_ps(_mm256_cmp_ps(idx0, nv, _CMP_LT_OQ),
                                        _mm256_cmp_ps(idx0, lv, _CMP_GE_OQ));
    const __m256 valid1 = _mm256_and_ps(_mm256_cmp_ps(idx1, nv, _CMP_LT_OQ),
                                        _mm256_cmp_ps(idx1, lv, _CMP_GE_OQ));
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(p), _mm256_set1_ps(scale));
    __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(p + 8), _mm256_set1_ps(scale));
    if (softcap > 0.0f) {
      const __m256 cap = _mm256_set1_ps(softcap);
      s0 = _mm256_mul_ps(Tanh256(_mm256_div_ps(s0, cap)), cap);
      s1 = _mm256_mul_ps(Tanh256(_mm256_div_ps(s1, cap)), cap);
    }
    const float block_max = Hmax(_mm256_max_ps(_mm256_blendv_ps(ninf, s0, valid0),
                                               _mm256_blendv_ps(ninf, s1, valid1)));
    const float old_max = *run_max;
    const float new_max = block_max > old_max ? block_max : old_max;
    // exp(-inf) == 0 clears the empty state on the first block.
    const float corr = new_max == old_max ? 1.0f : __builtin_expf(old_max - new_max);
    const __m256 m = _mm256_set1_ps(new_max);
    const __m256 e0 = _mm256_and_ps(Exp256(_mm256_sub_ps(s0, m)), valid0);
    const __m256 e1 = _mm256_and_ps(Exp256(_mm256_sub_ps(s1, m)), valid1);
    _mm256_storeu_ps(p, e0);
    _mm256_storeu_ps(p + 8, e1);
    *run_den = *run_den * corr + Hsum(_mm256_add_ps(e0, e1));
    *run_max = new_max;
    return corr;
  }

  // acc = acc * corr + sum_{s < n_valid} p[s] * V[s], four vectors of the row at a time with
  // two chains each (even / odd positions).
  // Each row on its own (attention_avx512.cpp shares the V loads across rows; 16 AVX2
  // registers hold one row's accumulators).
  static void AccumulateVRows(float* const* acc, const float* p, const float* v,
                              const int* n_valid, int n, int64_t hv, const float* corr) {
    for (int r = 0; r < n; ++r) AccumulateV(acc[r], p + kStepSlots * r, v, n_valid[r], hv, corr[r]);
  }

  static void AccumulateV(float* acc, const float* p, const float* v, int n_valid, int64_t hv,
                          float corr) {
    const __m256 cv = _mm256_set1_ps(corr);
    int64_t c = 0;
    for (; c + 32 <= hv; c += 32) {
      __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + c), cv);
      __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + c + 8), cv);
      __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + c + 16), cv);
      __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + c + 24), cv);
      __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
      int s = 0;
      for (; s + 2 <= n_valid; s += 2) {
        const __m256 pe = _mm256_broadcast_ss(p + s);
        const __m256 po = _mm256_broadcast_ss(p + s + 1);
        const float* ve = v + s * hv + c;
        const float* vo = ve + hv;
        a0 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve), a0);
        a1 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 8), a1);
        a2 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 16), a2);
        a3 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 24), a3);
        b0 = _mm256_fmadd_ps(po, _mm256_loadu_ps(vo), b0);
        b1 = _mm256_fmadd_ps(po, _mm256_loadu_ps(vo + 8), b1);
        b2 = _mm256_fmadd_ps(po, _mm256_loadu_ps(vo + 16), b2);
        b3 = _mm256_fmadd_ps(po, _mm256_loadu_ps(vo + 24), b3);
      }
      if (s < n_valid) {
        const __m256 pe = _mm256_broadcast_ss(p + s);
        const float* ve = v + s * hv + c;
        a0 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve), a0);
        a1 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 8), a1);
        a2 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 16), a2);
        a3 = _mm256_fmadd_ps(pe, _mm256_loadu_ps(ve + 24), a3);
      }
      _mm256_storeu_ps(acc + c, _mm256_add_ps(a0, b0));
      _mm256_storeu_ps(acc + c + 8, _mm256_add_ps(a1, b1));
      _mm256_storeu_ps(acc + c + 16, _mm256_add_ps(a2, b2));
      _mm256_storeu_ps(acc + c + 24, _mm256_add_ps(a3, b3));
    }
    for (; c < hv; c += 8) {
      __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + c), cv);
      __m256 b = _mm256_setzero_ps();
      int s = 0;
      for (; s + 2 <= n_valid; s += 2) {
        a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + s), _mm256_loadu_ps(v + s * hv + c), a);
        b = _mm256_fmadd_ps(_mm256_broadcast_ss(p + s + 1),
                            _mm256_loadu_ps(v + (s + 1) * hv + c), b);
      }
      if (s < n_valid) {
        a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + s), _mm256_loadu_ps(v + s * hv + c), a);
      }
      _mm256_storeu_ps(acc + c, _mm256_add_ps(a, b));
    }
  }

  static void ExpStore(const float* x, float* y) {
    _mm256_storeu_ps(y, Exp256(_mm256_loadu_ps(x)));
  }
};

}  // namespace

void AttendAvx2(const AttnKvView& kv, const AttnShape& s, const AttnTile& tile,
                AttnScratch& scratch) {
  AttendSimd<Avx2>(kv, s, tile, scratch);
}

void ExpRowAvx2(const float* x, float* y, int64_t n) { ExpRowSimd<Avx2>(x, y, n); }

}  // namespace lifeline::kernels
