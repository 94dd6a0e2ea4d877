// AVX-512 packed-weight GEMM for Q4_K, Q5_K and Q6_K (layout: see gemm_avx512.h).
//
// Packed tile, per super-block (kStride bytes):
//   64 quads x 64 bytes of unsigned levels (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63)
//   Q4_K / Q5_K: 8 x 16 f32 d * sc_j; 8 x 16 int32 (m_j, m_j) int16 pairs; 16 f32 dmin
//   Q6_K:       16 x 16 f32 d * sc_g; 8 x 16 int32 (sc_2p, sc_2p+1) int16 pairs; 16 f32 32 * d
// Activations are packed per group of kKQuantGroupTokens tokens (ActQ8K). Per group, super-block
// and sub-block, each weight quad vector is loaded once and meets every token's broadcast
// quad (vpdpbusd sums the integer dot for 16 rows exactly); one conversion and one FMA per
// token add it, times d * sc_j (16 lanes), to a per-super-block partial sum. The mins (and
// Q6_K's offset of 32, i.e. 32 * sum_g sc_g * bsum_g) are vpdpwssd of the packed int16 pairs
// with the token's 16-value sums (two bsums per broadcast int32), subtracted from the partial
// sum, which is then scaled by d_y once per super-block.
#include <type_traits>

#include "engine/kernels/ref/quant_blocks.h"
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

constexpr int64_t kQK = 256;

// Q4_K / Q5_K scale packing (ref/quant_blocks.h UnpackScaleMinK4), all 8 pairs at once.
static inline void ScalesK4(const uint8_t* s12, uint8_t* sc, uint8_t* mn) {
  const uint32_t q0 = Load32u(s12), q1 = Load32u(s12 + 4), q2 = Load32u(s12 + 8);
  Store32u(sc, q0 & 0x3f3f3f3fu);
  Store32u(sc + 4, (q2 & 0x0f0f0f0fu) | (((q0 >> 6) & 0x03030303u) << 4));
  Store32u(mn, q1 & 0x3f3f3f3fu);
  Store32u(mn + 4, ((q2 >> 4) & 0x0f0f0f0fu) | (((q1 >> 6) & 0x03030303u) << 4));
}

// Tokens per activation group: RunKQuantTiles<2>'s 2 x 6 int32 and 2 x 6 f32 partial sums fill
// the registers with the two weight vectors and the broadcast.
constexpr int kKQuantGroupTokens = 6;

// Token-interleaved Q8_K activations shared by the K-quant group kernels, per super-block
// (kActStride bytes) for the group's T tokens: quads [64][T] (4 bytes each), d [T] f32,
// 16-value sums as int16 pairs (bsums[2p], bsums[2p + 1]) [8][T]. Padding tokens are zeros.
struct ActQ8K {
  static constexpr int T = kKQuantGroupTokens;
  static constexpr int64_t kD = 256 * T, kBs = 260 * T;
  static constexpr int64_t kActStride = 292 * T;

  static uint64_t ActGroupBytes(int64_t cols) { return static_cast<uint64_t>(cols / kQK) * kActStride; }

  static void PackActs(const QuantizedActs& acts, int64_t t0, int nt, uint8_t* out) {
    const int64_t nb = acts.cols() / kQK;
    if (nt < T) std::memset(out, 0, ActGroupBytes(acts.cols()));
    for (int t = 0; t < nt; ++t) {
      const ActRow a = acts.Row(t0 + t);
      for (int64_t i = 0; i < nb; ++i) {
        uint8_t* ob = out + i * kActStride;
        const int8_t* qs = a.qs + kQK * i;
#pragma GCC unroll 16
        for (int q = 0; q < 64; ++q) std::memcpy(ob + 4 * (q * T + t), qs + 4 * q, 4);
        StoreF32(ob + kD + 4 * t, a.d[i]);
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) std::memcpy(ob + kBs + 4 * (p * T + t), a.bsums + 16 * i + 2 * p, 4);
      }
    }
  }
};

