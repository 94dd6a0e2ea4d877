// AVX-512 VNNI tiles for the 32-value block types (Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_1, Q5_1)
// against Q8_0 / Q8_1 activations.
//
// Two blocks fill one 512-bit register: 64 weight levels as unsigned bytes (level + offset,
// offset 8 / 16 / 128 for Q4_0 / Q5_0 / Q8_0, 0 for the _1 types) times 64 activation bytes
// with vpdpbusd (u8 x s8, four products per int32 lane). The offset is removed in the
// integers: the accumulator starts at -offset * (sum of the lane's four activations), computed
// once per token and block pair and shared by all rows of the tile. So every int32 lane holds
// an exact partial block sum, converted to f32 and scaled by its block's d_w * d_y.
//
// Scales cost little per row: the f16 d of both blocks of all rows of the tile are gathered on
// the scalar ALUs and converted with one vcvtph2ps, multiplied by the token's [d_y, d_y']
// once per token, and each row picks its lanes with one vpermps. Q4_1 / Q5_1 min terms
// (m_w * s_y) accumulate for all rows at once in one ymm per token.
// Note: Zen 5 lacks vpdpbssd (AVX-VNNI-INT8), hence the unsigned form; the sign trick
// (|w| x sign(y, w)) would cost an extra op per row and token instead of per token.
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {
namespace {

static inline uint32_t Load16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

static inline __m512i Load128x2(const uint8_t* a, const uint8_t* b) {  // [a a b b]
  const __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  return _mm512_mask_broadcast_i32x4(z, 0xff00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
}

// Nibble decoding with the high nibble left in place (worth 16x): [a a b b] & [0f f0 0f f0]
// gives the 32 low nibbles and 16 x the 32 high nibbles of two blocks in two ops. The factor
// 16 is taken out of those lanes' scales (exact: a power of two) and of their offset.
static inline __m512i Nibble16Mask() {
  return _mm512_set_epi64(-0x0f0f0f0f0f0f0f10ll, -0x0f0f0f0f0f0f0f10ll, 0x0f0f0f0f0f0f0f0fll,
                          0x0f0f0f0f0f0f0f0fll, -0x0f0f0f0f0f0f0f10ll, -0x0f0f0f0f0f0f0f10ll,
                          0x0f0f0f0f0f0f0f0fll, 0x0f0f0f0f0f0f0f0fll);
}

// Plain nibble decoding: [a a b b] shifted by 0 / 4 per 128-bit lane, & 0x0f.
static inline __m512i NibblesShifted(__m512i aabb) {
  const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(aabb, shift), _mm512_set1_epi8(0x0f));
}

// Fifth bits: bit j of the block's little-endian qh word belongs to element j.
static inline __m512i AddHigh(__m512i v, uint64_t bits) {
  return _mm512_mask_add_epi8(v, _cvtu64_mask64(bits), v, _mm512_set1_epi8(16));
}

static inline uint64_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Weight block decoders. Pair(p): levels (+ offset) of blocks p and p + kBytes; Single(p):
// block p in the low half, zeros above. kNibble16: the high nibbles come 16x (see above).
// kScale / kMin: byte offsets of the f16 d and m fields.
struct Q4_0W {
  static constexpr int kBytes = 18, kOffset = 8, kMin = -1;
  static constexpr bool kNibble16 = true;
  static __m512i Pair(const uint8_t* p) {
    return _mm512_and_si512(Load128x2(p + 2, p + 2 + kBytes), Nibble16Mask());
  }
  static __m512i Single(const uint8_t* p) {
    const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    return _mm512_maskz_and_epi32(0x00ff, a, Nibble16Mask());
  }
};

struct Q4_1W {
  static constexpr int kBytes = 20, kOffset = 0, kMin = 2;
  static constexpr bool kNibble16 = true;
  static __m512i Pair(const uint8_t* p) {
    return _mm512_and_si512(Load128x2(p + 4, p + 4 + kBytes), Nibble16Mask());
  }
  static __m512i Single(const uint8_t* p) {
    const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4)));
    return _mm512_maskz_and_epi32(0x00ff, a, Nibble16Mask());
  }
};

template <int kQh, int kQs, int kBlockBytes>
struct Q5W {
  static __m512i Pair(const uint8_t* p) {
    const __m512i v = NibblesShifted(Load128x2(p + kQs, p + kQs + kBlockBytes));
    return AddHigh(v, Load32(p + kQh) | (Load32(p + kQh + kBlockBytes) << 32));
  }
  static __m512i Single(const uint8_t* p) {
    const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kQs)));
    return AddHigh(_mm512_maskz_mov_epi32(0x00ff, NibblesShifted(a)), Load32(p + kQh));
  }
};

