#include "engine/kernels/matmul_driver.h"
namespace lifeline::kernels {
void FillAvx512(MatmulImpl* impl, bool) { impl->isa = IsaLevel::kAvx512; }
}  // namespace lifeline::kernels
