// F16C half <-> float rows (compiled with -mavx2 -mfma -mf16c; called only after dispatch).
#include <immintrin.h>

#include <cstdint>

#include "engine/kernels/fp16.h"

namespace lifeline {

void Fp16ToFp32RowF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void Fp32ToFp16RowF16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i sign_mask = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // NaN lanes: the scalar twin's canonical quiet NaN with the input's sign (F16C keeps
    // payload bits instead).
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    if (!_mm256_testz_ps(nan, nan)) {
      const __m256i sign = _mm256_and_si256(_mm256_castps_si256(x), sign_mask);
      const __m256i canon = _mm256_or_si256(_mm256_srli_epi32(sign, 16), _mm256_set1_epi32(0x7e00));
      const __m128i canon16 = _mm_packus_epi32(_mm256_castsi256_si128(canon), _mm256_extracti128_si256(canon, 1));
      const __m256i m = _mm256_castps_si256(nan);
      const __m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
      h = _mm_blendv_epi8(h, canon16, m16);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

}  // namespace lifeline
