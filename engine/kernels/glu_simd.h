// The gated units' vector loop (glu.h), shared by the SSE2 body of the scalar twin
// (ref/glu_ref.cpp) and the AVX2 / AVX-512 files (x86/glu_*.cpp). Each includer supplies a
// policy `S` compiled with its own flags:
//   V, kLanes                  the vector type and its float lanes
//   Load, Store, Set           unaligned load / store, broadcast
//   Add, Sub, Mul, Div         lane-wise, no fused multiply-add
//   Min(a, b), Max(a, b)       SSE semantics: b when either is NaN
//   Neg(v)                     the sign bit flipped
//   Pow2(nf)                   2^nf from the exponent bits of (int(nf) + 127) << 23
//   InfAbove(x, hi, e)         +inf where x > hi, else e
// The operations and their order are ExpForGlu's and the scalar loop's, so every width gives
// the scalar twin's bits. In an anonymous namespace so that no copy compiled for one ISA can
// be picked by the linker for another.
#pragma once

#include <cstdint>

#include "engine/kernels/glu.h"

namespace lifeline::kernels {
namespace {

// gate[i] = act(gate[i]) * up[i] for the whole vectors of [0, n); returns how many elements
// it did (the caller finishes the tail with the scalar twin).
template <typename S, bool kGelu>
int64_t GatedUnitSimd(float* gate, const float* up, int64_t n) {
  using V = typename S::V;
  const V lo = S::Set(kGluExpLo), hi = S::Set(kGluExpHi), one = S::Set(1.0f);
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) {
    const V g = S::Load(gate + i);
    V z = g;
    if constexpr (kGelu) {
      const V g3 = S::Mul(S::Mul(g, g), g);
      z = S::Mul(S::Set(kGeluK), S::Add(g, S::Mul(S::Set(kGeluC), g3)));
    }
    const V x_in = S::Neg(z);
    const V x = S::Min(hi, S::Max(lo, x_in));
    const V nf = S::Sub(S::Add(S::Mul(x, S::Set(kGluLog2e)), S::Set(kGluRoundMagic)),
                        S::Set(kGluRoundMagic));
    const V r = S::Sub(S::Sub(x, S::Mul(nf, S::Set(kGluLn2Hi))), S::Mul(nf, S::Set(kGluLn2Lo)));
    V p = S::Set(kGluExpPoly[0]);
    for (int k = 1; k < 6; ++k) p = S::Add(S::Mul(p, r), S::Set(kGluExpPoly[k]));
    const V er = S::Add(S::Add(S::Mul(S::Mul(p, r), r), r), one);
    const V e = S::InfAbove(x_in, hi, S::Mul(er, S::Pow2(nf)));
    S::Store(gate + i, S::Mul(S::Div(g, S::Add(one, e)), S::Load(up + i)));
  }
  return i;
}

// The whole row: the vectors, then the tail (n % kLanes) with the scalar twin. The SIMD
// levels' table entries.
template <typename S, bool kGelu>
void GatedUnitRow(float* gate, const float* up, int64_t n) {
  const int64_t i = GatedUnitSimd<S, kGelu>(gate, up, n);
  if (i < n) (kGelu ? ref::GeluTanhGlu : ref::SiluGlu)(gate + i, up + i, n - i);
}

}  // namespace
}  // namespace lifeline::kernels
