// Helpers for the matmul parity tests: seeded random weights (quantized with ref::QuantizeRow,
// or raw random block bytes with sane scales), and three independent references for
// y[t, r] = sum_c W[r, c] x[t, c]:
//   TwinMatmul     - the scalar twins (ref::QuantizeToken + ref::VecDot), one thread, no driver
//   DequantMatmul  - ref::DequantizeRow weights, unquantized x, f64 accumulation
//   magnitude / activation-quantization bounds to scale the tolerances.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/ggml_type.h"
#include "engine/kernels/kernel_table.h"

namespace lifeline::testing {

// Float accumulation order differs between the twin and the SIMD kernels (lanes, tiles);
// each order's rounding error is ~sqrt(n) * 2^-24 of sum |terms| in practice (n <= 4096:
// < 4e-6), so 1e-5 of the magnitude is tight yet safe. Integer mistakes are off by whole
// products, orders of magnitude beyond this.
inline constexpr double kTwinRelTol = 1e-5;
// Absolute floor for outputs whose magnitude is ~0 (an all-zero activation block).
inline constexpr double kAbsFloor = 1e-6;
// Written past the end of y: any change means a kernel wrote out of bounds.
inline constexpr float kGuard = -12345.0f;

// The kernel levels this CPU supports, lowest first (the parity tests run each).
std::vector<IsaLevel> SupportedLevels();

std::vector<float> RandomNormal(uint32_t seed, int64_t n, float sigma = 1.0f);

// rows x cols weights drawn N(0, 1), quantized row by row with ref::QuantizeRow.
std::vector<uint8_t> QuantizedRandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                            uint32_t seed);
// Uniformly random bytes, except the f16 scale fields (and F16/BF16 values), which get finite
// values of moderate size: exercises every bit pattern of the packed levels and scales.
std::vector<uint8_t> RandomBlockBytes(GgmlType type, int64_t rows, int64_t cols, uint32_t seed);

WeightMatrix View(GgmlType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols);

// [n_tokens, rows]
std::vector<float> TwinMatmul(const WeightMatrix& w, const float* x, int64_t n_tokens);
std::vector<double> DequantMatmul(const WeightMatrix& w, const float* x, int64_t n_tokens);
// sum_c |W[r, c] * x[t, c]| with dequantized W: the scale of float rounding error. [n_tokens, rows]
std::vector<double> AbsMagnitude(const WeightMatrix& w, const float* x, int64_t n_tokens);
// An upper bound on |TwinMatmul - DequantMatmul| from rounding the activations to the
// weight type's activation format (see the .cpp for the derivation). [n_tokens, rows]
std::vector<double> ActQuantBound(const WeightMatrix& w, const float* x, int64_t n_tokens);

}  // namespace lifeline::testing