struct Q5_0W : Q5W<2, 6, 22> {
  static constexpr int kBytes = 22, kOffset = 16, kMin = -1;
  static constexpr bool kNibble16 = false;
};

struct Q5_1W : Q5W<4, 8, 24> {
  static constexpr int kBytes = 24, kOffset = 0, kMin = 2;
  static constexpr bool kNibble16 = false;
};

// Q8_0 levels are signed; xor 0x80 adds 128 and reinterprets them as unsigned.
struct Q8_0W {
  static constexpr int kBytes = 34, kOffset = 128, kMin = -1;
  static constexpr bool kNibble16 = false;
  static __m512i Pair(const uint8_t* p) {
    const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)));
    const __m512i ab = _mm512_mask_broadcast_i64x4(
        a, 0xf0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 + kBytes)));
    return _mm512_xor_si512(ab, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i Single(const uint8_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    return _mm512_zextsi256_si512(_mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
};

// IQ4_NL: the nibbles index the 16-entry grid, held +128 (so levels are unsigned bytes,
// offset 128, within 1..241) in every 128-bit lane for one vpshufb per block pair.
struct IQ4_NLW {
  static constexpr int kBytes = 18, kOffset = 128, kMin = -1;
  static constexpr bool kNibble16 = false;
  static __m512i Grid() {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(
        1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129), static_cast<char>(141),
        static_cast<char>(153), static_cast<char>(166), static_cast<char>(181),
        static_cast<char>(197), static_cast<char>(217), static_cast<char>(241)));
  }
  static __m512i Pair(const uint8_t* p) {
    return _mm512_shuffle_epi8(Grid(), NibblesShifted(Load128x2(p + 2, p + 2 + kBytes)));
  }
  static __m512i Single(const uint8_t* p) {
    const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    return _mm512_maskz_mov_epi32(0x00ff, _mm512_shuffle_epi8(Grid(), NibblesShifted(a)));
  }
};

