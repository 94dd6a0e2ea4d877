// Shared by the F16 / BF16 row-interleaved tiles (interleaved_float_avx2.cpp,
// interleaved_float_avx512.cpp): the unit size of their layout and their software prefetch.
// Internal linkage only (static inline), so each ISA file keeps its own copy.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace lifeline::kernels {

// One block of a 16-row group: 16 quads of 64 bytes (interleave.h).
inline constexpr int64_t kFloatUnit = 16 * 64;

// Half a unit (8 lines) of the unit about 6 KiB ahead, as one burst. (The legacy quantized
// tiles had this once and now stream from an unrolled 8-unit loop instead,
// interleaved_legacy_avx512.cpp; these units are already 1024 bytes, 16 quads unrolled, and
// two per iteration, other distances, whole-unit bursts and T1 / T2 / NTA hints read within
// the noise.) The F16 tile once also prefetched the same lines 32 KiB further into L2
// (+8..+18 % then); since it takes its activation pairs from registers (affed10) that far
// prefetch cost instead: 1.1B F16 tg32 with / without it alternated four rounds, 23.1-24.1
// against 25.6-26.6 tok/s, verification passes 10 % (k = 1), 27 % (k = 2) and 5 % (k = 4)
// faster without it, k = 8 within the spread (slower in three rounds, equal in four). So
// neither float tile has it now.
static inline void PrefetchFloatHalfUnit(const uint8_t* p) {
  const uint8_t* ahead = p + 6 * kFloatUnit;
  for (int l = 0; l < 8; ++l) _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
}

}  // namespace lifeline::kernels
