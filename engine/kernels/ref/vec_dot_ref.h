// Scalar twins of the SIMD dot products: one weight row in its GGUF block layout against one
// activation row quantized by QuantizeToken (quantize_act.h). These define the integer
// semantics every SIMD kernel must reproduce exactly (per-block integer sums); only the float
// accumulation order may differ (parity tests allow 1e-5 relative to sum |w*x|).
//
// Per block b (ggml's vec_dot_*_q8_* computes the same numbers):
//   Q4_0 / Q5_0 / Q8_0:  sum += (dw * dy) * isum,   isum = sum_j (qw_j - offset) * qy_j
//   IQ4_NL:              sum += (dw * dy) * isum,   isum = sum_j table[qw_j] * qy_j
//   Q4_1 / Q5_1:         sum += (dw * dy) * isum + mw * sy,   isum = sum_j qw_j * qy_j
//   Q4_K / Q5_K (8 sub-blocks of 32, 6-bit scale sc and min m):
//     sum += (dw * dy) * sum_j sc_j * dot_j - (dminw * dy) * sum_j m_j * (bsum_2j + bsum_2j+1)
//   Q6_K (16 sub-blocks of 16, int8 scale): sum += (dw * dy) * sum_g sc_g * dot(q - 32, qy)_g
//   Q3_K: sum += (dw * dy) * sum_g sc_g * dot(q3 - 4, qy)_g          (sc_g signed 6-bit)
//   Q2_K: sum += (dw * dy) * sum_g (sc_g & 15) * dot_g - (dminw * dy) * sum_g (sc_g >> 4) * bsum_g
//   F32 / F16 / BF16: sum of w_i * x_i in f32 (eight interleaved partial sums), x rounded to
//     the weight's type.
// where dw, dminw, mw are the weight's f16 scales and dy, sy the activation block's.
//
// Thread-safety: pure functions. Failure: a type without a twin is a programming error
// (check HasVecDot first).
#pragma once

#include <cstdint>

#include "engine/kernels/ggml_type.h"
#include "engine/kernels/quantize_act.h"

namespace lifeline::ref {

// True for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool HasVecDot(GgmlType type);

// w_row: one row of n values of `type` (RowBytes(type, n) bytes, any alignment).
// a: the token row in ActFormatFor(type), n values.
float VecDot(GgmlType type, const uint8_t* w_row, const ActRow& a, int64_t n);

}  // namespace lifeline::ref
