// IQ4_NL reference (de)quantization (ggml's block_iq4_nl): 32 values per block, an f16 scale
// and 16 bytes of 4-bit indices into kIq4nlValues (quant_blocks.h).
//
// Quantization follows ggml's quantize_row_iq4_nl_ref without an importance matrix: per
// block, each value weighted by x^2, a first scale from the largest magnitude, then 15 trial
// scales around it (the grid's end value shifted by -7 ... +7) keeping the one with the
// smallest weighted error, and the indices of the final scale.
#include <cmath>
#include <cstring>

#include "engine/kernels/fp16.h"
#include "engine/kernels/ref/quant_blocks.h"
#include "engine/kernels/ref/quants_ref_internal.h"

namespace lifeline::ref::internal {
namespace {

constexpr int kBlock = 32;
constexpr int kTries = 7;
constexpr float kGroupMaxEps = 1e-15f;

// The index of the grid value nearest x (ties to the lower one), by bisection.
int BestIndex(float x) {
  const int8_t* v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) hi = mid; else lo = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// sumqx / sumq2 of the weighted least-squares fit for inverse scale id.
void Fit(const float* x, const float* w, float id, float* sumqx, float* sumq2) {
  *sumqx = *sumq2 = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float q = kIq4nlValues[BestIndex(id * x[j])];
    *sumqx += w[j] * q * x[j];
    *sumq2 += w[j] * q * q;
  }
}

}  // namespace

void DequantizeRowIQ4NL(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kBlock; ++i) {
    const auto b = LoadBlock<BlockIQ4_NL>(src, i);
    const float d = Fp16ToFp32(b.d);
    float* y = dst + i * kBlock;  // [32]
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4nlValues[b.qs[j] & 0x0f];
      y[j + 16] = d * kIq4nlValues[b.qs[j] >> 4];
    }
  }
}

void QuantizeRowIQ4NL(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kBlock; ++i) {
    const float* x = src + i * kBlock;  // [32]
    float w[kBlock];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      w[j] = x[j] * x[j];
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    BlockIQ4_NL b;
    std::memset(&b, 0, sizeof(b));
    float d = 0.0f;
    if (amax >= kGroupMaxEps) {
      d = -max / kIq4nlValues[0];
      float sumqx, sumq2;
      Fit(x, w, 1.0f / d, &sumqx, &sumq2);
      d = sumqx / sumq2;
      float best = d * sumqx;
      for (int itry = -kTries; itry <= kTries; ++itry) {
        Fit(x, w, (static_cast<float>(itry) + kIq4nlValues[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
    }
    b.d = Fp32ToFp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      b.qs[j] = static_cast<uint8_t>(BestIndex(id * x[j]) | (BestIndex(id * x[j + 16]) << 4));
    }
    StoreBlock(b, dst, i);
  }
}

}  // namespace lifeline::ref::internal
