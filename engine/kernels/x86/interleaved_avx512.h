// Shared by the AVX-512 kernel files for row-interleaved weights (interleaved_*_avx512.cpp;
// every includer is built with the AVX-512 flags, see avx512_util.h). A layout struct L
// provides
//   kBlockElems                       values per block (32, or 256 for the K-quants)
//   template <int NT> Run(w, row_bytes, n_groups, a, nb, y, ldy)
//                                     n_groups 16-row groups x NT tokens (ActRow a[NT])
//   Pack(w, row_bytes, cols, packed)  the packed GEMM tile of one group
// and these turn it into the table entries.
#pragma once

#include <cstdint>

#include "engine/kernels/interleave.h"
#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"

namespace lifeline::kernels::avx512 {

// Tokens per tile: each layout's Run<NT> keeps NT tokens' accumulators in registers.
inline constexpr int kMaxTileTokens = 4;

// The decode tile of `type`, and the GEMM's packing from the interleaved layout where the
// type has a packed GEMM (so fill the GEMM entries first).
template <typename L>
void RegisterInterleaved(MatmulImpl* impl, GgmlType type) {
  TileKernel& k = impl->tiles_interleaved[static_cast<int>(type)];
  k.fn = &InterleavedGroupsTile<L, kMaxTileTokens>;
  k.max_rows = kInterleaveRows;
  k.max_tokens = kMaxTileTokens;
  k.any_rows = true;
  GemmKernel& g = impl->gemm[static_cast<int>(type)];
  if (g.pack != nullptr) g.pack_interleaved = &L::Pack;
}

}  // namespace lifeline::kernels::avx512
