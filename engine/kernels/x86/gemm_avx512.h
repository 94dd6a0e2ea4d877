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

// acc + vpdpbusd(w, the 4 bytes at p broadcast to all lanes), with the broadcast folded into
// the instruction's memory operand ({1to16}); compilers emit a separate vpbroadcastd for
// _mm512_set1_epi32(load), one more instruction per multiply.
static inline __m512i DpbusdBcast(__m512i acc, __m512i w, const uint8_t* p) {
#if defined(LIFELINE_GEMM_NO_ASM)
  return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(static_cast<int>(Load32u(p))));
#else
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const uint32_t*>(p)));
  return acc;
#endif
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

static inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

static inline void StoreF32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

// Stores the first nt of T accumulators (nr rows each); constant indices keep acc in
// registers in the caller.
template <int T>
static inline void StoreGroup(const __m512* acc, int nr, int nt, float* y, int64_t ldy) {
  const __mmask16 m = RowMask(nr);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    if (t < nt) _mm512_mask_storeu_ps(y + t * ldy, m, acc[t]);
  }
}

// Packed weight kernel K plus its token-interleaved activation layout (groups of K::T tokens)
// and group kernels (RunGroup, and RunGroup2 for two tiles where K has it).
template <typename K>
GemmKernel MakeGroupedGemm(int64_t min_tokens) {
  GemmKernel g;
  g.packed_bytes = &K::PackedBytes;
  g.pack = &K::Pack;
  g.min_tokens = min_tokens;
  g.group_tokens = K::T;
  g.act_group_bytes = &K::ActGroupBytes;
  g.pack_acts = &K::PackActs;
  g.run_group = &K::RunGroup;
  if constexpr (requires { &K::RunGroup2; }) g.run_group2 = &K::RunGroup2;
  return g;
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
