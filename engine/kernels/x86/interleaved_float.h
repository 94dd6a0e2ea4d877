// Shared by the F16 / BF16 row-interleaved tiles (interleaved_float_avx2.cpp,
// interleaved_float_avx512.cpp): the unit size of their layout and their software prefetch.
// Internal linkage only (static inline), so each ISA file keeps its own copy.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace lifeline::kernels {

// One block of a 16-row group: 16 quads of 64 bytes (interleave.h).
inline constexpr int64_t kFloatUnit = 16 * 64;

// Half a unit (8 lines) of the unit about 6 KiB ahead, as one burst; with kFar also the same
// lines 32 KiB further into L2. (The legacy quantized tiles had both once and now stream
// from an unrolled 8-unit loop instead, interleaved_legacy_avx512.cpp; these units are
// already 1024 bytes, 16 quads unrolled, and two per iteration, other distances, whole-unit
// bursts and T1 / T2 / NTA hints read within the noise.) AVX-512, 1.1B tg64, old and
// new binaries alternated three rounds: F16 (a conversion per quad) +8..+18 % with it, BF16
// (one vdpbf16ps per quad, already streaming faster) -8..-14 %, so only F16 takes it.
template <bool kFar = false>
static inline void PrefetchFloatHalfUnit(const uint8_t* p) {
  const uint8_t* ahead = p + 6 * kFloatUnit;
  for (int l = 0; l < 8; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
    if constexpr (kFar) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 32768 + 64 * l), _MM_HINT_T1);
    }
  }
}

}  // namespace lifeline::kernels
