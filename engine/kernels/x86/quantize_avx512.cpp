// AVX-512 activation quantizers. Each reproduces ref::QuantizeToken (quantize_act.h) bit for
// bit: the same IEEE operations in the same order (max of |x| is order-independent, the
// products x * id are single roundings, vrndscaleps rounds half to even like the scalar magic
// constant, integer sums are exact). quantize_act_test checks the bytes.
#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/avx512_util.h"

namespace lifeline::kernels::avx512 {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

static inline float RoundToF16(float x) {
  return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

static inline __m512 Abs(__m512 v) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}

// Q8_0 / Q8_1: 32 values per block, two registers.
void QuantizeQ8_32(const float* x, QuantizedActs& acts, int64_t t, bool with_sum) {
  const ActRowMut m = acts.MutRow(t);
  const int64_t nb = acts.n_blocks();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(Abs(v0), Abs(v1)));
    const float dv = amax / 127.0f;
    const float d16 = RoundToF16(dv);
    int32_t sum = 0;
    if (d16 == 0.0f) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(m.qs + 32 * b), _mm256_setzero_si256());
    } else {
      const __m512 id = _mm512_set1_ps(127.0f / amax);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, id), kRound));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, id), kRound));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(m.qs + 32 * b), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(m.qs + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
      sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
    m.d[b] = d16;
    m.isum[b] = sum;
    if (with_sum) {
      const float sv = d16 == 0.0f ? 0.0f : RoundToF16(dv * static_cast<float>(sum));
      m.s[b] = sv;
    }
  }
}

// Q8_K: 256 values per block; max is the first value of largest magnitude.
void QuantizeQ8K(const float* x, QuantizedActs& acts, int64_t t) {
  const ActRowMut m = acts.MutRow(t);
  const int64_t nb = acts.n_blocks();
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 256 * b;
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < 256; j += 16) vmax = _mm512_max_ps(vmax, Abs(_mm512_loadu_ps(xb + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    float max = 0.0f;
    if (amax != 0.0f) {
      const __m512 va = _mm512_set1_ps(amax);
      for (int j = 0; j < 256; j += 16) {
        const __mmask16 hit = _mm512_cmp_ps_mask(Abs(_mm512_loadu_ps(xb + j)), va, _CMP_EQ_OQ);
        if (hit != 0) {
          max = xb[j + __builtin_ctz(hit)];
          break;
        }
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    int8_t* qb = m.qs + 256 * b;
    int16_t* bs = m.bsums + 16 * b;
    // Not finite: |max| is so small that 127 / max overflowed (scalar twin: same rule).
    if (amax == 0.0f || !(iscale - iscale == 0.0f)) {
      m.d[b] = 0.0f;
      for (int j = 0; j < 256; j += 64) _mm512_storeu_si512(qb + j, _mm512_setzero_si512());
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(bs), _mm256_setzero_si256());
      continue;
    }
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    for (int g = 0; g < 16; ++g) {
      const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xb + 16 * g), is);
      const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_roundscale_ps(v, kRound)), cap);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * g), _mm512_cvtepi32_epi8(q));
      bs[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    m.d[b] = 1.0f / iscale;
  }
}

void QuantizeF16(const float* x, QuantizedActs& acts, int64_t t) {
  float* f = acts.MutRow(t).f;
  const int64_t n = acts.cols();
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = n - c >= 16 ? static_cast<__mmask16>(0xffff)
                                    : static_cast<__mmask16>((1u << (n - c)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + c);
    const __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    _mm512_mask_storeu_ps(f + c, m, r);
  }
}

// Round to nearest even on the bit pattern, NaN kept quiet: the scalar Fp32ToBf16.
void QuantizeBf16(const float* x, QuantizedActs& acts, int64_t t) {
  uint16_t* out = acts.MutRow(t).bf;
  const int64_t n = acts.cols();
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = n - c >= 16 ? static_cast<__mmask16>(0xffff)
                                    : static_cast<__mmask16>((1u << (n - c)) - 1);
    const __m512i bits = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + c));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(64));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, abs_mask), inf);
    const __m512i r = _mm512_mask_mov_epi32(rounded, nan, quiet);
    _mm256_mask_storeu_epi16(out + c, m, _mm512_cvtepi32_epi16(r));
  }
}

void QuantizeTokenAvx512(const float* x, QuantizedActs& acts, int64_t t) {
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
  for (auto& q : impl->quantize) q = &QuantizeTokenAvx512;
}

}  // namespace lifeline::kernels::avx512
