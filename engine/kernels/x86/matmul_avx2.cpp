// AVX2 table: the scalar table with every entry the AVX2 files accelerate replaced.
#include "engine/kernels/x86/avx2_kernels.h"

namespace lifeline::kernels {

void FillAvx2(MatmulImpl* impl) {
  impl->isa = IsaLevel::kAvx2;
  avx2::FillLegacy(impl);
  avx2::FillKQuants(impl);
  avx2::FillFloat(impl);
  avx2::FillQuantizers(impl);
  avx2::FillInterleavedLegacy(impl);
  avx2::FillInterleavedKQuants(impl);
  avx2::FillInterleavedLowBit(impl);
  avx2::FillInterleavedFloat(impl);
  avx2::FillGlu(impl);
}

}  // namespace lifeline::kernels
