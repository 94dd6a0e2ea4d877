// Entry points of the AVX2 kernel files, called only by FillAvx2 (matmul_avx2.cpp) after
// dispatch confirmed the CPU supports AVX2 + FMA + F16C. Each overrides the table entries it
// accelerates. Thread-safety: called once while a table is built.
#pragma once

#include "engine/kernels/matmul_driver.h"

namespace lifeline::kernels::avx2 {

void FillLegacy(MatmulImpl* impl);      // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
void FillKQuants(MatmulImpl* impl);     // Q4_K, Q5_K, Q6_K
void FillFloat(MatmulImpl* impl);       // F32, F16, BF16
void FillQuantizers(MatmulImpl* impl);  // activation quantizers
void FillInterleavedLegacy(MatmulImpl* impl);   // Q4_0 .. Q8_0, IQ4_NL in the row-interleaved layout
void FillInterleavedKQuants(MatmulImpl* impl);  // Q4_K, Q5_K, Q6_K in the row-interleaved layout
void FillInterleavedLowBit(MatmulImpl* impl);   // Q2_K, Q3_K in the row-interleaved layout
void FillInterleavedFloat(MatmulImpl* impl);    // F16, BF16 in the row-interleaved layout
void FillGlu(MatmulImpl* impl);                 // SwiGLU / GELU gated units (glu.h)

}  // namespace lifeline::kernels::avx2
