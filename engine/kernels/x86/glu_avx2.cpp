// AVX2 gated units (glu.h): glu_simd.h's loop 8 lanes at a time; ll_kernels builds with
// -ffp-contract=off, so no multiply and add are fused and every lane gives ref::SiluGlu's bits.
#include <immintrin.h>

#include <limits>

#include "engine/kernels/glu_simd.h"
#include "engine/kernels/x86/avx2_kernels.h"

namespace lifeline::kernels::avx2 {
namespace {

struct Avx2Glu {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Set(float x) { return _mm256_set1_ps(x); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Min(V a, V b) { return _mm256_min_ps(a, b); }  // b when either is NaN, as SSE
  static V Max(V a, V b) { return _mm256_max_ps(a, b); }
  static V Neg(V v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
  static V Pow2(V nf) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(nf), _mm256_set1_epi32(127)), 23));
  }
  static V InfAbove(V x, V hi, V e) {
    return _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                            _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  }
};

}  // namespace

void FillGlu(MatmulImpl* impl) {
  impl->silu_glu = &GatedUnitRow<Avx2Glu, false>;
  impl->gelu_glu = &GatedUnitRow<Avx2Glu, true>;
}

}  // namespace lifeline::kernels::avx2
