// NormHook: the RMSNorm prologue of a fused product (MatmulGroup::prologue), shared by the
// forward pass's files (internal to engine/model).
//
// Thread-safety: Run is called concurrently on disjoint token ranges. Failure: none.
#pragma once

#include <cstdint>

#include "engine/model/ops.h"

namespace lifeline {

// Prologue: out[t] = RMSNorm(x[t]) * w for token rows [t0, t1) ([n, d] buffers).
struct NormHook {
  const float* x;
  const float* w;
  int64_t d;
  float eps;
  float* out;
  static void Run(const void* p, int64_t t0, int64_t t1) {
    const auto& h = *static_cast<const NormHook*>(p);
    for (int64_t t = t0; t < t1; ++t) ops::RmsNorm(h.x + t * h.d, h.w, h.d, h.eps, h.out + t * h.d);
  }
};

}  // namespace lifeline
