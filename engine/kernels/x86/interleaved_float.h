// Shared by the F16 / BF16 row-interleaved tiles (interleaved_float_avx2.cpp,
// interleaved_float_avx512.cpp): the unit size of their layout and their software prefetch.
// Internal linkage only (static inline), so each ISA file keeps its own copy.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace lifeline::kernels {

// One block of a 16-row group: 16 quads of 64 bytes (interleave.h).
inline constexpr int64_t kFloatUnit = 16 * 64;

// Half a unit (8 lines) of the unit about 6 KiB ahead, as one burst (the quantized tiles'
// measured distance and burst shape, interleaved_legacy_avx512.cpp).
static inline void PrefetchFloatHalfUnit(const uint8_t* p) {
  const uint8_t* ahead = p + 6 * kFloatUnit;
  for (int l = 0; l < 8; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
  }
}

}  // namespace lifeline::kernels
