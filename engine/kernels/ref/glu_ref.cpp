// Scalar twins of the gated units (glu.h).
#include <cstdint>
#include <limits>

#include "engine/kernels/glu.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lifeline::ref {
namespace {

using namespace lifeline::kernels;  // the constants and ExpForGlu of glu.h

// gate[i] = gate[i] * sigmoid(z(gate[i])) * up[i], z(g) = g (SiLU) or 2 sqrt(2/pi) (g +
// 0.044715 g^3) (tanh-GELU).
template <bool kGelu>
void GatedUnit(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  // ExpForGlu four lanes at a time (GCC keeps the scalar selects as branches, which stops it
  // from vectorizing the loop itself).
  const __m128 lo = _mm_set1_ps(kGluExpLo), hi = _mm_set1_ps(kGluExpHi);
  const __m128 one = _mm_set1_ps(1.0f), sign = _mm_set1_ps(-0.0f);
  const __m128 inf = _mm_set1_ps(std::numeric_limits<float>::infinity());
  for (; i + 4 <= n; i += 4) {
    const __m128 g = _mm_loadu_ps(gate + i);
    __m128 z = g;
    if constexpr (kGelu) {
      const __m128 g3 = _mm_mul_ps(_mm_mul_ps(g, g), g);
      z = _mm_mul_ps(_mm_set1_ps(kGeluK), _mm_add_ps(g, _mm_mul_ps(_mm_set1_ps(kGeluC), g3)));
    }
    const __m128 x_in = _mm_xor_ps(z, sign);  // -z
    const __m128 x = _mm_min_ps(hi, _mm_max_ps(lo, x_in));
    const __m128 nf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(x, _mm_set1_ps(kGluLog2e)),
                                            _mm_set1_ps(kGluRoundMagic)),
                                 _mm_set1_ps(kGluRoundMagic));
    const __m128 r = _mm_sub_ps(_mm_sub_ps(x, _mm_mul_ps(nf, _mm_set1_ps(kGluLn2Hi))),
                                _mm_mul_ps(nf, _mm_set1_ps(kGluLn2Lo)));
    __m128 p = _mm_set1_ps(kGluExpPoly[0]);
    for (int k = 1; k < 6; ++k) p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(kGluExpPoly[k]));
    const __m128 er = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(p, r), r), r), one);
    const __m128i bits =
        _mm_slli_epi32(_mm_add_epi32(_mm_cvttps_epi32(nf), _mm_set1_epi32(127)), 23);
    const __m128 e_fin = _mm_mul_ps(er, _mm_castsi128_ps(bits));
    const __m128 over = _mm_cmpgt_ps(x_in, hi);
    const __m128 e = _mm_or_ps(_mm_and_ps(over, inf), _mm_andnot_ps(over, e_fin));
    _mm_storeu_ps(gate + i, _mm_mul_ps(_mm_div_ps(g, _mm_add_ps(one, e)), _mm_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) {
    const float g = gate[i];
    const float z = kGelu ? kGeluK * (g + kGeluC * (g * g * g)) : g;
    gate[i] = g / (1.0f + ExpForGlu(-z)) * up[i];
  }
}

}  // namespace

void SiluGlu(float* gate, const float* up, int64_t n) { GatedUnit<false>(gate, up, n); }
void GeluTanhGlu(float* gate, const float* up, int64_t n) { GatedUnit<true>(gate, up, n); }

}  // namespace lifeline::ref
