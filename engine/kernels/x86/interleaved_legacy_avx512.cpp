// AVX-512 VNNI kernels for Q4_0 / Q8_0 matrices in the row-interleaved layout (interleave.h).
#include "engine/kernels/x86/avx512_kernels.h"

namespace lifeline::kernels::avx512 {

void FillInterleavedLegacy(MatmulImpl* impl) { (void)impl; }

}  // namespace lifeline::kernels::avx512
