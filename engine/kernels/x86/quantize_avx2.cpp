// AVX2 activation quantizers; bit-identical to ref::QuantizeToken (see quantize_avx512.cpp
// for why the operations agree). Q8_K and BF16 stay scalar-shaped loops (compiled here with
// AVX2, same IEEE operations).
#include "engine/kernels/x86/avx2_kernels.h"
#include "engine/kernels/x86/avx2_util.h"

namespace lifeline::kernels::avx2 {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

static inline float RoundToF16(float x) {
  return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

static inline __m256 Abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float HmaxPs(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 8 int32 in [-127, 127] -> 8 bytes at dst.
static inline void Store8(int8_t* dst, __m256i q) {
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(w16, w16));
}

void QuantizeQ8_32(const float* x, QuantizedActs& acts, int64_t t, bool with_sum) {
  const ActRowMut m = acts.MutRow(t);
  const int64_t nb = acts.n_blocks();
  for (int64_t b = 0; b < nb; ++b) {
    __m256 v[4];
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
      vmax = _mm256_max_ps(vmax, Abs(v[k]));
    }
    const float amax = HmaxPs(vmax);
    const float dv = amax / 127.0f;
    const float d16 = RoundToF16(dv);
    __m256i sum = _mm256_setzero_si256();
    if (d16 == 0.0f) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(m.qs + 32 * b), _mm256_setzero_si256());
    } else {
      const __m256 id = _mm256_set1_ps(127.0f / amax);
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), kRound));
        Store8(m.qs + 32 * b + 8 * k, q);
        sum = _mm256_add_epi32(sum, q);
      }
    }
    const int32_t isum = HsumEpi32(sum);
    m.d[b] = d16;
    m.isum[b] = isum;
    if (with_sum) m.s[b] = d16 == 0.0f ? 0.0f : RoundToF16(dv * static_cast<float>(isum));
  }
}

void QuantizeQ8K(const float* x, QuantizedActs& acts, int64_t t) {
  const ActRowMut m = acts.MutRow(t);
  const int64_t nb = acts.n_blocks();
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 256 * b;
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = xb[j] < 0 ? -xb[j] : xb[j];
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    int8_t* qb = m.qs + 256 * b;
    int16_t* bs = m.bsums + 16 * b;
    if (amax == 0.0f || !(iscale - iscale == 0.0f)) {
      m.d[b] = 0.0f;
      std::memset(qb, 0, 256);
      std::memset(bs, 0, 32);
      continue;
    }
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int g = 0; g < 16; ++g) {
      __m256i s = _mm256_setzero_si256();
      for (int k = 0; k < 2; ++k) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + 16 * g + 8 * k), is);
        const __m256i q = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, kRound)), cap);
        Store8(qb + 16 * g + 8 * k, q);
        s = _mm256_add_epi32(s, q);
      }
      bs[g] = static_cast<int16_t>(HsumEpi32(s));
    }
    m.d[b] = 1.0f / iscale;
  }
}

void QuantizeF16(const float* x, QuantizedActs& acts, int64_t t) {
  float* f = acts.MutRow(t).f;
  const int64_t n = acts.cols();
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    _mm256_storeu_ps(f + c, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + c), _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; c < n; ++c) f[c] = RoundToF16(x[c]);
}

// Round to nearest even on the bit pattern, NaN kept quiet (the scalar Fp32ToBf16).
void QuantizeBf16(const float* x, QuantizedActs& acts, int64_t t) {
  uint16_t* out = acts.MutRow(t).bf;
  const int64_t n = acts.cols();
  for (int64_t c = 0; c < n; ++c) {
    uint32_t bits;
    std::memcpy(&bits, x + c, 4);
    out[c] = (bits & 0x7fffffffu) > 0x7f800000u
                 ? static_cast<uint16_t>((bits >> 16) | 64)
                 : static_cast<uint16_t>((bits + (0x7fffu + ((bits >> 16) & 1))) >> 16);
  }
}

void QuantizeTokenAvx2(const float* x, QuantizedActs& acts, int64_t t) {
  switch (acts.format()) {
    case ActFormat::kF32: break;
    case ActFormat::kF16: QuantizeF16(x, acts, t); break;
    case ActFormat::kBf16: QuantizeBf16(x, acts, t); break;
    case ActFormat::kQ8_0: QuantizeQ8_32(x, acts, t, false); break;
    case ActFormat::kQ8_1: QuantizeQ8_32(x, acts, t, true); break;
    case ActFormat::kQ8_K: QuantizeQ8K(x, acts, t); break;
  }
}

}  // namespace

void FillQuantizers(MatmulImpl* impl) {
  for (auto& q : impl->quantize) q = &QuantizeTokenAvx2;
}

}  // namespace lifeline::kernels::avx2
