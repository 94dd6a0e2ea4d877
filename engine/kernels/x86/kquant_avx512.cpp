// AVX-512 VNNI tiles for Q4_K, Q5_K and Q6_K against Q8_K activations.
//
// A super-block (256 values) is four chunks of 64 levels. Per chunk, Q5_K / Q6_K: vpmaddubsw
// multiplies the unsigned levels with the activation bytes and adds neighbours into int16
// (|sum| <= 2 * 63 * 127, no saturation), then vpdpwssd multiplies by each lane's sub-block
// scale (int16) and accumulates into int32. Q4_K: the high nibbles stay in place (x16, so
// extraction is a single AND), vpdpbusd sums four products per int32 lane and vpmulld applies
// the lane's scale; the x16 lanes are shifted back exactly once per super-block. Either way
// the result is the integer sum_j sc_j * dot_j of the scalar twin, exactly.
// Q4_K / Q5_K mins and Q6_K's level offset (-32) are integer dot products of the scales with
// the activations' 16-value sums (bsums). Per super-block and token the int32 lanes are
// converted once and scaled by d_w * d_y (and d_min_w * d_y).
//
// Loop order: super-block, row, chunk, token: the per-row int32 accumulators live only for one
// super-block (NT registers), the f32 accumulators for the whole tile (NR x NT).
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {
namespace {

constexpr int64_t kQK = 256;

// Q4_K / Q5_K 12-byte scale packing (see ref/quant_blocks.h UnpackScaleMinK4): sub-blocks 0..3
// keep 6-bit scale and min in bytes 0..3 and 4..7; sub-blocks 4..7 keep their low 4 bits in
// the nibbles of bytes 8..11 and their top 2 bits in bits 6..7 of bytes 0..3 / 4..7.
// Returns the 8 scales (bytes of *sc) and 8 mins (bytes of *mn).
static inline void UnpackScalesK4(const uint8_t* s12, uint64_t* sc, uint64_t* mn) {
  uint32_t q0, q1, q2;
  std::memcpy(&q0, s12, 4);
  std::memcpy(&q1, s12 + 4, 4);
  std::memcpy(&q2, s12 + 8, 4);
  const uint32_t sc_lo = q0 & 0x3f3f3f3fu;
  const uint32_t mn_lo = q1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (q2 & 0x0f0f0f0fu) | (((q0 >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((q2 >> 4) & 0x0f0f0f0fu) | (((q1 >> 6) & 0x03030303u) << 4);
  *sc = sc_lo | (uint64_t{sc_hi} << 32);
  *mn = mn_lo | (uint64_t{mn_hi} << 32);
}

// vpshufb control giving int16 lanes 0..15 scale 2k and lanes 16..31 scale 2k + 1 from a
// register holding the 8 scales as int16 in every 128-bit lane.
static inline __m512i ScaleShuffle(int k) {
  const int lo = 4 * k, hi = 4 * k + 2;
  const __m128i c_lo = _mm_set1_epi16(static_cast<short>(lo | ((lo + 1) << 8)));
  const __m128i c_hi = _mm_set1_epi16(static_cast<short>(hi | ((hi + 1) << 8)));
  return _mm512_inserti64x4(_mm512_broadcast_i32x4(c_lo),
                            _mm256_broadcastsi128_si256(c_hi), 1);
}

// vpshufb control giving int32 lanes 0..7 scale byte 2k and lanes 8..15 byte 2k + 1
// (zero-extended) from a register holding the 8 scale bytes in every 128-bit lane.
static inline __m512i ScaleShuffle32(int k) {
  return _mm512_inserti64x4(_mm512_set1_epi32(static_cast<int>(0x80808000u | (2 * k))),
                            _mm256_set1_epi32(static_cast<int>(0x80808000u | (2 * k + 1))), 1);
}

template <bool kFifthBit>
struct Q45K {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBytes = kFifthBit ? 176 : 144;
  static constexpr int kQsOffset = kFifthBit ? 48 : 16;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / kQK;
    const uint64_t ahead = PrefetchAhead(NR * rb);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i nib_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    const __m512i shuf[4] = {ScaleShuffle(0), ScaleShuffle(1), ScaleShuffle(2), ScaleShuffle(3)};
    const __m512i shuf32[4] = {ScaleShuffle32(0), ScaleShuffle32(1), ScaleShuffle32(2), ScaleShuffle32(3)};
    const __m512i nib16 = _mm512_inserti64x4(low4, _mm256_set1_epi8(static_cast<char>(0xf0)), 1);
    const __m512i hi_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(4), 1);
    __m512 accf[NR][NT];
    float acc_min[NR][NT];  // sum of dmin_w * d_y * sum_j m_j * (bsum_2j + bsum_2j+1)
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) {
        accf[r][t] = _mm512_setzero_ps();
        acc_min[r][t] = 0.0f;
      }
    }
    for (int64_t i = 0; i < nb; ++i) {
      // GEMV: activation sums per 32-value sub-block, shared by the tile's rows.
      int32_t bsum32[8];
      if constexpr (NT == 1) {
        const int16_t* bs = a[0].bsums + 16 * i;
        for (int j = 0; j < 8; ++j) bsum32[j] = bs[2 * j] + bs[2 * j + 1];
      }
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = w + r * rb + i * kBytes;
        for (int64_t off = 0; off < kBytes; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + off), _MM_HINT_T0);
        }
        uint64_t sc, mn;
        UnpackScalesK4(blk + 4, &sc, &mn);
        __m512i acci[NT];
        for (int t = 0; t < NT; ++t) acci[t] = _mm512_setzero_si512();
        if constexpr (!kFifthBit) {
          // Q4_K: high nibbles stay in place (x16): [q q] & [0f.. | f0..] is one op. vpdpbusd
          // gives per-lane sums (lanes 0..7 sub-block 2k, 8..15 sub-block 2k+1 times 16),
          // vpmulld applies the scales; the x16 comes out with an exact shift at the end.
          const __m512i scb = _mm512_broadcast_i32x4(_mm_cvtsi64_si128(static_cast<long long>(sc)));
          for (int k = 0; k < 4; ++k) {
            const __m512i wv = _mm512_and_si512(Broadcast32(blk + kQsOffset + 32 * k), nib16);
            const __m512i s = _mm512_shuffle_epi8(scb, shuf32[k]);
            for (int t = 0; t < NT; ++t) {
              const __m512i yv = _mm512_loadu_si512(a[t].qs + i * kQK + 64 * k);
              const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, yv);
              acci[t] = _mm512_add_epi32(acci[t], _mm512_mullo_epi32(dot, s));
            }
          }
          for (int t = 0; t < NT; ++t) acci[t] = _mm512_srav_epi32(acci[t], hi_shift);
        } else {
          // Q5_K: the fifth bit rules out the x16 trick; int16 products, per-lane int16 scales.
          const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
          const __m512i hbits = Broadcast32(blk + 16);
          for (int k = 0; k < 4; ++k) {
            __m512i wv = _mm512_and_si512(_mm512_srlv_epi64(Broadcast32(blk + kQsOffset + 32 * k), nib_shift), low4);
            // Chunk k: elements 0..31 take bit 2k of qh[l], elements 32..63 bit 2k + 1.
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                                   _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))), 1);
            const __mmask64 hk = _mm512_test_epi8_mask(hbits, sel);
            wv = _mm512_mask_add_epi8(wv, hk, wv, _mm512_set1_epi8(16));
            const __m512i s = _mm512_shuffle_epi8(sc16, shuf[k]);
            for (int t = 0; t < NT; ++t) {
              const __m512i yv = _mm512_loadu_si512(a[t].qs + i * kQK + 64 * k);
              acci[t] = _mm512_dpwssd_epi32(acci[t], _mm512_maddubs_epi16(wv, yv), s);
            }
          }
        }
        const float dw = LoadF16(blk);
        const float dmin = LoadF16(blk + 2);
        if constexpr (NT == 1) {
          // GEMV: the vector pipes are the bottleneck; the min term goes to the scalar ALUs.
          int32_t msum = 0;
          for (int j = 0; j < 8; ++j) msum += static_cast<int32_t>((mn >> (8 * j)) & 0xff) * bsum32[j];
          acc_min[r][0] += (dmin * a[0].d[i]) * static_cast<float>(msum);
        } else {
          // Several tokens: one vpmaddwd per token against mins duplicated per 16-value group.
          const __m256i m16 = _mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn)));
          const __m256i mdup = _mm256_unpacklo_epi16(_mm256_permute4x64_epi64(m16, 0x50),
                                                     _mm256_permute4x64_epi64(m16, 0x50));
          for (int t = 0; t < NT; ++t) {
            const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].bsums + 16 * i));
            const __m512i msum = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, mdup));
            accf[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_set1_ps(dmin * a[t].d[i]), accf[r][t]);
          }
        }
        for (int t = 0; t < NT; ++t) {
          accf[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[t]), _mm512_set1_ps(dw * a[t].d[i]), accf[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(accf[r][t]) - acc_min[r][t];
    }
  }
};

