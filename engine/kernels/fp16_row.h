// Bulk IEEE half <-> float conversion for hot loops (KV cache reads in attention, KV cache
// writes). Uses the F16C instructions (8 values per instruction) when the CPU has AVX2-level
// support, else the scalar references Fp16ToFp32 / Fp32ToFp16. Both give identical results:
// half -> float is exact; float -> half rounds to nearest even in both, and every NaN becomes
// the scalar's canonical quiet NaN (sign kept).
//
// Thread-safety: pure; the implementation is chosen once, on first use, from CPUID.
#pragma once

#include <cstdint>

namespace lifeline {

void Fp16ToFp32Row(const uint16_t* src, float* dst, int64_t n);

// The portable twin, always available (parity tests call both).
void Fp16ToFp32RowScalar(const uint16_t* src, float* dst, int64_t n);

void Fp32ToFp16Row(const float* src, uint16_t* dst, int64_t n);
void Fp32ToFp16RowScalar(const float* src, uint16_t* dst, int64_t n);

}  // namespace lifeline
