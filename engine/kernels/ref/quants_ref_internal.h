// Per-type entry points behind ref::DequantizeRow / ref::QuantizeRow (quants_ref.h), split
// across quants_ref.cpp (float and 32-value block types) and quants_ref_k.cpp (K-quants), the
// K-quant scale searches (quants_search_ref.cpp) and the rounding they share. Internal to
// engine/kernels/ref.
//
// Every function takes a row of n values, n a multiple of the type's block size (checked by
// the dispatcher), reads/writes exactly RowBytes(type, n) bytes of blocks, and allocates
// nothing. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace lifeline::ref::internal {

// Round to nearest, ties to even, for |x| <= 2^22 (ggml's nearest_int): adding 1.5 * 2^23
// puts the integer part in the low mantissa bits, and the FPU's default rounding does the
// rest. Kept bit-for-bit identical to ggml (rather than std::lrintf) because the K-quant
// searches can feed it out-of-range values whose garbage result must match too.
inline int NearestInt(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Block i of a row, copied out of / into possibly unaligned bytes (blocks have no alignment
// guarantee inside a GGUF mapping).
template <typename Block>
Block LoadBlock(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(Block)),
              sizeof(Block));
  return b;
}

template <typename Block>
void StoreBlock(const Block& b, void* dst, int64_t i) {
  std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(Block)), &b,
              sizeof(Block));
}

// ---- Scale searches (quants_search_ref.cpp) ---------------------------------------------
// Each fits one group of n values; L receives the stored (offset, non-negative) levels.

// Symmetric levels in [0, 2*nmax): value ~= scale * (L - nmax). Tries 19 scales around
// -nmax / max and keeps the best x^2-weighted least-squares fit (ggml make_qx_quants,
// rmse_type 1). Returns the scale (0 for an all-zero group, then L is all 0).
float FitSymmetricScale(int n, int nmax, const float* x, int8_t* L);
// As above but refines the levels by coordinate descent (ggml make_q3_quants with rmse).
float FitSymmetricScaleIterative(int n, int nmax, const float* x, int8_t* L);

struct ScaleMinSearch {
  float rmin;    // first candidate spacing offset (levels nmax + rmin)
  float rdelta;  // step between candidates
  int n_steps;   // candidates rmin, rmin + rdelta, ..., rmin + n_steps * rdelta
  bool use_mad;  // weighted absolute error instead of squared error
};
// Asymmetric levels in [0, nmax]: value ~= scale * L - neg_min, neg_min >= 0. weights: [n].
// L_scratch: [n] scratch. Returns the scale (ggml make_qkx2_quants).
float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* neg_min, uint8_t* L_scratch, const ScaleMinSearch& search);

// ---- K-quant rows (quants_ref_k.cpp) ----------------------------------------------------
void DequantizeRowIQ4NL(const void* src, float* dst, int64_t n);
void QuantizeRowIQ4NL(const float* src, void* dst, int64_t n);
void DequantizeRowQ2K(const void* src, float* dst, int64_t n);
void DequantizeRowQ3K(const void* src, float* dst, int64_t n);
void DequantizeRowQ4K(const void* src, float* dst, int64_t n);
void DequantizeRowQ5K(const void* src, float* dst, int64_t n);
void DequantizeRowQ6K(const void* src, float* dst, int64_t n);
void DequantizeRowQ8K(const void* src, float* dst, int64_t n);

void QuantizeRowQ2K(const float* src, void* dst, int64_t n);
void QuantizeRowQ3K(const float* src, void* dst, int64_t n);
void QuantizeRowQ4K(const float* src, void* dst, int64_t n);
void QuantizeRowQ5K(const float* src, void* dst, int64_t n);
void QuantizeRowQ6K(const float* src, void* dst, int64_t n);
void QuantizeRowQ8K(const float* src, void* dst, int64_t n);

}  // namespace lifeline::ref::internal
