// Entry points of the AVX-512 kernel files, called only by FillAvx512 (matmul_avx512.cpp)
// after dispatch confirmed the CPU supports AVX-512 F/BW/DQ/VL + VNNI. Each overrides the
// table entries it accelerates. Thread-safety: called once while a table is built.
#pragma once

#include "engine/kernels/matmul_driver.h"

namespace lifeline::kernels::avx512 {

void FillLegacy(MatmulImpl* impl);                     // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
void FillKQuants(MatmulImpl* impl);                    // Q4_K, Q5_K, Q6_K
void FillFloat(MatmulImpl* impl, bool use_bf16_dot);   // F32, F16, BF16
void FillQuantizers(MatmulImpl* impl);                 // activation quantizers
void FillGemmLegacy(MatmulImpl* impl);                 // packed GEMM: Q4_0 .. Q8_0
void FillGemmKQuants(MatmulImpl* impl);                // packed GEMM: Q4_K, Q5_K, Q6_K
void FillGemmFloat(MatmulImpl* impl, bool use_bf16_dot);  // packed GEMM: BF16
// Row-interleaved weights (interleave.h): decode tiles and GEMM packing from that layout.
void FillInterleavedLegacy(MatmulImpl* impl);          // Q4_0 .. Q8_0, IQ4_NL
void FillInterleavedKQuants(MatmulImpl* impl);         // Q4_K, Q5_K, Q6_K
void FillInterleavedLowBit(MatmulImpl* impl);          // Q2_K, Q3_K
void FillInterleavedFloat(MatmulImpl* impl, bool use_bf16_dot);  // F16, BF16 (with the dot)
void FillGlu(MatmulImpl* impl);                        // SwiGLU / GELU gated units (glu.h)

}  // namespace lifeline::kernels::avx512
