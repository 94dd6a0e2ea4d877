// AVX-512 VNNI kernels for K-quant matrices in the row-interleaved layout (interleave.h).
#include "engine/kernels/x86/avx512_kernels.h"

namespace lifeline::kernels::avx512 {

void FillInterleavedKQuants(MatmulImpl* impl) { (void)impl; }

}  // namespace lifeline::kernels::avx512