// The group kernel both packed layouts share, over kTiles (1 or 2) 16-row tiles (pw[0]
// whole when there are two; the last has nr_last rows; tile j is stored at y + 16 j). Per
// super-block, tile and token: the kGroups scale groups' integer dots (64 / kGroups quads
// each) are scaled by d * sc_g (one conversion and one FMA per group) into a partial sum; the
// correction -- Q4_K / Q5_K: the mins, Q6_K: the offset of 32 -- is a vpdpwssd of the 8
// packed int16 pairs at kCorr with the token's 16-value sum pairs, times the per-row f32 at
// kCorrScale, subtracted once; d_y is applied once per super-block. With two tiles each
// activation quad (and sum pair) is broadcast into a register once for both, halving the
// activation loads; the per-token sums across super-blocks then live in an L1 buffer (one
// load and store per super-block) so that the 2 x T integer dots and 2 x T partial sums
// stay in registers. A tile's operations are the same either way: the same bits.
template <int kTiles, int kGroups, int64_t kStride, int64_t kDsc, int64_t kCorr,
          int64_t kCorrScale>
void RunKQuantTiles(const uint8_t* const* pw, int nr_last, const uint8_t* pa, int nt,
                    int64_t cols, float* y, int64_t ldy) {
  constexpr int T = kKQuantGroupTokens;
  constexpr int kQuads = 64 / kGroups;
  const int64_t nb = cols / kQK;
  alignas(64) float acc[kTiles][T][16] = {};
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ab = pa + i * ActQ8K::kActStride;
    const uint8_t* wb[kTiles];
#pragma GCC unroll 2
    for (int j = 0; j < kTiles; ++j) wb[j] = pw[j] + i * kStride;
    __m512 part[kTiles][T];
#pragma GCC unroll 1
    for (int g = 0; g < kGroups; ++g) {
      __m512i dot[kTiles][T];
#pragma GCC unroll 2
      for (int j = 0; j < kTiles; ++j) {
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) dot[j][t] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int q = 0; q < kQuads; ++q) {
        __m512i w[kTiles];
#pragma GCC unroll 2
        for (int j = 0; j < kTiles; ++j) w[j] = _mm512_load_si512(wb[j] + 64 * (kQuads * g + q));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const uint8_t* x = ab + 4 * ((kQuads * g + q) * T + t);
          if constexpr (kTiles == 1) {
            dot[0][t] = DpbusdBcast(dot[0][t], w[0], x);
          } else {
            const __m512i xb = Bcast4(reinterpret_cast<const int8_t*>(x));
#pragma GCC unroll 2
            for (int j = 0; j < kTiles; ++j) dot[j][t] = _mm512_dpbusd_epi32(dot[j][t], w[j], xb);
          }
        }
      }
#pragma GCC unroll 2
      for (int j = 0; j < kTiles; ++j) {
        const __m512 dsc = _mm512_load_ps(reinterpret_cast<const float*>(wb[j] + kDsc) + 16 * g);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          part[j][t] = g == 0 ? _mm512_mul_ps(_mm512_cvtepi32_ps(dot[j][t]), dsc)
                              : _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[j][t]), dsc, part[j][t]);
        }
      }
    }
    __m512i corr[kTiles][T];
#pragma GCC unroll 2
    for (int j = 0; j < kTiles; ++j) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) corr[j][t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      __m512i cp[kTiles];
#pragma GCC unroll 2
      for (int j = 0; j < kTiles; ++j) cp[j] = _mm512_load_si512(wb[j] + kCorr + 64 * p);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i bs = Bcast4(reinterpret_cast<const int8_t*>(ab + ActQ8K::kBs + 4 * (p * T + t)));
#pragma GCC unroll 2
        for (int j = 0; j < kTiles; ++j) corr[j][t] = _mm512_dpwssd_epi32(corr[j][t], cp[j], bs);
      }
    }
#pragma GCC unroll 2
    for (int j = 0; j < kTiles; ++j) {
      const __m512 cs = _mm512_load_ps(reinterpret_cast<const float*>(wb[j] + kCorrScale));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dy = _mm512_set1_ps(LoadF32(ab + ActQ8K::kD + 4 * t));
        part[j][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr[j][t]), cs, part[j][t]);
        _mm512_store_ps(acc[j][t], _mm512_fmadd_ps(part[j][t], dy, _mm512_load_ps(acc[j][t])));
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < kTiles; ++j) {
    __m512 out[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) out[t] = _mm512_load_ps(acc[j][t]);
    StoreGroup<T>(out, j + 1 == kTiles ? nr_last : kGemmRows, nt, y + kGemmRows * j, ldy);
  }
}

