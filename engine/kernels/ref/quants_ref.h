// Scalar reference (de)quantization for every supported GGUF weight type. These functions
// are the specification of each block layout (ggml's block_q4_0 ... block_q6_K); the SIMD
// kernels are tested against them.
//
// All functions: n is the number of values and must be a multiple of the type's block_elems
// (callers validate shapes at load time; a violation here is a programming error).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/ggml_type.h"

namespace lifeline::ref {

// True for the types DequantizeRow accepts (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, plus the activation types Q8_K and Q8_1). Block layouts:
// engine/kernels/ref/quant_blocks.h. Output is bit-identical to ggml's dequantize_row_*.
bool CanDequantize(GgmlType type);
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// True for the types QuantizeRow can produce (same list).
bool CanQuantize(GgmlType type);
// Round-to-nearest quantization matching ggml's quantize_row_*_ref (no importance matrix),
// byte for byte: files we write hold what llama.cpp's quantizer would write from the same
// f32 weights. Writes RowBytes(type, n) bytes; returns that count. The K-quants run a small
// scale search per sub-block (tens of passes over 16-32 values): meant for offline
// conversion and tests, not for per-token activation quantization.
size_t QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace lifeline::ref
