// AVX-512 packed-weight GEMM for BF16 weights with AVX512_BF16 (layout idea: gemm_avx512.h):
// the tile is packed as [cols / 2][16 rows][2] bf16; one vdpbf16ps per token and column pair
// adds 32 products (exact bf16 products, f32 sums) against the token's broadcast bf16 pair.
// Note: F32 / F16 have no packed path: one FMA adds 16 products either way, and the 4 x 4
// tiles already run near the FMA bound (measured: packed f32/f16 was no faster).
#include <type_traits>

#include "engine/kernels/x86/avx512_kernels.h"
#include "engine/kernels/x86/gemm_avx512.h"

namespace lifeline::kernels::avx512 {
namespace {

struct Bf16Gemm {
  static uint64_t PackedBytes(int64_t cols) { return static_cast<uint64_t>((cols + 1) / 2) * 64; }

  static void Pack(const uint8_t* w, uint64_t rb, int nr, int64_t cols, uint8_t* packed) {
    uint32_t* out = reinterpret_cast<uint32_t*>(packed);  // [cols / 2][16] bf16 pairs
    const int64_t pairs = (cols + 1) / 2;
    for (int r = 0; r < kGemmRows; ++r) {
      const uint8_t* row = w + r * rb;
      for (int64_t p = 0; p < pairs; ++p) {
        uint32_t v = 0;
        if (r < nr) {
          uint16_t lo, hi = 0;
          std::memcpy(&lo, row + 4 * p, 2);
          if (2 * p + 1 < cols) std::memcpy(&hi, row + 4 * p + 2, 2);
          v = lo | (static_cast<uint32_t>(hi) << 16);
        }
        out[16 * p + r] = v;
      }
    }
  }

  template <int NT>
  static void Block(const uint8_t* packed, int nr, int64_t cols, const ActRow* a, float* y,
                    int64_t ldy) {
    const int64_t full = cols / 2;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < full; ++p) {
      const __m512bh wv = (__m512bh)_mm512_load_si512(packed + 64 * p);
      for (int t = 0; t < NT; ++t) {
        const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(Load32u(a[t].bf + 2 * p)));
        acc[t] = _mm512_dpbf16_ps(acc[t], wv, xv);
      }
    }
    if (cols % 2 != 0) {  // last column: its pair partner is zero in the packed tile
      const __m512bh wv = (__m512bh)_mm512_load_si512(packed + 64 * full);
      for (int t = 0; t < NT; ++t) {
        const __m512bh xv = (__m512bh)_mm512_set1_epi32(a[t].bf[cols - 1]);
        acc[t] = _mm512_dpbf16_ps(acc[t], wv, xv);
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ldy, RowMask(nr), acc[t]);
  }
};

}  // namespace

// Packing costs ~1 cycle per weight value; per token and row the packed kernel runs ~34
// products per cycle against ~21 for the tiles: break-even near 30 tokens.
void FillGemmFloat(MatmulImpl* impl, bool use_bf16_dot) {
  if (use_bf16_dot) impl->gemm[static_cast<int>(GgmlType::kBF16)] = MakeGemm<Bf16Gemm>(32);
}

}  // namespace lifeline::kernels::avx512
