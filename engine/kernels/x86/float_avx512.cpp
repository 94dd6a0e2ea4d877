// AVX-512 tiles for F32, F16 and BF16 weights.
//   F32:  16 weights per register, FMA against f32 activations.
//   F16:  vcvtph2ps widens 16 weights; activations were rounded to f16 values (kept as f32).
//   BF16: with AVX512_BF16, vdpbf16ps multiplies 32 bf16 pairs and adds them into 16 f32 lanes
//         (products of two bf16 values are exact in f32); without it both sides are widened
//         to f32 by a 16-bit shift and use FMA.
// Column tails (cols not a multiple of the vector width) use masked loads, which never touch
// memory beyond the row.
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {
namespace {

static inline __mmask16 TailMask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

struct F32W {
  static constexpr int kStep = 16;
  static constexpr int kValueBytes = 4;
  static __m512 W(const uint8_t* row, int64_t c) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c); }
  static __m512 WTail(const uint8_t* row, int64_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  }
};

struct F16W {
  static constexpr int kStep = 16;
  static constexpr int kValueBytes = 2;
  static __m512 W(const uint8_t* row, int64_t c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
  static __m512 WTail(const uint8_t* row, int64_t c, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};

// F32 and F16 weights against f32 activation rows (a[t].f).
template <typename W>
struct FloatFma {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const uint64_t ahead = PrefetchAhead(NR * rb);
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16) {
      __m512 xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = _mm512_loadu_ps(a[t].f + c);
      for (int r = 0; r < NR; ++r) {
        // 16 values advance at most one line per row and step.
        _mm_prefetch(reinterpret_cast<const char*>(w + r * rb + W::kValueBytes * c + ahead), _MM_HINT_T0);
        const __m512 wv = W::W(w + r * rb, c);
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
    if (c < cols) {
      const __mmask16 m = TailMask16(cols - c);
      __m512 xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, a[t].f + c);
      for (int r = 0; r < NR; ++r) {
        const __m512 wv = W::WTail(w + r * rb, c, m);
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

// bf16 -> f32 is a 16-bit left shift of the bit pattern.
static inline __m512 WidenBf16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

struct Bf16Widen {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const uint64_t ahead = PrefetchAhead(NR * rb);
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 m = cols - c >= 16 ? static_cast<__mmask16>(0xffff) : TailMask16(cols - c);
      __m512 xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = WidenBf16(_mm256_maskz_loadu_epi16(m, a[t].bf + c));
      for (int r = 0; r < NR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w + r * rb + 2 * c + ahead), _MM_HINT_T0);
        const __m512 wv = WidenBf16(_mm256_maskz_loadu_epi16(m, w + r * rb + 2 * c));
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

struct Bf16Dot {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const uint64_t ahead = PrefetchAhead(NR * rb);
    for (int64_t c = 0; c < cols; c += 32) {
      const int64_t left = cols - c;
      const __mmask32 m = left >= 32 ? 0xffffffffu : static_cast<__mmask32>((1ull << left) - 1);
      __m512bh xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, a[t].bf + c);
      for (int r = 0; r < NR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w + r * rb + 2 * c + ahead), _MM_HINT_T0);
        const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * rb + 2 * c);
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

}  // namespace

void FillFloat(MatmulImpl* impl, bool use_bf16_dot) {
  impl->tiles[static_cast<int>(GgmlType::kF32)] = MakeTile<FloatFma<F32W>>();
  impl->tiles[static_cast<int>(GgmlType::kF16)] = MakeTile<FloatFma<F16W>>();
  impl->tiles[static_cast<int>(GgmlType::kBF16)] =
      use_bf16_dot ? MakeTile<Bf16Dot>() : MakeTile<Bf16Widen>();
}

}  // namespace lifeline::kernels::avx512
