// AVX2 gated units (glu.h): the scalar twin's operations, 8 lanes at a time, in the same
// order and with no fused multiply-add (ll_kernels builds with -ffp-contract=off), so every
// lane gives ref::SiluGlu's bits. The tail (n % 8) runs the scalar twin.
#include <immintrin.h>

#include <limits>

#include "engine/kernels/glu.h"
#include "engine/kernels/x86/avx2_kernels.h"

namespace lifeline::kernels::avx2 {
namespace {

template <bool kGelu>
void GatedUnit(float* gate, const float* up, int64_t n) {
  const __m256 lo = _mm256_set1_ps(kGluExpLo), hi = _mm256_set1_ps(kGluExpHi);
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    __m256 z = g;
    if constexpr (kGelu) {
      const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
      z = _mm256_mul_ps(_mm256_set1_ps(kGeluK),
                        _mm256_add_ps(g, _mm256_mul_ps(_mm256_set1_ps(kGeluC), g3)));
    }
    const __m256 x_in = _mm256_xor_ps(z, sign);  // -z
    // max / min return their second operand when either is NaN, as SSE's do.
    const __m256 x = _mm256_min_ps(hi, _mm256_max_ps(lo, x_in));
    const __m256 nf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(kGluLog2e)),
                                                  _mm256_set1_ps(kGluRoundMagic)),
                                    _mm256_set1_ps(kGluRoundMagic));
    const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(nf, _mm256_set1_ps(kGluLn2Hi))),
                                   _mm256_mul_ps(nf, _mm256_set1_ps(kGluLn2Lo)));
    __m256 p = _mm256_set1_ps(kGluExpPoly[0]);
    for (int k = 1; k < 6; ++k) {
      p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kGluExpPoly[k]));
    }
    const __m256 er = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), one);
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvttps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 e_fin = _mm256_mul_ps(er, _mm256_castsi256_ps(bits));
    const __m256 over = _mm256_cmp_ps(x_in, hi, _CMP_GT_OQ);
    const __m256 e = _mm256_blendv_ps(e_fin, inf, over);
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)),
                                             _mm256_loadu_ps(up + i)));
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

}  // namespace lifeline::kernels::avx2
