// AVX-512 table: the scalar table with every entry the AVX-512 files accelerate replaced.
#include "engine/kernels/x86/avx512_kernels.h"

namespace lifeline::kernels {

void FillAvx512(MatmulImpl* impl, bool use_bf16_dot) {
  impl->isa = IsaLevel::kAvx512;
  avx512::FillLegacy(impl);
  avx512::FillKQuants(impl);
  avx512::FillFloat(impl, use_bf16_dot);
  avx512::FillQuantizers(impl);
  avx512::FillGemmLegacy(impl);
  avx512::FillGemmKQuants(impl);
  avx512::FillGemmFloat(impl, use_bf16_dot);
  // After the GEMM entries: these add pack_interleaved to them.
  avx512::FillInterleavedLegacy(impl);
  avx512::FillInterleavedKQuants(impl);
  avx512::FillInterleavedLowBit(impl);
  avx512::FillInterleavedFloat(impl, use_bf16_dot);
  avx512::FillGlu(impl);
}

}  // namespace lifeline::kernels
