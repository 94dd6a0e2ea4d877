// Element-wise transformer ops as plain scalar loops (the compiler vectorises them at -O3):
// RMSNorm, RoPE, SwiGLU / GeGLU, soft-capping, residual add. They know nothing about the model graph, so they can
// move into the kernel table later without changing callers.
//
// Thread-safety: pure functions on caller-owned buffers. Failure: none (shapes are validated
// at load time; a violation is a programming error).
#pragma once

#include <cstdint>

#include "engine/model/model_config.h"

namespace lifeline::ops {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]. x, weight, out: [n]. out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

struct RopeParams {
  int64_t rope_dim = 0;            // rotated leading dims of each head (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;         // linear position scaling
  const float* freq_factors = nullptr;  // [rope_dim/2] divisors, or null
  RopeLayout layout = RopeLayout::kNormal;
  float attn_factor = 1.0f;        // multiplies cos and sin (ggml's mscale; LongRoPE)
};

// The rope of a context of n_ctx positions (which LongRoPE factors apply depends on it), for
// the global layers or (swa) the sliding-window layers.
RopeParams RopeParamsFrom(const ModelConfig& config, int64_t n_ctx, bool swa = false);

// Angles for one position: theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i;
// cos_out = attn_factor * cos(theta), sin_out = attn_factor * sin(theta).
// cos_out, sin_out: [rope_dim/2].
void RopeAngles(int64_t pos, const RopeParams& p, float* cos_out, float* sin_out);

// Rotates the first rope_dim dims of every head in place. x: [n_heads, head_dim].
// Normal layout pairs (2i, 2i+1); NeoX pairs (i, i + rope_dim/2). cos, sin: [rope_dim/2].
void ApplyRope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p,
               const float* cos, const float* sin);

// gate[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + exp(-z)). gate, up: [n].
void SwiGlu(float* gate, const float* up, int64_t n);

// gate[i] = gelu(gate[i]) * up[i] with the tanh approximation of GELU,
// gelu(z) = z / 2 * (1 + tanh(sqrt(2 / pi) * (z + 0.044715 z^3))). gate, up: [n].
void GeluTanhGlu(float* gate, const float* up, int64_t n);

// x[i] = cap * tanh(x[i] / cap) (logit soft-capping), cap > 0. x: [n].
void SoftCap(float* x, int64_t n, float cap);

// y[i] += x[i]. y, x: [n].
void AddInPlace(float* y, const float* x, int64_t n);

}  // namespace lifeline::ops
