// The kernel table: one struct of function pointers per instruction-set level, filled once at
// start-up from the CPU's features (or a forced level for testing), then passed by reference
// to whoever computes. The math layer never knows the model graph.
//
// Every entry has a scalar reference twin (ReferenceKernels()); SIMD entries are tested for
// parity against it per ISA with named tolerances. The per-ISA tables (quantized-activation
// integer kernels, as ggml computes) come from KernelsFor(level) in dispatch.h.
//
// Thread-safety: tables are immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/kernels/ggml_type.h"

namespace lifeline {

class ComputePool;

enum class IsaLevel : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
std::string_view IsaLevelName(IsaLevel level);

// A weight matrix stored row-major in GGUF layout: `rows` output features, each row `cols`
// input values in `type` blocks, consecutive rows `row_bytes` apart. Borrowed (usually
// from the model file mapping).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
};

struct KernelTable {
  IsaLevel isa = IsaLevel::kScalar;

  // y[t, r] = sum_c W[r, c] * x[t, c]
  //   x: [n_tokens, w.cols] f32, contiguous; y: [n_tokens, w.rows] f32, contiguous.
  // Splits the work over the pool's threads. No allocation beyond per-call scratch.
  void (*matmul)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                 ComputePool& pool) = nullptr;
};

// Scalar reference kernels (dequantize each weight row to f32, dot in f32 with f64-free
// sequential accumulation). Always available.
const KernelTable& ReferenceKernels();

}  // namespace lifeline
