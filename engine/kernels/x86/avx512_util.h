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

// Calls K::template Run<NR, NT> for the tile: full-height tiles use K::kRows rows, a shorter
// remainder runs row by row; nt selects one of the 1..K::kTokens instantiations.
template <typename K, int NR>
inline void RunRows(const uint8_t* w, uint64_t rb, const ActRow* a, int nt, int64_t cols,
                    float* y, int64_t ldy) {
  static_assert(K::kTokens >= 1 && K::kTokens <= 4);
  switch (nt) {
    case 1: K::template Run<NR, 1>(w, rb, a, cols, y, ldy); break;
    case 2: if constexpr (K::kTokens >= 2) K::template Run<NR, 2>(w, rb, a, cols, y, ldy); break;
    case 3: if constexpr (K::kTokens >= 3) K::template Run<NR, 3>(w, rb, a, cols, y, ldy); break;
    case 4: if constexpr (K::kTokens >= 4) K::template Run<NR, 4>(w, rb, a, cols, y, ldy); break;
    default: break;
  }
}

// Any number of rows (TileKernel::any_rows): full K::kRows tiles, then the remainder row by
// row. The activation rows are looked up once per call, not once per tile: a decode GEMV
// passes a whole chunk of rows at once.
template <typename K>
void Tile(const uint8_t* w, uint64_t rb, int nr, const QuantizedActs& acts, int64_t t0, int nt,
          float* y, int64_t ldy) {
  ActRow a[4];
  for (int t = 0; t < nt; ++t) a[t] = acts.Row(t0 + t);
  const int64_t cols = acts.cols();
  int r = 0;
  for (; r + K::kRows <= nr; r += K::kRows) {
    RunRows<K, K::kRows>(w + r * rb, rb, a, nt, cols, y + r, ldy);
  }
  for (; r < nr; ++r) RunRows<K, 1>(w + r * rb, rb, a, nt, cols, y + r, ldy);
}

template <typename K>
TileKernel MakeTile() {
  TileKernel k;
  k.fn = &Tile<K>;
  k.max_rows = K::kRows;
  k.max_tokens = K::kTokens;
  k.any_rows = true;
  return k;
}

}  // namespace lifeline::kernels::avx512
