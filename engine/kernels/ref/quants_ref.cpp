// Reference (de)quantization: the dispatcher, the float types and the 32-value block types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1). K-quants live in quants_ref_k.cpp.
//
// Arithmetic follows ggml's dequantize_row_* / quantize_row_*_ref expression by expression
// (same operand order, no fused multiply-add: this file is built without -mfma and in ISO
// mode, so the compiler does not contract), which makes the output bit-identical to theirs.
// Blocks are copied in and out with memcpy: rows come from file mappings at arbitrary offsets.
#include "engine/kernels/ref/quants_ref.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/ref/quant_blocks.h"
#include "engine/kernels/ref/quants_ref_internal.h"

namespace lifeline::ref {
namespace {

using internal::LoadBlock;
using internal::StoreBlock;

// ---- Float types ----------------------------------------------------------------------

void DequantizeRowF32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void DequantizeRowF16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = Fp16ToFp32(h);
  }
}

void DequantizeRowBF16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    dst[i] = Bf16ToFp32(b);
  }
}

void QuantizeRowF32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void QuantizeRowF16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Fp32ToFp16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

void QuantizeRowBF16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = Fp32ToBf16(src[i]);
    std::memcpy(p + 2 * i, &b, 2);
  }
}

// ---- 32-value blocks: dequantization ---------------------------------------------------
// Element j (< 16) of a block sits in the low nibble of qs[j], element j + 16 in the high
// nibble of the same byte.

void DequantizeRowQ4_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const auto b = LoadBlock<BlockQ4_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    float* y = dst + i * kQK4_0;  // [32]
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
      y[j + kQK4_0 / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeRowQ4_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    const auto b = LoadBlock<BlockQ4_1>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float m = Fp16ToFp32(b.m);
    float* y = dst + i * kQK4_1;  // [32]
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0x0f) * d + m;
      y[j + kQK4_1 / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

// The fifth bit of element j is bit j of qh (little-endian uint32).
int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}

void DequantizeRowQ5_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const auto b = LoadBlock<BlockQ5_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    float* y = dst + i * kQK5_0;  // [32]
    for (int j = 0; j < kQK5_0; ++j) y[j] = static_cast<float>(Q5Value(b.qs, qh, j) - 16) * d;
  }
}

void DequantizeRowQ5_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const auto b = LoadBlock<BlockQ5_1>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float m = Fp16ToFp32(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    float* y = dst + i * kQK5_1;  // [32]
    for (int j = 0; j < kQK5_1; ++j) y[j] = static_cast<float>(Q5Value(b.qs, qh, j)) * d + m;
  }
}

void DequantizeRowQ8_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const auto b = LoadBlock<BlockQ8_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int j = 0; j < kQK8_0; ++j) dst[i * kQK8_0 + j] = static_cast<float>(b.qs[j]) * d;
  }
}

void DequantizeRowQ8_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    const auto b = LoadBlock<BlockQ8_1>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int j = 0; j < kQK8_1; ++j) dst[i * kQK8_1 + j] = static_cast<float>(b.qs[j]) * d;
  }
}

// ---- 32-value blocks: quantization -----------------------------------------------------

// The value of largest magnitude, sign kept (first one wins on ties).
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// Symmetric 4/5-bit: the extreme value maps exactly to q = 0 (d = max / -2^(bits-1)), so the
// full negative range is used; the rest round half up via truncation of (v + offset + 0.5).
void QuantizeRowQ4_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* x = src + i * kQK4_0;  // [32]
    const float d = SignedAbsMax(x, kQK4_0) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b;
    b.d = Fp32ToFp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ4_1(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    const float* x = src + i * kQK4_1;  // [32]
    float min, max;
    MinMax(x, kQK4_1, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b;
    b.d = Fp32ToFp16(d);
    b.m = Fp32ToFp16(min);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    StoreBlock(b, dst, i);
  }
}

// Packs 32 five-bit values into the low-nibble array and the 32-bit high-bit mask.
void PackQ5(const int* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

void QuantizeRowQ5_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const float* x = src + i * kQK5_0;  // [32]
    const float d = SignedAbsMax(x, kQK5_0) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kQK5_0];
    for (int j = 0; j < kQK5_0; ++j) {
      q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    }
    BlockQ5_0 b;
    b.d = Fp32ToFp16(d);
    PackQ5(q, b.qs, b.qh);
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ5_1(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const float* x = src + i * kQK5_1;  // [32]
    float min, max;
    MinMax(x, kQK5_1, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kQK5_1];
    for (int j = 0; j < kQK5_1; ++j) {
      q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    }
    BlockQ5_1 b;
    b.d = Fp32ToFp16(d);
    b.m = Fp32ToFp16(min);
    PackQ5(q, b.qs, b.qh);
    StoreBlock(b, dst, i);
  }
}

