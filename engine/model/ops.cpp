#include "engine/model/ops.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lifeline::ops {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Note: the sum of squares is accumulated in double (as ggml does) so long rows do not
  // lose precision; the row itself stays f32. Eight partial sums, not one: a single chain
  // waits on the add latency for every element (2.0 us for a 2048-wide row here, 0.9 with
  // eight; a decode token runs 45 of them on the critical path). In double, the order of
  // the additions moves the sum by ~1e-16 relative, far below the f32 scale it feeds.
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  double sumsq = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) sumsq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sumsq / static_cast<double>(n) + eps));
  for (int64_t j = 0; j < n; ++j) out[j] = x[j] * scale * weight[j];
}

RopeParams RopeParamsFrom(const ModelConfig& c, int64_t n_ctx, bool swa) {
  RopeParams p;
  p.rope_dim = c.rope_dim;
  p.freq_base = swa ? c.rope_freq_base_swa : c.rope_freq_base;
  p.freq_scale = swa ? c.rope_freq_scale_swa : c.rope_freq_scale;
  const std::vector<float>& factors = c.RopeFactorsFor(n_ctx);
  p.freq_factors = factors.empty() ? nullptr : factors.data();
  p.layout = c.rope_layout;
  p.attn_factor = c.rope_attn_factor;
  return p;
}

void RopeAngles(int64_t pos, const RopeParams& p, float* cos_out, float* sin_out) {
  const int64_t half = p.rope_dim / 2;
  // Angles in double: positions reach millions and an f32 product would lose the phase.
  const double scaled_pos = static_cast<double>(pos) * p.freq_scale;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq =
        std::pow(static_cast<double>(p.freq_base), -2.0 * static_cast<double>(i) / p.rope_dim);
    double theta = scaled_pos * inv_freq;
    if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
    cos_out[i] = static_cast<float>(std::cos(theta)) * p.attn_factor;
    sin_out[i] = static_cast<float>(std::sin(theta)) * p.attn_factor;
  }
}

void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p,
               const float* cos, const float* sin) {
  const int64_t half = p.rope_dim / 2;
  // Pair (a, b) of rotation i: normal layout interleaves, NeoX splits the rotated dims.
  const int64_t stride_a = p.layout == RopeLayout::kNormal ? 2 : 1;
  const int64_t offset_b = p.layout == RopeLayout::kNormal ? 1 : half;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float* a = v + i * stride_a;
      float* b = a + offset_b;
      const float x0 = *a;
      const float x1 = *b;
      *a = x0 * cos[i] - x1 * sin[i];
      *b = x0 * sin[i] + x1 * cos[i];
    }
  }
}

namespace {

// e^x without a library call (std::exp is one call per element: the largest single-threaded
// cost of a decode step before this). Cody-Waite reduction x = n ln2 + r with |r| <= ln2 / 2,
// Cephes' degree-6 expf polynomial for e^r (relative error ~2e-7), 2^n from the exponent
// bits. Below -87 x is clamped (e^x stays a normal float; 1 + e^x rounds to 1 either way);
// above 88 the result is +inf, as std::exp overflows there too, so silu gives -0 like the
// library version. NaN passes through. The selects are written the way SSE's max/min/blend
// compute them, so the 4-wide loop in SwiGlu and this scalar form give identical bits.
constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: x + it - it rounds x to an integer
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float ExpForSilu(float x_in) {
  float x = kExpLo > x_in ? kExpLo : x_in;  // maxps(lo, x): NaN keeps x
  x = kExpHi < x ? kExpHi : x;               // minps(hi, x)
  const float n = (x * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = kP[0];
  for (int k = 1; k < 6; ++k) p = p * r + kP[k];
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  const float e = er * std::bit_cast<float>(bits);
  return x_in > kExpHi ? std::numeric_limits<float>::infinity() : e;
}

// gate[i] = gate[i] * sigmoid(z(gate[i])) * up[i], with z(g) = g (SiLU) or
// z(g) = 2 sqrt(2/pi) (g + 0.044715 g^3) (tanh-GELU: z/2 (1 + tanh(y)) = z sigmoid(2y)).
template <bool kGelu>
void GatedUnit(float* gate, const float* up, int64_t n) {
  constexpr float kGeluK = 1.5957691216057308f;  // 2 sqrt(2 / pi)
  constexpr float kGeluC = 0.044715f;
  int64_t i = 0;
#if defined(__SSE2__)
  // The scalar ExpForSilu, four lanes at a time (GCC keeps the scalar selects as branches,
  // which stops it from vectorizing the loop itself).
  const __m128 lo = _mm_set1_ps(kExpLo), hi = _mm_set1_ps(kExpHi);
  const __m128 one = _mm_set1_ps(1.0f), sign = _mm_set1_ps(-0.0f);
  const __m128 inf = _mm_set1_ps(std::numeric_limits<float>::infinity());
  for (; i + 4 <= n; i += 4) {
    const __m128 g = _mm_loadu_ps(gate + i);
    __m128 z = g;
    if constexpr (kGelu) {
      const __m128 g3 = _mm_mul_ps(_mm_mul_ps(g, g), g);
      z = _mm_mul_ps(_mm_set1_ps(kGeluK), _mm_add_ps(g, _mm_mul_ps(_mm_set1_ps(kGeluC), g3)));
    }
    const __m128 x_in = _mm_xor_ps(z, sign);  // -z
    const __m128 x = _mm_min_ps(hi, _mm_max_ps(lo, x_in));
    const __m128 nf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(x, _mm_set1_ps(kLog2e)),
                                            _mm_set1_ps(kRoundMagic)),
                                 _mm_set1_ps(kRoundMagic));
    const __m128 r = _mm_sub_ps(_mm_sub_ps(x, _mm_mul_ps(nf, _mm_set1_ps(kLn2Hi))),
                                _mm_mul_ps(nf, _mm_set1_ps(kLn2Lo)));
    __m128 p = _mm_set1_ps(kP[0]);
    for (int k = 1; k < 6; ++k) p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(kP[k]));
    const __m128 er = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(p, r), r), r), one);
    const __m128i bits =
        _mm_slli_epi32(_mm_add_epi32(_mm_cvttps_epi32(nf), _mm_set1_epi32(127)), 23);
    const __m128 e_fin = _mm_mul_ps(er, _mm_castsi128_ps(bits));
    const __m128 over = _mm_cmpgt_ps(x_in, hi);
    const __m128 e = _mm_or_ps(_mm_and_ps(over, inf), _mm_andnot_ps(over, e_fin));
    _mm_storeu_ps(gate + i, _mm_mul_ps(_mm_div_ps(g, _mm_add_ps(one, e)), _mm_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) {
    const float g = gate[i];
    const float z = kGelu ? kGeluK * (g + kGeluC * (g * g * g)) : g;
    gate[i] = g / (1.0f + ExpForSilu(-z)) * up[i];
  }
}

}  // namespace

void SwiGlu(float* gate, const float* up, int64_t n) { GatedUnit<false>(gate, up, n); }

void GeluTanhGlu(float* gate, const float* up, int64_t n) { GatedUnit<true>(gate, up, n); }

void SoftCap(float* x, int64_t n, float cap) {
  // tanh(y) = 2 / (1 + e^(-2y)) - 1: the same exp as the gated units; the absolute error
  // stays ~1e-7 (times cap), far below any logit difference that matters.
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = cap * (2.0f / (1.0f + ExpForSilu(-2.0f * x[i] * inv)) - 1.0f);
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace lifeline::ops
