// Gated units of a feed-forward block: gate[i] = act(gate[i]) * up[i], with act the SiLU
// (z / (1 + e^-z)) or the tanh approximation of GELU (z / 2 (1 + tanh(y)) = z sigmoid(2y),
// y = sqrt(2/pi) (z + 0.044715 z^3)). The scalar twins (ref/glu_ref.cpp) are the reference;
// the AVX2 and AVX-512 versions (x86/glu_*.cpp, reached through KernelTable::silu_glu /
// gelu_glu) run the twin's SSE2 loop (glu_simd.h) at their own width, the same operations in
// the same order lane by lane, so every level gives the same bits (glu_parity_test.cpp). Why SIMD levels of their own: in a prefill step the
// gate/up product's epilogue ran the 4-wide baseline loop at ~1.8 ns per element, 3-4 % of
// the step on the 1.1B models.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace lifeline::kernels {

// e^x without a library call (std::exp is one call per element). Cody-Waite reduction
// x = n ln2 + r with |r| <= ln2 / 2, Cephes' degree-6 expf polynomial for e^r (relative error
// ~2e-7), 2^n from the exponent bits. Below -87 x is clamped (e^x stays a normal float;
// 1 + e^x rounds to 1 either way); above 88 the result is +inf, as std::exp overflows there
// too, so silu gives -0 like the library version. NaN passes through. The selects are
// written the way SSE / AVX max, min and blend compute them, so the SIMD loops and this
// scalar form give identical bits.
inline constexpr float kGluExpLo = -87.0f, kGluExpHi = 88.0f;
inline constexpr float kGluLog2e = 1.44269504088896341f;
inline constexpr float kGluRoundMagic = 12582912.0f;  // 1.5 * 2^23: x + it - it rounds x
inline constexpr float kGluLn2Hi = 0.693359375f, kGluLn2Lo = -2.12194440e-4f;
inline constexpr float kGluExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline constexpr float kGeluK = 1.5957691216057308f;  // 2 sqrt(2 / pi)
inline constexpr float kGeluC = 0.044715f;

inline float ExpForGlu(float x_in) {
  float x = kGluExpLo > x_in ? kGluExpLo : x_in;  // maxps(lo, x): NaN keeps x
  x = kGluExpHi < x ? kGluExpHi : x;               // minps(hi, x)
  const float n = (x * kGluLog2e + kGluRoundMagic) - kGluRoundMagic;
  const float r = (x - n * kGluLn2Hi) - n * kGluLn2Lo;
  float p = kGluExpPoly[0];
  for (int k = 1; k < 6; ++k) p = p * r + kGluExpPoly[k];
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  const float e = er * std::bit_cast<float>(bits);
  return x_in > kGluExpHi ? std::numeric_limits<float>::infinity() : e;
}

}  // namespace lifeline::kernels

namespace lifeline::ref {
// The scalar twins (with a 4-wide SSE2 body on x86, which is the baseline ISA there and gives
// the scalar loop's bits). gate, up: [n]; gate is overwritten.
void SiluGlu(float* gate, const float* up, int64_t n);
void GeluTanhGlu(float* gate, const float* up, int64_t n);
}  // namespace lifeline::ref
