// Shared by the AVX2 kernel files for row-interleaved weights (interleaved_*_avx2.cpp; every
// includer is built with the AVX2 flags, see avx2_util.h). AVX2 takes each 64-byte quad of a
// 16-row unit as two 256-bit halves (rows 0..7, 8..15). A layout struct L provides
//   kBlockElems                       values per block (32, or 256 for the K-quants)
//   template <int NT> Run(w, row_bytes, n_groups, a, nb, y, ldy)
//                                     n_groups 16-row groups x NT tokens (ActRow a[NT])
// and these turn it into the table entry. Two tokens at most: the accumulators of more would
// not fit the 16 ymm registers beside the level vectors.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/kernels/interleave.h"
#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/x86/avx2_util.h"

namespace lifeline::kernels::avx2 {

// Tokens per tile: the two-token limit above.
inline constexpr int kMaxTileTokens = 2;

// 4 activation bytes (one quad's worth) in every int32 lane.
static inline __m256i Bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 8 f16 values (8 rows' scales) as f32.
static inline __m256 LoadF16x8(const uint8_t* p) { return _mm256_cvtph_ps(LoadU128(p)); }

// vpshufb control: `base` (the selector bytes of int32 lane 0) advanced to the same bytes of
// every int32 lane; `step` is 4 in each byte position the base selects from (vpshufb indexes
// within a 128-bit half, so lanes 4..7 repeat lanes 0..3).
static inline __m256i PerLaneShuffle(uint32_t base, uint32_t step) {
  const int s = static_cast<int>(step);
  return _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)),
                          _mm256_setr_epi32(0, s, 2 * s, 3 * s, 0, s, 2 * s, 3 * s));
}

template <typename L>
void RegisterInterleaved(MatmulImpl* impl, GgmlType type) {
  TileKernel& k = impl->tiles_interleaved[static_cast<int>(type)];
  k.fn = &InterleavedGroupsTile<L, kMaxTileTokens>;
  k.max_rows = kInterleaveRows;
  k.max_tokens = kMaxTileTokens;
  k.any_rows = true;
}

// The 16 results of group g for NT tokens: rows 0..7 in acc[t][0], 8..15 in acc[t][1].
template <int NT>
static inline void StoreGroup(const __m256 (&acc)[NT][2], float* y, int64_t ldy, int64_t g) {
  for (int t = 0; t < NT; ++t) {
    _mm256_storeu_ps(y + t * ldy + 16 * g, acc[t][0]);
    _mm256_storeu_ps(y + t * ldy + 16 * g + 8, acc[t][1]);
  }
}

}  // namespace lifeline::kernels::avx2
