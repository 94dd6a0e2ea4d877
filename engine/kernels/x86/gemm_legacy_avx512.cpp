// AVX-512 packed-weight GEMM for the 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//
// Packed tile, per block b (kStride bytes): 8 quads x 64 bytes of unsigned levels (level +
// offset, as in the tiles: 8 / 16 / 128 for Q4_0 / Q5_0 / Q8_0, 0 for the _1 types), then the
// 16 rows' d as f32, then (Q4_1 / Q5_1) the 16 rows' m as f32.
// Activations are packed per group of kLegacyGroupTokens tokens (Legacy::PackActs). Per group and
// block: each token's int32 accumulator starts at -offset * sum(y) (the activation block sum
// from the quantizer); each of the 8 weight quad vectors is loaded once and meets every
// token's broadcast quad (8 vpdpbusd per vector, all accumulators in registers), adding the
// block's integer dot to all 16 rows exactly; then one conversion and one FMA per token scale
// it by d_w (16 lanes) x d_y (broadcast) — plus one FMA for the min term m_w x s_y.
// Measured on Zen 5 (one core, 512 tokens, packing and quantization included): 520-550
// GOP/s, 61-64 % of the vpdpbusd peak; the 3 float ops per 8 vpdpbusd share its pipes,
// which bounds this layout near three quarters.
// The driver hands the kernel tiles in pairs (RunGroup2): each activation quad is then
// broadcast into a register once for two weight vectors (48 broadcasts + 16 weight loads per
// block of 6 tokens x 32 rows, instead of 96 + 16 for two single tiles). Six tokens is the
// most whose 2 x 6 int32 and 2 x 6 f32 accumulators fit the 32 registers with both weight
// vectors and the scales. Same machine, alternating, 512 tokens, 1.1B shapes: one thread
// 57-60 % -> 65-69 % of the peak, two threads 53-60 % -> 61-66 %. (Which resource the pairs
// relieve is not settled: a variant with the broadcasts hoisted out of the token loop ran no
// faster, while one without the per-block d_w x d_y multiply ran 77 % against 67 %.)
#include <type_traits>

#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

// Level bytes of values 4q..4q+3 of one block, as a little-endian uint32 (levels + offset).
struct Q4_0P {
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 2 + 4 * (q % 4));
    return (q < 4 ? v : v >> 4) & 0x0f0f0f0fu;
  }
};
struct Q4_1P {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kMin = true;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 4 + 4 * (q % 4));
    return (q < 4 ? v : v >> 4) & 0x0f0f0f0fu;
  }
};
// Fifth bits: bit j of the little-endian qh word belongs to element j; 4 of them spread to
// bit 4 of 4 bytes through a 16-entry table.
constexpr uint32_t Spread4(uint32_t bits) {
  return ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25);
}
constexpr uint32_t kSpread4[16] = {Spread4(0),  Spread4(1),  Spread4(2),  Spread4(3),
                                   Spread4(4),  Spread4(5),  Spread4(6),  Spread4(7),
                                   Spread4(8),  Spread4(9),  Spread4(10), Spread4(11),
                                   Spread4(12), Spread4(13), Spread4(14), Spread4(15)};
static inline uint32_t HighQuad(uint32_t qh, int q) { return kSpread4[(qh >> (4 * q)) & 0xf]; }
struct Q5_0P {
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 6 + 4 * (q % 4));
    return ((q < 4 ? v : v >> 4) & 0x0f0f0f0fu) | HighQuad(Load32u(blk + 2), q);
  }
};
struct Q5_1P {
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kMin = true;
  static uint32_t Quad(const uint8_t* blk, int q) {
    const uint32_t v = Load32u(blk + 8 + 4 * (q % 4));
    return ((q < 4 ? v : v >> 4) & 0x0f0f0f0fu) | HighQuad(Load32u(blk + 4), q);
  }
};
struct Q8_0P {
  static constexpr int kBytes = 34, kOffset = 128;
  static constexpr bool kMin = false;
  static uint32_t Quad(const uint8_t* blk, int q) { return Load32u(blk + 2 + 4 * q) ^ 0x80808080u; }
};

