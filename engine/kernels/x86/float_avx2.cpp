// AVX2 tiles for F32, F16 (vcvtph2ps) and BF16 (widened by a 16-bit shift) weights: 8 values
// per register, FMA into f32. Column tails (cols % 8) run as a scalar loop with the same
// per-element conversions (F16C for f16, the shift for bf16).
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"

namespace lifeline::kernels::avx2 {
namespace {

struct F32W {
  static __m256 W8(const uint8_t* row, int64_t c) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c); }
  static float W1(const uint8_t* row, int64_t c) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  }
  static __m256 X8(const ActRow& a, int64_t c) { return _mm256_loadu_ps(a.f + c); }
  static float X1(const ActRow& a, int64_t c) { return a.f[c]; }
};

struct F16W {
  static __m256 W8(const uint8_t* row, int64_t c) { return _mm256_cvtph_ps(LoadU128(row + 2 * c)); }
  static float W1(const uint8_t* row, int64_t c) { return LoadF16(row + 2 * c); }
  static __m256 X8(const ActRow& a, int64_t c) { return _mm256_loadu_ps(a.f + c); }
  static float X1(const ActRow& a, int64_t c) { return a.f[c]; }
};

static inline float Bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
static inline __m256 WidenBf16(__m128i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

struct Bf16W {
  static __m256 W8(const uint8_t* row, int64_t c) { return WidenBf16(LoadU128(row + 2 * c)); }
  static float W1(const uint8_t* row, int64_t c) {
    uint16_t b;
    std::memcpy(&b, row + 2 * c, 2);
    return Bf16(b);
  }
  static __m256 X8(const ActRow& a, int64_t c) { return WidenBf16(LoadU128(a.bf + c)); }
  static float X1(const ActRow& a, int64_t c) { return Bf16(a.bf[c]); }
};

template <typename W>
struct FloatFma {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;

  template <int NR, int NT>
  static void Run(const uint8_t* w, uint64_t rb, const ActRow* a, int64_t cols, float* y,
                  int64_t ldy) {
    __m256 acc[NR][NT];
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      __m256 xv[NT];
      for (int t = 0; t < NT; ++t) xv[t] = W::X8(a[t], c);
      for (int r = 0; r < NR; ++r) {
        const __m256 wv = W::W8(w + r * rb, c);
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int t = 0; t < NT; ++t) {
        float s = HsumPs(acc[r][t]);
        for (int64_t k = c; k < cols; ++k) s += W::W1(w + r * rb, k) * W::X1(a[t], k);
        y[t * ldy + r] = s;
      }
    }
  }
};

}  // namespace

void FillFloat(MatmulImpl* impl) {
  impl->tiles[static_cast<int>(GgmlType::kF32)] = MakeTile<FloatFma<F32W>>();
  impl->tiles[static_cast<int>(GgmlType::kF16)] = MakeTile<FloatFma<F16W>>();
  impl->tiles[static_cast<int>(GgmlType::kBF16)] = MakeTile<FloatFma<Bf16W>>();
}

}  // namespace lifeline::kernels::avx2
