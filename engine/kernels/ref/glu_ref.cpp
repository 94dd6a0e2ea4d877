// Scalar twins of the gated units (glu.h).
#include <cstdint>
#include <limits>

#include "engine/kernels/glu.h"

#if defined(__SSE2__)
#include <emmintrin.h>

#include "engine/kernels/glu_simd.h"
#endif

namespace lifeline::ref {
namespace {

using namespace lifeline::kernels;  // the constants and ExpForGlu of glu.h

#if defined(__SSE2__)
// The scalar loop four lanes at a time (GCC keeps ExpForGlu's selects as branches, which
// stops it from vectorizing the loop itself). SSE2 is the x86-64 baseline.
struct Sse2 {
  using V = __m128;
  static constexpr int64_t kLanes = 4;
  static V Load(const float* p) { return _mm_loadu_ps(p); }
  static void Store(float* p, V v) { _mm_storeu_ps(p, v); }
  static V Set(float x) { return _mm_set1_ps(x); }
  static V Add(V a, V b) { return _mm_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm_div_ps(a, b); }
  static V Min(V a, V b) { return _mm_min_ps(a, b); }
  static V Max(V a, V b) { return _mm_max_ps(a, b); }
  static V Neg(V v) { return _mm_xor_ps(v, _mm_set1_ps(-0.0f)); }
  static V Pow2(V nf) {
    return _mm_castsi128_ps(
        _mm_slli_epi32(_mm_add_epi32(_mm_cvttps_epi32(nf), _mm_set1_epi32(127)), 23));
  }
  static V InfAbove(V x, V hi, V e) {
    const V over = _mm_cmpgt_ps(x, hi);
    return _mm_or_ps(_mm_and_ps(over, _mm_set1_ps(std::numeric_limits<float>::infinity())),
                     _mm_andnot_ps(over, e));
  }
};
#endif

// gate[i] = gate[i] * sigmoid(z(gate[i])) * up[i], z(g) = g (SiLU) or 2 sqrt(2/pi) (g +
// 0.044715 g^3) (tanh-GELU).
template <bool kGelu>
void GatedUnit(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  i = GatedUnitSimd<Sse2, kGelu>(gate, up, n);
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