// int16 lane permutation for Q6_K chunk c: lanes 8g..8g+7 take scale 4c + g.
static inline __m512i ScaleIdx16(int c) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(4 * c + l / 8);
  return _mm512_load_si512(idx);
}

struct Q6K {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBytes = 210;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / kQK;
    const uint64_t ahead = PrefetchAhead(NR * rb);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i hi2 = _mm512_set1_epi8(0x30);
    const __m512i shl_even = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);
    const __m512i shr_odd = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
    const __m512i idx[4] = {ScaleIdx16(0), ScaleIdx16(1), ScaleIdx16(2), ScaleIdx16(3)};
    __m512 accf[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) accf[r][t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = w + r * rb + i * kBytes;
        for (int64_t off = 0; off < kBytes; off += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(blk + ahead + off), _MM_HINT_T0);
        }
        const uint8_t* ql = blk;
        const uint8_t* qh = blk + 128;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
        const __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i acci[NT];
        for (int t = 0; t < NT; ++t) acci[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
          const __m512i lo = _mm512_loadu_si512(ql + 64 * h);
          const __m512i hb = Broadcast32(qh + 32 * h);
          // Chunk 2h: elements 0..63 of the half (low nibbles; qh bits 0-1 | 2-3).
          // Chunk 2h+1: elements 64..127 (high nibbles; qh bits 4-5 | 6-7).
          const __m512i w_even = _mm512_or_si512(_mm512_and_si512(lo, low4),
                                                 _mm512_and_si512(_mm512_sllv_epi64(hb, shl_even), hi2));
          const __m512i w_odd = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), low4),
                                                _mm512_and_si512(_mm512_srlv_epi64(hb, shr_odd), hi2));
          const __m512i s_even = _mm512_permutexvar_epi16(idx[2 * h], scz);
          const __m512i s_odd = _mm512_permutexvar_epi16(idx[2 * h + 1], scz);
          for (int t = 0; t < NT; ++t) {
            const int8_t* yq = a[t].qs + i * kQK + 128 * h;
            acci[t] = _mm512_dpwssd_epi32(acci[t], _mm512_maddubs_epi16(w_even, _mm512_loadu_si512(yq)), s_even);
            acci[t] = _mm512_dpwssd_epi32(acci[t], _mm512_maddubs_epi16(w_odd, _mm512_loadu_si512(yq + 64)), s_odd);
          }
        }
        const float dw = LoadF16(blk + 208);
        for (int t = 0; t < NT; ++t) {
          // Levels were used as q + 32: subtract 32 * sum_g sc_g * bsum_g.
          const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].bsums + 16 * i));
          const __m512i corr = _mm512_zextsi256_si512(_mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
          const __m512i isum = _mm512_sub_epi32(acci[t], corr);
          accf[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dw * a[t].d[i]), accf[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(accf[r][t]);
    }
  }
};

}  // namespace

void FillKQuants(MatmulImpl* impl) {
  impl->tiles[static_cast<int>(GgmlType::kQ4_K)] = MakeTile<Q45K<false>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_K)] = MakeTile<Q45K<true>>();
  impl->tiles[static_cast<int>(GgmlType::kQ6_K)] = MakeTile<Q6K>();
}

}  // namespace lifeline::kernels::avx512