// Q8_0 and Q8_1 use roundf (ties away from zero), unlike the K-quants' ties-to-even.
float AbsMax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

void QuantizeRowQ8_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;  // [32]
    const float d = AbsMax(x, kQK8_0) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = Fp32ToFp16(d);
    for (int j = 0; j < kQK8_0; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    StoreBlock(b, dst, i);
  }
}

void QuantizeRowQ8_1(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    const float* x = src + i * kQK8_1;  // [32]
    const float d = AbsMax(x, kQK8_1) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_1 b;
    b.d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += b.qs[j];
    }
    // s uses the unrounded f32 d, as ggml does.
    b.s = Fp32ToFp16(static_cast<float>(sum) * d);
    StoreBlock(b, dst, i);
  }
}

using DequantizeFn = void (*)(const void*, float*, int64_t);
using QuantizeFn = void (*)(const float*, void*, int64_t);

DequantizeFn DequantizerFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return &DequantizeRowF32;
    case GgmlType::kF16: return &DequantizeRowF16;
    case GgmlType::kBF16: return &DequantizeRowBF16;
    case GgmlType::kQ4_0: return &DequantizeRowQ4_0;
    case GgmlType::kQ4_1: return &DequantizeRowQ4_1;
    case GgmlType::kQ5_0: return &DequantizeRowQ5_0;
    case GgmlType::kQ5_1: return &DequantizeRowQ5_1;
    case GgmlType::kQ8_0: return &DequantizeRowQ8_0;
    case GgmlType::kQ8_1: return &DequantizeRowQ8_1;
    case GgmlType::kIQ4_NL: return &internal::DequantizeRowIQ4NL;
    case GgmlType::kQ2_K: return &internal::DequantizeRowQ2K;
    case GgmlType::kQ3_K: return &internal::DequantizeRowQ3K;
    case GgmlType::kQ4_K: return &internal::DequantizeRowQ4K;
    case GgmlType::kQ5_K: return &internal::DequantizeRowQ5K;
    case GgmlType::kQ6_K: return &internal::DequantizeRowQ6K;
    case GgmlType::kQ8_K: return &internal::DequantizeRowQ8K;
    default: return nullptr;
  }
}

QuantizeFn QuantizerFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return &QuantizeRowF32;
    case GgmlType::kF16: return &QuantizeRowF16;
    case GgmlType::kBF16: return &QuantizeRowBF16;
    case GgmlType::kQ4_0: return &QuantizeRowQ4_0;
    case GgmlType::kQ4_1: return &QuantizeRowQ4_1;
    case GgmlType::kQ5_0: return &QuantizeRowQ5_0;
    case GgmlType::kQ5_1: return &QuantizeRowQ5_1;
    case GgmlType::kQ8_0: return &QuantizeRowQ8_0;
    case GgmlType::kQ8_1: return &QuantizeRowQ8_1;
    case GgmlType::kIQ4_NL: return &internal::QuantizeRowIQ4NL;
    case GgmlType::kQ2_K: return &internal::QuantizeRowQ2K;
    case GgmlType::kQ3_K: return &internal::QuantizeRowQ3K;
    case GgmlType::kQ4_K: return &internal::QuantizeRowQ4K;
    case GgmlType::kQ5_K: return &internal::QuantizeRowQ5K;
    case GgmlType::kQ6_K: return &internal::QuantizeRowQ6K;
    case GgmlType::kQ8_K: return &internal::QuantizeRowQ8K;
    default: return nullptr;
  }
}

}  // namespace

bool CanDequantize(GgmlType type) { return DequantizerFor(type) != nullptr; }

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const DequantizeFn fn = DequantizerFor(type);
  LL_CHECK(fn != nullptr);
  LL_CHECK(n >= 0 && n % TypeTraits(type).block_elems == 0);
  fn(src, dst, n);
}

bool CanQuantize(GgmlType type) { return QuantizerFor(type) != nullptr; }

size_t QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  const QuantizeFn fn = QuantizerFor(type);
  LL_CHECK(fn != nullptr);
  const auto bytes = RowBytes(type, n);
  LL_CHECK(bytes.has_value());
  fn(src, dst, n);
  return static_cast<size_t>(*bytes);
}

}  // namespace lifeline::ref
