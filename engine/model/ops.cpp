#include "engine/model/ops.h"

#include <cmath>

namespace lifeline::ops {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Note: the sum of squares is accumulated in double (as ggml does) so long rows do not
  // lose precision; the row itself stays f32.
  double sumsq = 0.0;
  for (int64_t i = 0; i < n; ++i) sumsq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sumsq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

RopeParams RopeParamsFrom(const ModelConfig& c) {
  RopeParams p;
  p.rope_dim = c.rope_dim;
  p.freq_base = c.rope_freq_base;
  p.freq_scale = c.rope_freq_scale;
  p.freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  p.layout = c.rope_layout;
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
    cos_out[i] = static_cast<float>(std::cos(theta));
    sin_out[i] = static_cast<float>(std::sin(theta));
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

void SwiGlu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace lifeline::ops
