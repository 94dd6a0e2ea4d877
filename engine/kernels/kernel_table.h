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

// How a matrix's bytes are laid out. kRows: GGUF row-major, row r at data + r * row_bytes.
// kInterleaved16: rows in groups of 16, each group's blocks stored column by column with the
// 16 rows side by side (engine/kernels/interleave.h); same total bytes, group g at
// data + 16 * g * row_bytes. Repacked once at load so a decode GEMV streams one contiguous
// run per group with SIMD lanes holding rows.
enum class WeightLayout : uint8_t { kRows = 0, kInterleaved16 = 1 };

// A weight matrix: `rows` output features, each row `cols` input values in `type` blocks,
// `row_bytes` per row. Borrowed (the model file mapping, or the model's repacked copy).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRows;
};

// Several products of one input, run as one: the activations are quantized once and every
// matrix's rows are computed inside a single pool round trip (QKV as one product, gate + up
// as one). An optional epilogue runs on the pool thread that finished a range of output
// rows, while they are still in cache (SwiGLU of gate and up, the residual add of an output
// projection), instead of as a separate single-threaded pass.
struct MatmulGroup {
  static constexpr int kMaxMatrices = 3;
  int n = 0;                          // matrices in use, 1..kMaxMatrices
  WeightMatrix w[kMaxMatrices];       // same cols; y[i]: [n_tokens, Ldy(i)], w[i].rows used
  float* y[kMaxMatrices] = {};
  // Row stride of y[i] in floats, >= w[i].rows; 0: w[i].rows (contiguous rows). Why: a long
  // prompt's GEMM writes 16 rows of every token per tile, and a stride that is a multiple
  // of 4 KiB puts all those token rows in one cache set (the fused gate/up output of the
  // 1.1B models is 11264 floats = 11 x 4 KiB wide: prefill ran ~6 % slower).
  int64_t ldy[kMaxMatrices] = {};
  int64_t Ldy(int i) const { return ldy[i] > 0 ? ldy[i] : w[i].rows; }
  // true: every matrix has the same rows and each epilogue call covers rows [r0, r1) of all
  // of them (mat == -1); false: rows of one matrix at a time (mat = its index).
  bool row_aligned = false;
  // Called for every token once rows [r0, r1) of the output(s) are final (all tokens).
  // Ranges are disjoint and cover all rows; calls run concurrently on the pool's threads.
  void (*epilogue)(const void* ctx, int mat, int64_t r0, int64_t r1) = nullptr;
  const void* epilogue_ctx = nullptr;
  // When > 0, every epilogue range starts on a multiple of this many rows of its matrix and
  // ends on one or at the matrix's last row. A multiple of 16. The fused gate/up matrix asks
  // for 32: its 16-row groups alternate gate and up, and SwiGLU needs both of a pair.
  int64_t epilogue_rows = 0;
  // Optional: writes token rows [t0, t1) of x (the group's input) just before they are
  // quantized, on the thread that quantizes them (RMSNorm fused into activation
  // quantization: the normalised row is still in L1 when it is quantized, and a long prompt's
  // norms run on every pool thread). Disjoint ranges covering all tokens, possibly concurrent.
  void (*prologue)(const void* ctx, int64_t t0, int64_t t1) = nullptr;
  const void* prologue_ctx = nullptr;
};

struct KernelTable {
  IsaLevel isa = IsaLevel::kScalar;

  // y[t, r] = sum_c W[r, c] * x[t, c]
  //   x: [n_tokens, w.cols] f32, contiguous; y: [n_tokens, w.rows] f32, contiguous.
  // Splits the work over the pool's threads. No allocation beyond per-call scratch.
  void (*matmul)(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                 ComputePool& pool) = nullptr;

  // Every product of the group from the same x ([n_tokens, cols]); optional (null: callers
  // use RunMatmulGroup, which falls back to one matmul per matrix). Results are bit-identical
  // to the prologue over all tokens, then separate matmul calls, then the epilogue over all
  // rows.
  void (*matmul_group)(const MatmulGroup& g, const float* x, int64_t n_tokens,
                       ComputePool& pool) = nullptr;

  // Bit i set: this table has SIMD kernels for GgmlType id i in WeightLayout::kInterleaved16,
  // so a loader should repack such matrices (rows a multiple of 16). Every table (the
  // reference one too) computes interleaved matrices correctly; without the bit it is slow.
  uint32_t interleaved_types = 0;

  // Gated units of a feed-forward block (glu.h): gate[i] = act(gate[i]) * up[i], i < n, act
  // SiLU or tanh-GELU. Every level gives the scalar twin's bits.
  void (*silu_glu)(float* gate, const float* up, int64_t n) = nullptr;
  void (*gelu_glu)(float* gate, const float* up, int64_t n) = nullptr;
};

// Runs g with table.matmul_group when the table has one, else unfused on the calling thread:
// the prologue over all tokens, one matmul per matrix, the epilogue over all rows.
void RunMatmulGroup(const KernelTable& table, const MatmulGroup& g, const float* x,
                    int64_t n_tokens, ComputePool& pool);

// Scalar reference kernels (dequantize each weight row to f32, dot in f32 with f64-free
// sequential accumulation). Always available.
const KernelTable& ReferenceKernels();

}  // namespace lifeline