template <bool kFifthBit>
struct Q45K : ActQ8K {  // activations: ActGroupBytes, PackActs, T
  static constexpr int64_t kBytes = kFifthBit ? 176 : 144;
  static constexpr int kQs = kFifthBit ? 48 : 16;
  static constexpr int64_t kDsc = 4096, kMins = 4096 + 512, kDmin = 4096 + 1024;
  static constexpr int64_t kStride = 4096 + 1024 + 64;

  static uint64_t PackedBytes(int64_t cols) { return static_cast<uint64_t>(cols / kQK) * kStride; }

  // Levels of values 4q..4q+3 (q < 64): chunk q / 16 of 64 values; quads 0..7 of a chunk are
  // low nibbles of its 32 bytes, quads 8..15 the high nibbles; Q5_K's fifth bit of element e
  // is bit e / 32 of qh[e % 32].
  static uint32_t Quad(const uint8_t* blk, int q) {
    const int chunk = q / 16, qq = q % 16;
    const uint32_t v = Load32u(blk + kQs + 32 * chunk + 4 * (qq % 8));
    uint32_t lv = (qq < 8 ? v : v >> 4) & 0x0f0f0f0fu;
    if constexpr (kFifthBit) {
      const int e = 4 * q;
      lv |= ((Load32u(blk + 16 + e % 32) >> (e / 32)) & 0x01010101u) << 4;
    }
    return lv;
  }

  static void Pack(const uint8_t* w, uint64_t rb, int nr, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* pb = packed + i * kStride;
      float* dsc = reinterpret_cast<float*>(pb + kDsc);
      uint32_t* mins = reinterpret_cast<uint32_t*>(pb + kMins);
      float* dmin = reinterpret_cast<float*>(pb + kDmin);
      for (int r = 0; r < kGemmRows; ++r) {
        if (r >= nr) {
          for (int q = 0; q < 64; ++q) Store32u(pb + 64 * q + 4 * r, 0);
          for (int j = 0; j < 8; ++j) {
            dsc[16 * j + r] = 0.0f;
            mins[16 * j + r] = 0;
          }
          dmin[r] = 0.0f;
          continue;
        }
        const uint8_t* blk = w + r * rb + i * kBytes;
#pragma GCC unroll 64
        for (int q = 0; q < 64; ++q) Store32u(pb + 64 * q + 4 * r, Quad(blk, q));
        uint8_t sc[8], mn[8];
        ScalesK4(blk + 4, sc, mn);
        const float d = LoadF16(blk);
        for (int j = 0; j < 8; ++j) {
          dsc[16 * j + r] = d * static_cast<float>(sc[j]);
          mins[16 * j + r] = static_cast<uint32_t>(mn[j]) * 0x00010001u;  // (m_j, m_j)
        }
        dmin[r] = LoadF16(blk + 2);
      }
    }
  }

  // Q4_K / Q5_K: 8 groups of 32 values, the mins as the correction.
  static void RunGroup(const uint8_t* pw, int nr, const uint8_t* pa, int nt, int64_t cols,
                       float* y, int64_t ldy) {
    const uint8_t* tiles[1] = {pw};
    RunKQuantTiles<1, 8, kStride, kDsc, kMins, kDmin>(tiles, nr, pa, nt, cols, y, ldy);
  }
  static void RunGroup2(const uint8_t* pw0, const uint8_t* pw1, int nr1, const uint8_t* pa,
                        int nt, int64_t cols, float* y, int64_t ldy) {
    const uint8_t* tiles[2] = {pw0, pw1};
    RunKQuantTiles<2, 8, kStride, kDsc, kMins, kDmin>(tiles, nr1, pa, nt, cols, y, ldy);
  }
};

