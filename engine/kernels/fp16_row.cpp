#include "engine/kernels/fp16_row.h"

#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"

namespace lifeline {

#if defined(LIFELINE_X86)
void Fp16ToFp32RowF16c(const uint16_t* src, float* dst, int64_t n);  // x86/fp16_row_avx2.cpp
void Fp32ToFp16RowF16c(const float* src, uint16_t* dst, int64_t n);
#endif

void Fp16ToFp32RowScalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n) {
  using Fn = void (*)(const uint16_t*, float*, int64_t);
  static const Fn fn = [] {
#if defined(LIFELINE_X86)
    if (DetectIsa() >= IsaLevel::kAvx2) return &Fp16ToFp32RowF16c;
#endif
    return &Fp16ToFp32RowScalar;
  }();
  fn(src, dst, n);
}

void Fp32ToFp16RowScalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n) {
  using Fn = void (*)(const float*, uint16_t*, int64_t);
  static const Fn fn = [] {
#if defined(LIFELINE_X86)
    if (DetectIsa() >= IsaLevel::kAvx2) return &Fp32ToFp16RowF16c;
#endif
    return &Fp32ToFp16RowScalar;
  }();
  fn(src, dst, n);
}

}  // namespace lifeline
