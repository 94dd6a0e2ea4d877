// AVX-512 gated units (glu.h): glu_simd.h's loop 16 lanes at a time; ll_kernels builds with
// -ffp-contract=off, so no multiply and add are fused and every lane gives ref::SiluGlu's bits.
#include <immintrin.h>

#include <limits>

#include "engine/kernels/glu_simd.h"
#include "engine/kernels/x86/avx512_kernels.h"

// GCC 12 flags the deliberately undefined lanes inside its own AVX-512 intrinsics
// (`__m512 __Y = __Y;`) as maybe-uninitialized, as in avx512_util.h: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lifeline::kernels::avx512 {
namespace {

struct Avx512Glu {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V Set(float x) { return _mm512_set1_ps(x); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Min(V a, V b) { return _mm512_min_ps(a, b); }  // b when either is NaN, as SSE
  static V Max(V a, V b) { return _mm512_max_ps(a, b); }
  static V Neg(V v) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v),
                                                _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
  static V Pow2(V nf) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(nf), _mm512_set1_epi32(127)), 23));
  }
  static V InfAbove(V x, V hi, V e) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), e,
                                _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  }
};

}  // namespace

void FillGlu(MatmulImpl* impl) {
  impl->silu_glu = &GatedUnitRow<Avx512Glu, false>;
  impl->gelu_glu = &GatedUnitRow<Avx512Glu, true>;
}

}  // namespace lifeline::kernels::avx512
