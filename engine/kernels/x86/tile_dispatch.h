// The tile dispatch every SIMD matmul file shares: a kernel type K provides
//   static constexpr int kRows, kTokens;   // rows per full tile, tokens per call (1..4)
//   template <int NR, int NT> static void Run(const uint8_t* w, uint64_t row_bytes,
//                                             const ActRow* a, int64_t cols, float* y,
//                                             int64_t ldy);
// and MakeTile<K>() turns it into the driver's TileKernel (any number of rows: full tiles,
// then the remainder row by row; nt picks one of the 1..kTokens instantiations).
//
// ISA safety: these templates contain no intrinsics, but each instantiation is compiled with
// its includer's ISA flags (the loops may be auto-vectorized with AVX-512). Every K lives in
// its ISA's namespace (avx2::, avx512::), so each instantiation's symbol names that ISA and
// the linker can never hand an AVX-512-compiled copy to AVX2 code. Instantiate only with
// kernel types from the including file's ISA namespace.
//
// Thread-safety: pure functions. Failure: none (shapes are checked by the driver).
#pragma once

#include <cstdint>

#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"

namespace lifeline::kernels::tile {

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

// The activation rows are looked up once per call, not once per tile: a decode GEMV passes a
// whole chunk of rows at once.
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

}  // namespace lifeline::kernels::tile
