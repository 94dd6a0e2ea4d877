// Helpers of the AVX-512 packed-weight GEMM files (x86/gemm_*_avx512.cpp only). The packed
// layout puts kGemmRows = 16 weight rows in the 16 int32 lanes of a register: for every group
// of 4 consecutive values ("quad") of a row, the 16 rows' 4 level bytes are 64 contiguous
// bytes. A token's 4 activation bytes of the same quad are broadcast to all lanes (the
// {1to16} memory operand of vpdpbusd), so one instruction adds 4 products to 16 rows.
//
// Everything is `static inline` / templates in namespace avx512 (see avx512_util.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {

static inline uint32_t Load32u(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static inline void Store32u(void* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Four activation bytes broadcast to all 16 lanes.
static inline __m512i Bcast4(const int8_t* p) {
  return _mm512_set1_epi32(static_cast<int>(Load32u(p)));
}

// Masks for storing the first nr lanes.
static inline __mmask16 RowMask(int nr) { return static_cast<__mmask16>((1u << nr) - 1); }

// Runs K::template Block<NT> over [t0, t1) in token groups of 16, 8, 4, 2, 1.
template <typename K>
void RunTokens(const uint8_t* packed, int nr, const QuantizedActs& acts, int64_t t0, int64_t t1,
               float* y, int64_t ldy) {
  ActRow a[16];
  int64_t t = t0;
  auto run = [&](auto nt_tag) {
    constexpr int NT = decltype(nt_tag)::value;
    for (int i = 0; i < NT; ++i) a[i] = acts.Row(t + i);
    K::template Block<NT>(packed, nr, acts.cols(), a, y + t * ldy, ldy);
    t += NT;
  };
  while (t1 - t >= 16) run(std::integral_constant<int, 16>());
  if (t1 - t >= 8) run(std::integral_constant<int, 8>());
  if (t1 - t >= 4) run(std::integral_constant<int, 4>());
  if (t1 - t >= 2) run(std::integral_constant<int, 2>());
  if (t1 - t >= 1) run(std::integral_constant<int, 1>());
}

template <typename K>
GemmKernel MakeGemm(int64_t min_tokens) {
  GemmKernel g;
  g.packed_bytes = &K::PackedBytes;
  g.pack = &K::Pack;
  g.run = &RunTokens<K>;
  g.min_tokens = min_tokens;
  return g;
}

}  // namespace lifeline::kernels::avx512
