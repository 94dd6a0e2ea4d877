#include "engine/kernels/matmul_driver.h"
namespace lifeline::kernels {
void FillAvx2(MatmulImpl* impl) { impl->isa = IsaLevel::kAvx2; }
}  // namespace lifeline::kernels