// Tokens per activation group (see RunGroup2).
constexpr int kLegacyGroupTokens = 6;

template <typename P>
struct Legacy {
  static constexpr int64_t kStride = 512 + 64 + (P::kMin ? 64 : 0);

  static uint64_t PackedBytes(int64_t cols) { return static_cast<uint64_t>(cols / 32) * kStride; }

  static void Pack(const uint8_t* w, uint64_t rb, int nr, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* pb = packed + b * kStride;
      float* d = reinterpret_cast<float*>(pb + 512);
      float* m = reinterpret_cast<float*>(pb + 576);
      for (int r = 0; r < kGemmRows; ++r) {
        if (r >= nr) {  // padding rows: zero levels and scales
          for (int q = 0; q < 8; ++q) Store32u(pb + 64 * q + 4 * r, 0);
          d[r] = 0.0f;
          if constexpr (P::kMin) m[r] = 0.0f;
          continue;
        }
        const uint8_t* blk = w + r * rb + b * P::kBytes;
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) Store32u(pb + 64 * q + 4 * r, P::Quad(blk, q));
        d[r] = LoadF16(blk);
        if constexpr (P::kMin) m[r] = LoadF16(blk + 2);
      }
    }
  }

  // Token-interleaved activations, per block (kActStride bytes) for the group's T tokens:
  // quads [8][T] (4 bytes each), init [T] int32 = -offset * isum, d [T] f32, (s [T] f32).
  static constexpr int T = kLegacyGroupTokens;
  static constexpr int64_t kInit = 32 * T, kD = 36 * T, kS = 40 * T;
  static constexpr int64_t kActStride = 40 * T + (P::kMin ? 4 * T : 0);

  static uint64_t ActGroupBytes(int64_t cols) { return static_cast<uint64_t>(cols / 32) * kActStride; }

  static void PackActs(const QuantizedActs& acts, int64_t t0, int nt, uint8_t* out) {
    const int64_t nb = acts.cols() / 32;
    if (nt < T) std::memset(out, 0, ActGroupBytes(acts.cols()));  // padding tokens: zeros
    for (int t = 0; t < nt; ++t) {
      const ActRow a = acts.Row(t0 + t);
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* ob = out + b * kActStride;
        const int8_t* qs = a.qs + 32 * b;
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) std::memcpy(ob + 4 * (q * T + t), qs + 4 * q, 4);
        Store32u(ob + kInit + 4 * t, static_cast<uint32_t>(-P::kOffset * a.isum[b]));
        StoreF32(ob + kD + 4 * t, a.d[b]);
        if constexpr (P::kMin) StoreF32(ob + kS + 4 * t, a.s[b]);
      }
    }
  }

  // kTiles (1 or 2) 16-row tiles past one group (pw[0] whole when there are two; the last
  // has nr_last rows; tile j is stored at y + 16 j). Per block and tile: T int32 sums start
  // at -offset * isum, each of the 8 weight quad vectors is loaded once and meets the T
  // tokens' broadcast quads (with two tiles each quad is broadcast into a register once for
  // both); then one conversion, one multiply (d_w x d_y) and one FMA per token. Two
  // dependency chains per token either way: with one tile, quads 0..3 and 4..7 (with one
  // chain of 8 vpdpbusd per token the chains were too few to hide the instruction's
  // latency: one core, 512 tokens, 8-token groups, process CPU time, alternating binaries:
  // Q4_0 5632x2048 430-455 -> 546-553 GOP/s, 2048x5632 406-420 -> 522-525, Q8_0 5632x2048
  // 430-449 -> 526-537; the K-quant kernel split the same way measured no faster); with two,
  // one per tile. The integer sums are exact, so a tile's results are the same bits
  // whichever way it is run.
  template <int kTiles>
  static void RunTiles(const uint8_t* const* pw, int nr_last, const uint8_t* pa, int nt,
                       int64_t cols, float* y, int64_t ldy) {
    constexpr int kChains = 2 / kTiles;  // per tile and token
    constexpr int kQuadsPerChain = 8 / kChains;
    const int64_t nb = cols / 32;
    __m512 acc[kTiles][T];
#pragma GCC unroll 16
    for (int j = 0; j < kTiles; ++j) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[j][t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* ab = pa + b * kActStride;
      __m512i s[kTiles][kChains][T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i init = P::kOffset != 0
                                 ? Bcast4(reinterpret_cast<const int8_t*>(ab + kInit + 4 * t))
                                 : _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int j = 0; j < kTiles; ++j) {
          s[j][0][t] = init;
          if constexpr (kChains == 2) s[j][1][t] = _mm512_setzero_si512();
        }
      }
#pragma GCC unroll 8
      for (int q = 0; q < kQuadsPerChain; ++q) {
#pragma GCC unroll 2
        for (int c = 0; c < kChains; ++c) {
          const int quad = q + c * kQuadsPerChain;
          __m512i w[kTiles];
#pragma GCC unroll 2
          for (int j = 0; j < kTiles; ++j) w[j] = _mm512_load_si512(pw[j] + b * kStride + 64 * quad);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const uint8_t* x = ab + 4 * (quad * T + t);
            if constexpr (kTiles == 1) {
              s[0][c][t] = DpbusdBcast(s[0][c][t], w[0], x);
            } else {
              const __m512i xb = Bcast4(reinterpret_cast<const int8_t*>(x));
#pragma GCC unroll 2
              for (int j = 0; j < kTiles; ++j) s[j][c][t] = _mm512_dpbusd_epi32(s[j][c][t], w[j], xb);
            }
          }
        }
      }
