// F16C half -> float rows (compiled with -mavx2 -mfma -mf16c; called only after dispatch).
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

}  // namespace lifeline
