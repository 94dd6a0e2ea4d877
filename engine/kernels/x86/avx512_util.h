// Shared helpers of the AVX-512 kernel files (x86/*_avx512.cpp only: every includer is built
// with the AVX-512 flags). Everything here lives in namespace avx512 and is either
// `static inline` or a template used only by those files, so the linker can never hand an
// AVX-512 copy of a helper to code that runs on a CPU without it.
//
// Thread-safety: pure functions. Failure: none (shapes are checked by the driver).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/x86/tile_dispatch.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own intrinsics
// (_mm512_undefined_*: `__m512i __Y = __Y;`) as maybe-uninitialized; a false positive that
// would bury real warnings of the kernel files.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lifeline::kernels::avx512 {

static inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 32 bytes broadcast to both 256-bit halves.
static inline __m512i Broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Software prefetch distance for weight streaming: a whole number of row tiles (so the
// lines prefetched for row r of this tile are exactly row r of a later tile at the same
// column) totalling about kPrefetchTargetBytes. Without it the hardware prefetcher, facing
// several interleaved row streams, left Q4 GEMV from DRAM at a third of the bandwidth; much
// further ahead and the lines fall out of L1 before use.
#ifndef LL_PREFETCH_TARGET
#define LL_PREFETCH_TARGET 24576
#endif
static inline uint64_t PrefetchAhead(uint64_t tile_bytes) {
  const uint64_t tiles = (LL_PREFETCH_TARGET + tile_bytes / 2) / tile_bytes;
  return (tiles < 1 ? 1 : tiles) * tile_bytes;
}

// The tile dispatch (tile_dispatch.h), under this ISA's namespace: MakeTile<K>() with K
// from this namespace.
using tile::MakeTile;

}  // namespace lifeline::kernels::avx512