struct Q6K : ActQ8K {  // activations: ActGroupBytes, PackActs, T
  static constexpr int64_t kBytes = 210;
  static constexpr int64_t kDsc = 4096, kScp = 4096 + 1024, kD32 = 4096 + 1536;
  static constexpr int64_t kStride = 4096 + 1536 + 64;

  static uint64_t PackedBytes(int64_t cols) { return static_cast<uint64_t>(cols / kQK) * kStride; }

  // Element 128h + 32g + l: low 4 bits in nibble g / 2 of ql[64h + 32 (g % 2) + l], high 2
  // bits at bit 2g of qh[32h + l] (ref/vec_dot_ref.cpp).
  static uint32_t Quad(const uint8_t* blk, int q) {
    const int e = 4 * q, h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint32_t lo = (Load32u(blk + 64 * h + 32 * (g % 2) + l) >> (4 * (g / 2))) & 0x0f0f0f0fu;
    const uint32_t hi = (Load32u(blk + 128 + 32 * h + l) >> (2 * g)) & 0x03030303u;
    return lo | (hi << 4);
  }

  static void Pack(const uint8_t* w, uint64_t rb, int nr, int64_t cols, uint8_t* packed) {
    const int64_t nb = cols / kQK;
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* pb = packed + i * kStride;
      float* dsc = reinterpret_cast<float*>(pb + kDsc);
      uint32_t* scp = reinterpret_cast<uint32_t*>(pb + kScp);
      float* d32 = reinterpret_cast<float*>(pb + kD32);
      for (int r = 0; r < kGemmRows; ++r) {
        if (r >= nr) {
          for (int q = 0; q < 64; ++q) Store32u(pb + 64 * q + 4 * r, 0);
          for (int g = 0; g < 16; ++g) dsc[16 * g + r] = 0.0f;
          for (int p = 0; p < 8; ++p) scp[16 * p + r] = 0;
          d32[r] = 0.0f;
          continue;
        }
        const uint8_t* blk = w + r * rb + i * kBytes;
#pragma GCC unroll 64
        for (int q = 0; q < 64; ++q) Store32u(pb + 64 * q + 4 * r, Quad(blk, q));
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const float d = LoadF16(blk + 208);
        for (int g = 0; g < 16; ++g) dsc[16 * g + r] = d * static_cast<float>(sc[g]);
        for (int p = 0; p < 8; ++p) {
          scp[16 * p + r] = static_cast<uint16_t>(sc[2 * p]) | (static_cast<uint32_t>(static_cast<uint16_t>(sc[2 * p + 1])) << 16);
        }
        d32[r] = 32.0f * d;
      }
    }
  }

  // 16 groups of 16 values, the offset of 32 (32 d sum_g sc_g bsum_g) as the correction.
  static void RunGroup(const uint8_t* pw, int nr, const uint8_t* pa, int nt, int64_t cols,
                       float* y, int64_t ldy) {
    const uint8_t* tiles[1] = {pw};
    RunKQuantTiles<1, 16, kStride, kDsc, kScp, kD32>(tiles, nr, pa, nt, cols, y, ldy);
  }
  static void RunGroup2(const uint8_t* pw0, const uint8_t* pw1, int nr1, const uint8_t* pa,
                        int nt, int64_t cols, float* y, int64_t ldy) {
    const uint8_t* tiles[2] = {pw0, pw1};
    RunKQuantTiles<2, 16, kStride, kDsc, kScp, kD32>(tiles, nr1, pa, nt, cols, y, ldy);
  }
};

}  // namespace

// Thresholds from measured costs (cycles per weight value: packing ~0.35; per token and row,
// tiles ~1/30, packed ~1/69): break-even near 17 tokens for Q4_K / Q5_K, 30 for Q6_K whose
// tiles are faster.
void FillGemmKQuants(MatmulImpl* impl) {
  impl->gemm[static_cast<int>(GgmlType::kQ4_K)] = MakeGroupedGemm<Q45K<false>>(24);
  impl->gemm[static_cast<int>(GgmlType::kQ5_K)] = MakeGroupedGemm<Q45K<true>>(24);
  impl->gemm[static_cast<int>(GgmlType::kQ6_K)] = MakeGroupedGemm<Q6K>(32);
}

}  // namespace lifeline::kernels::avx512