template <typename W>
struct Blocks32 {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  // The f16 field at byte `off` of blocks b and b+1 (kPair) of NR rows as
  // [r0.b r0.b+1 r1.b r1.b+1 ...] floats (zeros for absent rows / the absent second block):
  // one conversion for all rows, the gathering on the scalar ALUs.
  template <int NR, bool kPair>
  static inline __attribute__((always_inline)) __m256 RowPairF16(const uint8_t* w, uint64_t rb,
                                                                 int64_t b, int off) {
    uint64_t half[2] = {0, 0};
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = w + r * rb + b * W::kBytes + off;
      const uint64_t u = Load16(p) | (kPair ? Load16(p + W::kBytes) << 16 : 0u);
      half[r / 2] |= u << (32 * (r % 2));
    }
    __m128i h = _mm_cvtsi64_si128(static_cast<long long>(half[0]));
    if constexpr (NR > 2) h = _mm_insert_epi64(h, static_cast<long long>(half[1]), 1);
    return _mm256_cvtph_ps(h);
  }

  // Lane -> scale index for row r: with kNibble16 the 16 scales are [s, s / 16] and lanes
  // 4..7 / 12..15 (high nibbles) take the / 16 copies.
  static inline __m512i ScaleIdx(int r) {
    if constexpr (W::kNibble16) {
      return _mm512_set_epi32(9 + 2 * r, 9 + 2 * r, 9 + 2 * r, 9 + 2 * r, 1 + 2 * r, 1 + 2 * r,
                              1 + 2 * r, 1 + 2 * r, 8 + 2 * r, 8 + 2 * r, 8 + 2 * r, 8 + 2 * r,
                              2 * r, 2 * r, 2 * r, 2 * r);
    } else {
      return _mm512_inserti64x4(_mm512_set1_epi32(2 * r), _mm256_set1_epi32(2 * r + 1), 1);
    }
  }

  // Per byte lane: the level offset (x16 for the high-nibble lanes under kNibble16).
  static inline __m512i OffsetBytes() {
    if constexpr (W::kNibble16) {
      const __m256i lh = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_set1_epi8(static_cast<char>(W::kOffset))),
          _mm_set1_epi8(static_cast<char>(16 * W::kOffset)), 1);
      return _mm512_broadcast_i64x4(lh);
    } else {
      return _mm512_set1_epi8(static_cast<char>(W::kOffset));
    }
  }

  // Two consecutive floats repeated across the register: [p0 p1 p0 p1 ...].
  static inline __m512 Pair2x(const float* p) {
    double d;
    std::memcpy(&d, p, sizeof(d));
    return _mm512_castpd_ps(_mm512_set1_pd(d));
  }

  // One block pair (kPair) or the final odd block for every row and token of the tile.
  template <int NR, int NT, bool kPair>
  static inline __attribute__((always_inline)) void Step(const uint8_t* w, uint64_t rb,
                                                         uint64_t ahead, const ActRow* a, int64_t b,
                                                         __m512 (&acc)[NR][NT],
                                                         __m256 (&acc_min)[NT]) {
    const __m256 dw8 = RowPairF16<NR, kPair>(w, rb, b, 0);
    __m512 dw16;
    if constexpr (W::kNibble16) {
      dw16 = _mm512_insertf32x8(_mm512_castps256_ps512(dw8), _mm256_mul_ps(dw8, _mm256_set1_ps(0.0625f)), 1);
    } else {
      dw16 = _mm512_castps256_ps512(dw8);
    }
    __m512i yv[NT];
    __m512i base[NT];  // -offset * (sum of each lane's four activation bytes)
    __m512 scale[NT];  // [dw * dy] per row and block, see RowPairF16 / ScaleIdx
    for (int t = 0; t < NT; ++t) {
      yv[t] = kPair ? _mm512_loadu_si512(a[t].qs + 32 * b)
                    : _mm512_maskz_loadu_epi8(0xffffffffull, a[t].qs + 32 * b);
      if constexpr (W::kOffset != 0) {
        base[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                   _mm512_dpbusd_epi32(_mm512_setzero_si512(), OffsetBytes(), yv[t]));
      } else {
        base[t] = _mm512_setzero_si512();
      }
      // [dy_b dy_b+1] repeated (the absent block's weight scale is 0 in the single case).
      const __m512 dy = kPair ? Pair2x(a[t].d + b) : _mm512_set1_ps(a[t].d[b]);
      scale[t] = _mm512_mul_ps(dw16, dy);
    }
    for (int r = 0; r < NR; ++r) {
      const uint8_t* p = w + r * rb + b * W::kBytes;
      // One line per step covers a pair of blocks up to 64 bytes; Q8_0's 68 need a second.
      _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
      if constexpr (2 * W::kBytes > 64) _mm_prefetch(reinterpret_cast<const char*>(p + ahead + 64), _MM_HINT_T0);
      const __m512i wv = kPair ? W::Pair(p) : W::Single(p);
      const __m512i idx = ScaleIdx(r);
      for (int t = 0; t < NT; ++t) {
        const __m512i dot = _mm512_dpbusd_epi32(base[t], wv, yv[t]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, scale[t]), acc[r][t]);
      }
    }
    if constexpr (W::kMin >= 0) {
      const __m256 mw8 = RowPairF16<NR, kPair>(w, rb, b, W::kMin);
      for (int t = 0; t < NT; ++t) {
        const __m256 sy = kPair ? _mm512_castps512_ps256(Pair2x(a[t].s + b)) : _mm256_set1_ps(a[t].s[b]);
        acc_min[t] = _mm256_fmadd_ps(mw8, sy, acc_min[t]);
      }
    }
  }

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / 32;
    __m512 acc[NR][NT];
    __m256 acc_min[NT];  // [r0.b r0.b+1 r1.b ...] sums of m_w * s_y
    for (int t = 0; t < NT; ++t) {
      acc_min[t] = _mm256_setzero_ps();
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_setzero_ps();
    }
    const uint64_t ahead = PrefetchAhead(NR * rb);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) Step<NR, NT, true>(w, rb, ahead, a, b, acc, acc_min);
    if (b < nb) Step<NR, NT, false>(w, rb, ahead, a, b, acc, acc_min);
    for (int t = 0; t < NT; ++t) {
      alignas(32) float m[8];
      _mm256_store_ps(m, acc_min[t]);
      for (int r = 0; r < NR; ++r) {
        y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]) + (W::kMin >= 0 ? m[2 * r] + m[2 * r + 1] : 0.0f);
      }
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
  impl->tiles[static_cast<int>(GgmlType::kIQ4_NL)] = MakeTile<Blocks32<IQ4_NLW>>();
}

}  // namespace lifeline::kernels::avx512
