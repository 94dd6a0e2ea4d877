// AVX-512 kernels for F16 and BF16 weights in the row-interleaved layout (interleave.h): a
// block is 32 values of 16 rows stored as 16 quads, quad q holding values (2q, 2q + 1) of
// every row, row r in 32-bit lane r.
//
// Why: in row layout a 4-row tile streams four rows 4 KiB apart (one 4 KiB page each for the
// TinyLlama shape) from the file's mapping in 4 KiB pages, and decode read ~70 % of the
// measured bandwidth (docs/performance.md); interleaved, a group is one contiguous run of
// 16 rows in the repacked copy's huge pages, and the gate/up pair is fused like the quantized
// types'.
//
// F16 decode tile: a quad's two 256-bit halves converted by two vcvtph2ps (rows 0..7 and
// 8..15, each lane pair one row's two values), and per token two FMAs against the token's value
// pair in every 64-bit lane; the lane pairs are summed once per group. BF16 (with AVX512_BF16): one
// vdpbf16ps per quad and token adds both products of all 16 rows against the token's value
// pair (products of two bf16 values are exact in f32). At one or two tokens the sums run in
// several independent chains so consecutive quads do not wait on the FMA's latency.
//
// The BF16 tile loads a block's 32 activation values per token once (one 64-byte register)
// and hands quad q its pair with a vpermd, instead of a broadcast load per quad: one load per
// 64 weight bytes instead of two. With the loads halved the tile streams from DRAM like the
// slower-per-byte tiles do (a tile doing little work per load read no faster than a plain read
// loop; docs/performance.md). 1.1B BF16 tg32 (`bench-model -p 0 -n 32 -r 3`), old and new
// alternated: 18.2 / 19.1 -> 24.1 / 23.9 tok/s, paired share of the roofline 90 -> 110 % in
// one minute; verification passes k = 2 / 4 / 8 equal or 5-12 % faster. The F16 tile does the
// same at one or two tokens (two registers of value pairs, a vpermpd per quad): tg32 +2..+8 %
// alternated; at 8 tokens, where its two FMAs per quad and token bound it, the extra shuffle
// made the pass ~28 % slower, so from three tokens on it keeps the broadcast load.
//
// BF16 GEMM packing: the packed tile of gemm_float_avx512.cpp ([cols / 2][16 rows][2] bf16) is
// the interleaved group itself, so packing is a copy.
#include <cstring>

#include "engine/kernels/interleave.h"
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/interleaved_avx512.h"
#include "engine/kernels/x86/interleaved_float.h"

