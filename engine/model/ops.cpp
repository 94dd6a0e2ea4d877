#include "engine/model/ops.h"

#include <cmath>
#include <cstdint>

#include "engine/kernels/glu.h"

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

// The kernels' scalar twins: the model runs the KernelTable's entries (the same bits).
void SwiGlu(float* gate, const float* up, int64_t n) { ref::SiluGlu(gate, up, n); }

void GeluTanhGlu(float* gate, const float* up, int64_t n) { ref::GeluTanhGlu(gate, up, n); }

void SoftCap(float* x, int64_t n, float cap) {
  // tanh(y) = 2 / (1 + e^(-2y)) - 1: the same exp as the gated units; the absolute error
  // stays ~1e-7 (times cap), far below any logit difference that matters.
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = cap * (2.0f / (1.0f + kernels::ExpForGlu(-2.0f * x[i] * inv)) - 1.0f);
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace lifeline::ops
