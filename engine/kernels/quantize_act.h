// Activation quantization: before a matmul, every token row of x is converted once into the
// format the weight type's dot product consumes, the way ggml does it (its "vec_dot_type"):
//   Q4_0, Q5_0, Q8_0, IQ4_NL weights -> Q8_0 activations (32-value blocks, f16-rounded scale)
//   Q4_1, Q5_1 weights       -> Q8_1 activations (as Q8_0 plus s = f16(d * sum(q)))
//   K-quant weights          -> Q8_K activations (256-value blocks, f32 scale, sums of 16)
//   F16 weights              -> x rounded to f16 (kept as f32 values so no re-conversion)
//   BF16 weights             -> x rounded to bf16 (raw bits, the operand of vdpbf16ps)
//   F32 weights              -> x itself (borrowed, no copy)
// The quantized values (and therefore the integer parts of every dot product) are identical
// across ISA levels; only the float accumulation order of the kernels differs.
//
// Ownership: QuantizedActs owns its buffers (allocated by Reset, reused when a call site keeps
// one around) except for kF32, where it borrows x. Thread-safety: Reset is single-threaded;
// QuantizeTokens may run concurrently for disjoint token ranges; reads are free for all.
// Failure: none (shapes are the matmul's, validated at model load; violations are checks).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/ggml_type.h"

namespace lifeline {

enum class ActFormat : uint8_t { kF32, kF16, kBf16, kQ8_0, kQ8_1, kQ8_K };

// Block size in values of each format (1 for the float formats).
int64_t ActBlockElems(ActFormat format);
// The activation format the dot product of a weight type consumes.
ActFormat ActFormatFor(GgmlType weight_type);

// One token row of quantized activations, as the dot-product kernels read it. Only the
// fields of the row's format are set; the others are null.
struct ActRow {
  const int8_t* qs = nullptr;    // Q8_*: [cols] quantized values, |q| <= 127
  const float* d = nullptr;      // Q8_*: [n_blocks] block scales
  const float* s = nullptr;      // Q8_1: [n_blocks] f16(d * sum(q of the block))
  const int32_t* isum = nullptr;  // Q8_0/Q8_1: [n_blocks] sum(q of the block)
  const int16_t* bsums = nullptr;  // Q8_K: [n_blocks * 16] sums of each 16 consecutive q
  const float* f = nullptr;      // F32: [cols] x itself; F16: [cols] x rounded to f16
  const uint16_t* bf = nullptr;  // BF16: [cols] x rounded to bf16 (raw bits)
};

// Writable view of one token row, for the quantizers.
struct ActRowMut {
  int8_t* qs = nullptr;
  float* d = nullptr;
  float* s = nullptr;
  int32_t* isum = nullptr;
  int16_t* bsums = nullptr;
  float* f = nullptr;
  uint16_t* bf = nullptr;
};

class QuantizedActs {
 public:
  // Sizes the buffers for n_tokens rows of cols values (cols a multiple of the format's
  // block size). For kF32, x is borrowed and must outlive every read; otherwise x is unused.
  void Reset(ActFormat format, int64_t n_tokens, int64_t cols, const float* x);

  ActFormat format() const { return format_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t cols() const { return cols_; }
  int64_t n_blocks() const { return n_blocks_; }  // per token row
  ActRow Row(int64_t t) const;

  // Mutable row storage for the quantizers (same layout as ActRow). Defined out of line so
  // ISA-specific files never instantiate std::vector code with their own compile flags.
  ActRowMut MutRow(int64_t t);

 private:
  ActFormat format_ = ActFormat::kF32;
  int64_t n_tokens_ = 0;
  int64_t cols_ = 0;
  int64_t n_blocks_ = 0;
  const float* x_ = nullptr;     // kF32: borrowed [n_tokens, cols]
  std::vector<int8_t> qs_;       // [n_tokens, cols]
  std::vector<float> d_;         // [n_tokens, n_blocks]
  std::vector<float> s_;         // [n_tokens, n_blocks]
  std::vector<int32_t> isum_;    // [n_tokens, n_blocks]
  std::vector<int16_t> bsums_;   // [n_tokens, n_blocks * 16]
  std::vector<float> f_;         // [n_tokens, cols]
  std::vector<uint16_t> bf_;     // [n_tokens, cols]
};

// Quantizes token row t of x ([cols] f32) into acts (format and shape from Reset).
using QuantizeTokenFn = void (*)(const float* x_row, QuantizedActs& acts, int64_t t);

namespace ref {
// Scalar quantizers: the specification every SIMD quantizer must reproduce bit for bit.
//   Q8_0 / Q8_1 (ggml's x86 quantize_row_q8_0/_1): amax = max|x|; d = amax / 127;
//     id = amax != 0 ? 127 / amax : 0; q = round-half-even(x * id); the stored scale is
//     f16(d); isum = sum(q). Q8_1 also stores s = f16(d * isum). A block whose f16(d) is 0
//     stores q = 0 and s = 0 (it contributes nothing either way; this keeps inf/NaN out of
//     the ints).
//   Q8_K (ggml's quantize_row_q8_K_ref): max = the value of largest magnitude (first one on
//     ties); iscale = -127 / max; q = min(127, round-half-even(iscale * x)); d = 1 / iscale;
//     bsums[j] = sum of q[16j .. 16j+15]. An all-zero block (or one whose iscale is not
//     finite) stores d = 0 and q = 0.
//   F16 / BF16: round to nearest even (fp16.h).
void QuantizeToken(const float* x_row, QuantizedActs& acts, int64_t t);
}  // namespace ref

}  // namespace lifeline
