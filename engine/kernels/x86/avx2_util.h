// Shared helpers of the AVX2 kernel files (x86/*_avx2.cpp only: every includer is built with
// -mavx2 -mfma -mf16c). As in avx512_util.h, everything is `static inline` or a template in
// namespace avx2, so no AVX2-compiled copy can leak into code for other CPUs.
//
// Thread-safety: pure functions. Failure: none (shapes are checked by the driver).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/x86/tile_dispatch.h"

namespace lifeline::kernels::avx2 {

static inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

static inline __m256i LoadU256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

static inline __m128i LoadU128(const void* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15) then high nibbles (16..31).
static inline __m256i Nibbles32(const uint8_t* p) {
  const __m128i x = LoadU128(p);
  const __m256i lo_hi = _mm256_inserti128_si256(_mm256_castsi128_si256(x), _mm_srli_epi16(x, 4), 1);
  return _mm256_and_si256(lo_hi, _mm256_set1_epi8(0x0f));
}

// Bit j of `bits` -> 0xff in byte j (0x00 otherwise).
static inline __m256i BitsToBytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201ll);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

static inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int32_t HsumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Software prefetch distance for weight streaming (see avx512_util.h PrefetchAhead): whole
// row tiles, about 24 KiB ahead.
static inline uint64_t PrefetchAhead(uint64_t tile_bytes) {
  const uint64_t tiles = (24576 + tile_bytes / 2) / tile_bytes;
  return (tiles < 1 ? 1 : tiles) * tile_bytes;
}

// Prefetches the lines of [p, p + n) (n small: one block's worth).
static inline void PrefetchSpan(const uint8_t* p, int64_t n) {
  for (int64_t off = 0; off < n; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

// Pairs of int16 summed into int32 lanes.
static inline __m256i SumPairs16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

// The tile dispatch (tile_dispatch.h), under this ISA's namespace: MakeTile<K>() with K
// from this namespace.
using tile::MakeTile;

}  // namespace lifeline::kernels::avx2
