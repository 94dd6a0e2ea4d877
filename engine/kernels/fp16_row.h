// Bulk IEEE half -> float conversion for hot loops (KV cache reads in attention). Uses the
// F16C instruction (8 values per instruction) when the CPU has AVX2-level support, else the
// scalar reference Fp16ToFp32. Both give identical results: half -> float is exact.
//
// Thread-safety: pure; the implementation is chosen once, on first use, from CPUID.
#pragma once

#include <cstdint>

namespace lifeline {

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);

// The portable twin, always available (parity tests call both).
void Fp16ToFp32RowScalar(const uint16_t* src, float* dst, int64_t n);

}  // namespace lifeline
