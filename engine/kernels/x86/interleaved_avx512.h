// Shared by the AVX-512 kernel files for row-interleaved weights (interleaved_*_avx512.cpp;
// every includer is built with the AVX-512 flags, see avx512_util.h). A layout struct L
// provides
//   kBlockElems                       values per block (32, or 256 for the K-quants)
//   template <int NT> Run(w, row_bytes, n_groups, a, nb, y, ldy)
//                                     n_groups 16-row groups x NT tokens (ActRow a[NT])
//   Pack(w, row_bytes, cols, packed)  the packed GEMM tile of one group (types with a GEMM)
// and these turn it into the table entries.
#pragma once

#include <cstdint>

#include "engine/kernels/interleave.h"
#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {

// Tokens per tile: each layout's Run<NT> keeps NT tokens' accumulators in registers. Up to 8
// (a decode step verifying up to 7 drafted tokens reads each weight once; 4 used to make a
// pass of 6 rows cost ~2x one row); the K-quant layouts, whose unpacking per quad costs more,
// register with fewer (kKQuantTileTokens).
inline constexpr int kMaxTileTokens = 8;
inline constexpr int kKQuantTileTokens = 6;

// vpshufb control: byte b of every int32 lane, zero-extended.
static inline __m512i ByteOfLane(int b) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x80808000u | b)),
                          _mm512_set4_epi32(12, 8, 4, 0));
}

// vpshufb control: byte b of every int32 lane into the lane's top byte (then vpsrad 24
// sign-extends it).
static inline __m512i ByteToTop(int b) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x00808080u | (b << 24))),
                          _mm512_set4_epi32(12 << 24, 8 << 24, 4 << 24, 0));
}

// vpshufb control: (byte b, byte b) of every int32 lane as two zero-extended int16.
static inline __m512i BytePair(int b) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x80008000u | (b << 16) | b)),
                          _mm512_set4_epi32(0x000c000c, 0x00080008, 0x00040004, 0));
}

// vpshufb control: bytes (b, b + 1) of every int32 lane into the high bytes of its two int16
// (then vpsraw 8 sign-extends them).
static inline __m512i BytesToHigh16(int b) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(0x00800080u | ((b + 1) << 24) | (b << 8))),
                          _mm512_set4_epi32(0x0c000c00, 0x08000800, 0x04000400, 0));
}

static inline __m512i LoadQuad(const uint8_t* p) { return _mm512_loadu_si512(p); }

// A quad loaded into a register once: left alone, the compiler folds the load into each of
// its two users (two 512-bit loads per quad; measured ~10% slower at one token).
static inline __m512i LoadOnce(const uint8_t* p) {
  __m512i v = _mm512_loadu_si512(p);
  __asm__("" : "+v"(v));
  return v;
}

static inline __m512 LoadF16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Software prefetch of lines [first, first + count) of the unit two units ahead (4.5 KiB for
// Q4_K, 6.6 KiB for Q6_K), issued as one burst per half unit. Without it a single thread
// streamed these units from DRAM at half the rate (~15 vs ~30 GB/s); a prefetch per quad
// load instead (same lines, spread out) measured ~30% slower for Q6_K from DRAM, one burst
// per unit ~25% slower with the matrix in L1.
template <int64_t kUnit>
static inline void PrefetchLines(const uint8_t* unit, int first, int count) {
  const uint8_t* ahead = unit + 2 * kUnit;
  for (int l = first; l < first + count; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
  }
}

// The decode tile of `type`, and the GEMM's packing from the interleaved layout where the
// type has a packed GEMM (so fill the GEMM entries first).
template <typename L, int kTokens = kMaxTileTokens>
void RegisterInterleaved(MatmulImpl* impl, GgmlType type) {
  TileKernel& k = impl->tiles_interleaved[static_cast<int>(type)];
  k.fn = &InterleavedGroupsTile<L, kTokens>;
  k.max_rows = kInterleaveRows;
  k.max_tokens = kTokens;
  k.any_rows = true;
  if constexpr (requires { &L::Pack; }) {
    GemmKernel& g = impl->gemm[static_cast<int>(type)];
    if (g.pack != nullptr) g.pack_interleaved = &L::Pack;
  }
}

}  // namespace lifeline::kernels::avx512
