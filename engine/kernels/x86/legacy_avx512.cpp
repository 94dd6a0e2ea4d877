// AVX-512 VNNI tiles for the 32-value block types (Q4_0, Q5_0, Q8_0, Q4_1, Q5_1) against
// Q8_0 / Q8_1 activations.
//
// Two blocks fill one 512-bit register: 64 weight levels as unsigned bytes (level + offset,
// offset 8 / 16 / 128 for Q4_0 / Q5_0 / Q8_0, 0 for the _1 types) times 64 activation bytes
// with vpdpbusd (u8 x s8, four products per int32 lane). The offset is removed in the
// integers: the accumulator starts at -offset * (sum of the lane's four activations), computed
// once per token and block pair and shared by all rows of the tile. So every int32 lane holds
// an exact partial block sum; it is converted to f32 and scaled by d_w * d_y per lane
// ([d_a x 8, d_b x 8]).
// Note: Zen 5 lacks vpdpbssd (AVX-VNNI-INT8), hence the unsigned form; the sign trick
// (|w| x sign(y, w)) would cost an extra op per row and token instead of per token.
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {
namespace {

// Weight block decoders: Pair(p) -> levels + offset of blocks p and p + kBytes, Single(p) ->
// block p in the low half (zeros above). Scales likewise as [d_a x 8, d_b x 8].
struct Q4_0W {
  static constexpr int kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kHasMin = false;
  static __m512i Pair(const uint8_t* p) { return NibblePair(p + 2, p + 2 + kBytes); }
  static __m512i Single(const uint8_t* p) { return NibbleSingle(p + 2); }
};

struct Q4_1W {
  static constexpr int kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  static __m512i Pair(const uint8_t* p) { return NibblePair(p + 4, p + 4 + kBytes); }
  static __m512i Single(const uint8_t* p) { return NibbleSingle(p + 4); }
};

// Fifth bits: bit j of the block's little-endian qh word belongs to element j.
static inline __m512i AddHighPair(__m512i v, const uint8_t* qa, const uint8_t* qb) {
  uint32_t a, b;
  std::memcpy(&a, qa, 4);
  std::memcpy(&b, qb, 4);
  const __mmask64 k = _cvtu64_mask64(a | (uint64_t{b} << 32));
  return _mm512_mask_add_epi8(v, k, v, _mm512_set1_epi8(16));
}

static inline __m512i AddHighSingle(__m512i v, const uint8_t* qa) {
  uint32_t a;
  std::memcpy(&a, qa, 4);
  return _mm512_mask_add_epi8(v, _cvtu64_mask64(a), v, _mm512_set1_epi8(16));
}

struct Q5_0W {
  static constexpr int kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false;
  static __m512i Pair(const uint8_t* p) {
    return AddHighPair(NibblePair(p + 6, p + 6 + kBytes), p + 2, p + 2 + kBytes);
  }
  static __m512i Single(const uint8_t* p) { return AddHighSingle(NibbleSingle(p + 6), p + 2); }
};

struct Q5_1W {
  static constexpr int kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  static __m512i Pair(const uint8_t* p) {
    return AddHighPair(NibblePair(p + 8, p + 8 + kBytes), p + 4, p + 4 + kBytes);
  }
  static __m512i Single(const uint8_t* p) { return AddHighSingle(NibbleSingle(p + 8), p + 4); }
};

// Q8_0 levels are signed; xor 0x80 adds 128 and reinterprets as unsigned.
struct Q8_0W {
  static constexpr int kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kHasMin = false;
  static __m512i Pair(const uint8_t* p) {
    const __m512i v = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 + kBytes)), 1);
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i Single(const uint8_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    return _mm512_zextsi256_si512(_mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
};

template <typename W>
struct Blocks32 {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  // One block pair (kPair) or the final odd block of every row and token of the tile.
  template <int NR, int NT, bool kPair>
  static inline __attribute__((always_inline)) void Step(const uint8_t* w, uint64_t rb,
                                                         const ActRow* a, int64_t b,
                                                         __m512 (&acc)[NR][NT]) {
    __m512i yv[NT];
    __m512i base[NT];  // -offset * (sum of each lane's four activation bytes)
    for (int t = 0; t < NT; ++t) {
      yv[t] = kPair ? _mm512_loadu_si512(a[t].qs + 32 * b)
                    : _mm512_maskz_loadu_epi8(0xffffffffull, a[t].qs + 32 * b);
      if constexpr (W::kOffset != 0) {
        const __m512i off = _mm512_set1_epi8(static_cast<char>(W::kOffset));
        base[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                   _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv[t]));
      } else {
        base[t] = _mm512_setzero_si512();
      }
    }
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = w + r * rb + b * W::kBytes;
      const __m512i wv = kPair ? W::Pair(p) : W::Single(p);
      const __m512 dw = kPair ? PairF16(p, p + W::kBytes) : SingleF16(p);
      for (int t = 0; t < NT; ++t) {
        const __m512 dy = kPair ? _mm512_loadu_ps(a[t].d_x8 + 8 * b)
                                : _mm512_maskz_loadu_ps(0x00ff, a[t].d_x8 + 8 * b);
        const __m512i dot = _mm512_dpbusd_epi32(base[t], wv, yv[t]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, dy), acc[r][t]);
      }
      if constexpr (W::kHasMin) {
        const __m512 mw = kPair ? PairF16(p + 2, p + 2 + W::kBytes) : SingleF16(p + 2);
        for (int t = 0; t < NT; ++t) {
          const __m512 sy = kPair ? _mm512_loadu_ps(a[t].s_x8 + 8 * b)
                                  : _mm512_maskz_loadu_ps(0x00ff, a[t].s_x8 + 8 * b);
          acc[r][t] = _mm512_fmadd_ps(mw, sy, acc[r][t]);
        }
      }
    }
  }

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / 32;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) Step<NR, NT, true>(w, rb, a, b, acc);
    if (b < nb) Step<NR, NT, false>(w, rb, a, b, acc);
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

}  // namespace

void FillLegacy(MatmulImpl* impl) {
  impl->tiles[static_cast<int>(GgmlType::kQ4_0)] = MakeTile<Blocks32<Q4_0W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ4_1)] = MakeTile<Blocks32<Q4_1W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_0)] = MakeTile<Blocks32<Q5_0W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_1)] = MakeTile<Blocks32<Q5_1W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ8_0)] = MakeTile<Blocks32<Q8_0W>>();
}

}  // namespace lifeline::kernels::avx512