namespace lifeline::kernels::avx512 {
namespace {

// Lane pairs (2i, 2i + 1) of lo are row i, of hi row 8 + i: their sums, row r in lane r.
static inline __m512 SumLanePairs(__m512 lo, __m512 hi) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_add_ps(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
}

struct F16I {
  static constexpr int64_t kBlockElems = 32;

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    // Accumulator sets: at one token, even and odd quads in two sets (four chains in all).
    constexpr int kSets = NT == 1 ? 2 : 1;
    constexpr bool kRegisterPairs = NT <= 2;
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 lo[kSets][NT], hi[kSets][NT];
      for (int s = 0; s < kSets; ++s) {
        for (int t = 0; t < NT; ++t) lo[s][t] = hi[s][t] = _mm512_setzero_ps();
      }
      for (int64_t b = 0; b < nb; ++b, unit += kFloatUnit) {
        // The block's 32 activation values of each token in two registers (16 value pairs as
        // 64-bit elements); quad q takes pair q with a vpermpd (see the file comment).
        __m512d xa[NT][2];
        if constexpr (kRegisterPairs) {
          for (int t = 0; t < NT; ++t) {
            xa[t][0] = _mm512_loadu_pd(a[t].f + 32 * b);
            xa[t][1] = _mm512_loadu_pd(a[t].f + 32 * b + 16);
          }
        }
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
          if ((q & 7) == 0) PrefetchFloatHalfUnit(unit + 64 * q);
          // Two 256-bit halves converted straight from memory: an extract from one 512-bit
          // load costs a shuffle per quad on the port the conversions use.
          const __m512 wl = LoadF16x16(unit + 64 * q);
          const __m512 wh = LoadF16x16(unit + 64 * q + 32);
          const int s = q % kSets;
          for (int t = 0; t < NT; ++t) {
            __m512 xv;
            if constexpr (kRegisterPairs) {
              xv = _mm512_castpd_ps(_mm512_permutexvar_pd(_mm512_set1_epi64(q % 8), xa[t][q / 8]));
            } else {
              double pair;
              std::memcpy(&pair, a[t].f + 32 * b + 2 * q, sizeof(pair));
              xv = _mm512_castpd_ps(_mm512_set1_pd(pair));
            }
            lo[s][t] = _mm512_fmadd_ps(wl, xv, lo[s][t]);
            hi[s][t] = _mm512_fmadd_ps(wh, xv, hi[s][t]);
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        for (int s = 1; s < kSets; ++s) {
          lo[0][t] = _mm512_add_ps(lo[0][t], lo[s][t]);
          hi[0][t] = _mm512_add_ps(hi[0][t], hi[s][t]);
        }
        _mm512_storeu_ps(y + t * ldy + 16 * g, SumLanePairs(lo[0][t], hi[0][t]));
      }
    }
  }
};

struct Bf16DotI {
  static constexpr int64_t kBlockElems = 32;

  template <int NT>
  static void Run(const uint8_t* w, uint64_t rb, int64_t n_groups, const ActRow* a, int64_t nb,
                  float* y, int64_t ldy) {
    // Independent chains per token: four at one token, two at two.
    constexpr int kSets = NT == 1 ? 4 : NT == 2 ? 2 : 1;
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* unit = w + static_cast<uint64_t>(g) * 16 * rb;
      __m512 acc[kSets][NT];
      for (int s = 0; s < kSets; ++s) {
        for (int t = 0; t < NT; ++t) acc[s][t] = _mm512_setzero_ps();
      }
      for (int64_t b = 0; b < nb; ++b, unit += kFloatUnit) {
        // The block's 32 activation values of each token (16 pairs, 64 bytes) in one register;
        // quad q takes pair q with a vpermd (index q, a constant register).
        __m512i xa[NT];
        for (int t = 0; t < NT; ++t) xa[t] = _mm512_loadu_si512(a[t].bf + 32 * b);
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
          if ((q & 7) == 0) PrefetchFloatHalfUnit(unit + 64 * q);
          const __m512bh wv = (__m512bh)LoadOnce(unit + 64 * q);
          const int s = q % kSets;
          const __m512i pick = _mm512_set1_epi32(q);
          for (int t = 0; t < NT; ++t) {
            acc[s][t] = _mm512_dpbf16_ps(acc[s][t], wv, (__m512bh)_mm512_permutexvar_epi32(pick, xa[t]));
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        for (int s = 1; s < kSets; ++s) acc[0][t] = _mm512_add_ps(acc[0][t], acc[s][t]);
        _mm512_storeu_ps(y + t * ldy + 16 * g, acc[0][t]);
      }
    }
  }

  // The packed GEMM tile of one group is the group's bytes (see the file comment).
  static void Pack(const uint8_t* w, uint64_t, int64_t cols, uint8_t* packed) {
    std::memcpy(packed, w, static_cast<size_t>(cols) * 2 * kInterleaveRows);
  }
};

}  // namespace

void FillInterleavedFloat(MatmulImpl* impl, bool use_bf16_dot) {
  RegisterInterleaved<F16I>(impl, GgmlType::kF16);
  // Without AVX512_BF16 BF16 keeps the row layout and its widening tile.
  if (use_bf16_dot) RegisterInterleaved<Bf16DotI>(impl, GgmlType::kBF16);
}

}  // namespace lifeline::kernels::avx512
