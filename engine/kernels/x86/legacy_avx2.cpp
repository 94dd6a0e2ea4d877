// AVX2 tiles for the 32-value block types (Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_1, Q5_1): one block
// per 256-bit register. vpmaddubsw multiplies the unsigned levels by the activation bytes and
// adds neighbours into int16 (|pair| <= 2 * 31 * 127: no saturation); the level offset is
// removed in int16 by subtracting vpmaddubsw(offset, y), computed once per token and block and
// shared by the tile's rows; vpmaddwd by 1 widens to int32 for the f32 conversion.
// Q8_0 and IQ4_NL levels are signed and up to |128|, where an offset of 128 would overflow
// int16, so they use the sign trick instead (|w| x sign(y, w), both factors within range);
// IQ4_NL's levels come from its grid by one vpshufb of the nibbles.
// The _1 types' min terms m_w * s_y are scalar FMAs per row, token and block.
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"

namespace lifeline::kernels::avx2 {
namespace {

static inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct Q4_0W {
  static constexpr int kBytes = 18, kOffset = 8, kMin = -1;
  static __m256i Levels(const uint8_t* p) { return Nibbles32(p + 2); }
};
struct Q4_1W {
  static constexpr int kBytes = 20, kOffset = 0, kMin = 2;
  static __m256i Levels(const uint8_t* p) { return Nibbles32(p + 4); }
};
static inline __m256i Levels5(const uint8_t* qs, const uint8_t* qh) {
  const __m256i high = _mm256_and_si256(BitsToBytes(Load32(qh)), _mm256_set1_epi8(16));
  return _mm256_or_si256(Nibbles32(qs), high);
}
struct Q5_0W {
  static constexpr int kBytes = 22, kOffset = 16, kMin = -1;
  static __m256i Levels(const uint8_t* p) { return Levels5(p + 6, p + 2); }
};
struct Q5_1W {
  static constexpr int kBytes = 24, kOffset = 0, kMin = 2;
  static __m256i Levels(const uint8_t* p) { return Levels5(p + 8, p + 4); }
};

// Unsigned levels with an offset (Q4_0, Q5_0) or none (Q4_1, Q5_1).
template <typename W>
struct Unsigned32 {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / 32;
    __m256 acc[NR][NT];
    float acc_min[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        acc_min[r][t] = 0.0f;
      }
    }
    const __m256i off = _mm256_set1_epi8(static_cast<char>(W::kOffset));
    const uint64_t ahead = PrefetchAhead(NR * rb);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i yv[NT], corr[NT];
      for (int t = 0; t < NT; ++t) {
        yv[t] = LoadU256(a[t].qs + 32 * b);
        corr[t] = W::kOffset != 0 ? _mm256_maddubs_epi16(off, yv[t]) : _mm256_setzero_si256();
      }
      for (int r = 0; r < NR; ++r) {
        const uint8_t* p = w + r * rb + b * W::kBytes;
        _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
        const __m256i wv = W::Levels(p);
        const float dw = LoadF16(p);
        for (int t = 0; t < NT; ++t) {
          __m256i p16 = _mm256_maddubs_epi16(wv, yv[t]);
          if constexpr (W::kOffset != 0) p16 = _mm256_sub_epi16(p16, corr[t]);
          const __m256 dot = _mm256_cvtepi32_ps(SumPairs16(p16));
          acc[r][t] = _mm256_fmadd_ps(dot, _mm256_set1_ps(dw * a[t].d[b]), acc[r][t]);
          if constexpr (W::kMin >= 0) acc_min[r][t] += LoadF16(p + W::kMin) * a[t].s[b];
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = HsumPs(acc[r][t]) + acc_min[r][t];
    }
  }
};

// Signed levels of one block: Q8_0's bytes as they are, IQ4_NL's grid values.
struct Q8_0S {
  static constexpr int kBytes = 34;
  static __m256i Levels(const uint8_t* p) { return LoadU256(p + 2); }
};
struct IQ4_NLS {
  static constexpr int kBytes = 18;
  static __m256i Levels(const uint8_t* p) {
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_setr_epi8(
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
    return _mm256_shuffle_epi8(grid, Nibbles32(p + 2));
  }
};

template <typename W>
struct Signed32 {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;
  static constexpr int kBytes = W::kBytes;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    const int64_t nb = cols / 32;
    __m256 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const uint64_t ahead = PrefetchAhead(NR * rb);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i yv[NT];
      for (int t = 0; t < NT; ++t) yv[t] = LoadU256(a[t].qs + 32 * b);
      for (int r = 0; r < NR; ++r) {
        const uint8_t* p = w + r * rb + b * kBytes;
        _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
        const __m256i wv = W::Levels(p);
        const __m256i wabs = _mm256_sign_epi8(wv, wv);
        const float dw = LoadF16(p);
        for (int t = 0; t < NT; ++t) {
          const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(yv[t], wv));
          const __m256 dot = _mm256_cvtepi32_ps(SumPairs16(p16));
          acc[r][t] = _mm256_fmadd_ps(dot, _mm256_set1_ps(dw * a[t].d[b]), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = HsumPs(acc[r][t]);
    }
  }
};

}  // namespace

void FillLegacy(MatmulImpl* impl) {
  impl->tiles[static_cast<int>(GgmlType::kQ4_0)] = MakeTile<Unsigned32<Q4_0W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ4_1)] = MakeTile<Unsigned32<Q4_1W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_0)] = MakeTile<Unsigned32<Q5_0W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ5_1)] = MakeTile<Unsigned32<Q5_1W>>();
  impl->tiles[static_cast<int>(GgmlType::kQ8_0)] = MakeTile<Signed32<Q8_0S>>();
  impl->tiles[static_cast<int>(GgmlType::kIQ4_NL)] = MakeTile<Signed32<IQ4_NLS>>();
}

}  // namespace lifeline::kernels::avx2
