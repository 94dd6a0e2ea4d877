// AVX-512 gated units (glu.h): the scalar twin's operations, 16 lanes at a time, in the same
// order and with no fused multiply-add (ll_kernels builds with -ffp-contract=off), so every
// lane gives ref::SiluGlu's bits. The tail (n % 16) runs the scalar twin.
#include <immintrin.h>

#include <limits>

#include "engine/kernels/glu.h"
#include "engine/kernels/x86/avx512_kernels.h"

// GCC 12 flags the deliberately undefined lanes inside its own AVX-512 intrinsics
// (`__m512 __Y = __Y;`) as maybe-uninitialized, as in avx512_util.h: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lifeline::kernels::avx512 {
namespace {

template <bool kGelu>
void GatedUnit(float* gate, const float* up, int64_t n) {
  const __m512 lo = _mm512_set1_ps(kGluExpLo), hi = _mm512_set1_ps(kGluExpHi);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    __m512 z = g;
    if constexpr (kGelu) {
      const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
      z = _mm512_mul_ps(_mm512_set1_ps(kGeluK),
                        _mm512_add_ps(g, _mm512_mul_ps(_mm512_set1_ps(kGeluC), g3)));
    }
    const __m512 x_in = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(z), sign));
    // max / min return their second operand when either is NaN, as SSE's do.
    const __m512 x = _mm512_min_ps(hi, _mm512_max_ps(lo, x_in));
    const __m512 nf = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(kGluLog2e)),
                                                  _mm512_set1_ps(kGluRoundMagic)),
                                    _mm512_set1_ps(kGluRoundMagic));
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(nf, _mm512_set1_ps(kGluLn2Hi))),
                                   _mm512_mul_ps(nf, _mm512_set1_ps(kGluLn2Lo)));
    __m512 p = _mm512_set1_ps(kGluExpPoly[0]);
    for (int k = 1; k < 6; ++k) {
      p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kGluExpPoly[k]));
    }
    const __m512 er = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), one);
    const __m512i bits = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvttps_epi32(nf), _mm512_set1_epi32(127)), 23);
    const __m512 e_fin = _mm512_mul_ps(er, _mm512_castsi512_ps(bits));
    const __mmask16 over = _mm512_cmp_ps_mask(x_in, hi, _CMP_GT_OQ);
    const __m512 e = _mm512_mask_blend_ps(over, e_fin, inf);
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
                                             _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    if constexpr (kGelu) {
      ref::GeluTanhGlu(gate + i, up + i, n - i);
    } else {
      ref::SiluGlu(gate + i, up + i, n - i);
    }
  }
}

}  // namespace

void FillGlu(MatmulImpl* impl) {
  impl->silu_glu = &GatedUnit<false>;
  impl->gelu_glu = &GatedUnit<true>;
}

}  // namespace lifeline::kernels::avx512