#pragma GCC unroll 2
      for (int j = 0; j < kTiles; ++j) {
        const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(pw[j] + b * kStride + 512));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i sum = kChains == 2 ? _mm512_add_epi32(s[j][0][t], s[j][kChains - 1][t])
                                           : s[j][0][t];
          acc[j][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                                      _mm512_mul_ps(dw, _mm512_set1_ps(LoadF32(ab + kD + 4 * t))),
                                      acc[j][t]);
        }
        if constexpr (P::kMin) {
          const __m512 mw = _mm512_load_ps(reinterpret_cast<const float*>(pw[j] + b * kStride + 576));
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            acc[j][t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(LoadF32(ab + kS + 4 * t)), acc[j][t]);
          }
        }
      }
    }
#pragma GCC unroll 2
    for (int j = 0; j < kTiles; ++j) {
      StoreGroup<T>(acc[j], j + 1 == kTiles ? nr_last : kGemmRows, nt, y + kGemmRows * j, ldy);
    }
  }

  static void RunGroup(const uint8_t* pw, int nr, const uint8_t* pa, int nt, int64_t cols,
                       float* y, int64_t ldy) {
    const uint8_t* tiles[1] = {pw};
    RunTiles<1>(tiles, nr, pa, nt, cols, y, ldy);
  }
  static void RunGroup2(const uint8_t* pw0, const uint8_t* pw1, int nr1, const uint8_t* pa,
                        int nt, int64_t cols, float* y, int64_t ldy) {
    const uint8_t* tiles[2] = {pw0, pw1};
    RunTiles<2>(tiles, nr1, pa, nt, cols, y, ldy);
  }
};

}  // namespace

// Thresholds: packing costs ~0.2 cycles per weight value, a token through the tiles ~1/30 and
// through the packed kernel ~1/68 cycles per value and row, so packing pays off from ~10
// tokens; 16 leaves a margin.
void FillGemmLegacy(MatmulImpl* impl) {
  impl->gemm[static_cast<int>(GgmlType::kQ4_0)] = MakeGroupedGemm<Legacy<Q4_0P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ4_1)] = MakeGroupedGemm<Legacy<Q4_1P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ5_0)] = MakeGroupedGemm<Legacy<Q5_0P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ5_1)] = MakeGroupedGemm<Legacy<Q5_1P>>(16);
  impl->gemm[static_cast<int>(GgmlType::kQ8_0)] = MakeGroupedGemm<Legacy<Q8_0P>>(16);
}

}  // namespace lifeline::kernels::avx512
