#include <vector>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/glu.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

// Reference matmul: each thread owns a contiguous slab of weight rows; each row is
// dequantized once and dotted with every token, so weights stream through memory once.
void MatMulRef(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
               ComputePool& pool) {
  pool.Run([&](int ith, int nth) {
    int64_t r0, r1;
    ComputePool::Split(w.rows, ith, nth, &r0, &r1);
    std::vector<float> row(static_cast<size_t>(w.cols));  // [cols]
    std::vector<uint8_t> gguf_row(w.layout == WeightLayout::kRows ? 0 : w.row_bytes);
    for (int64_t r = r0; r < r1; ++r) {
      ref::DequantizeRow(w.type, kernels::GgufRow(w, r, gguf_row.data()), row.data(), w.cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.cols;
        float sum = 0.0f;
        for (int64_t c = 0; c < w.cols; ++c) sum += row[c] * xt[c];
        y[t * w.rows + r] = sum;
      }
    }
  });
}

}  // namespace

std::string_view IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "unknown";
}

const KernelTable& ReferenceKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = IsaLevel::kScalar;
    t.matmul = &MatMulRef;
    t.interleaved_types = 0;  // computes them (row by row, back to GGUF layout), slowly
    t.silu_glu = &ref::SiluGlu;
    t.gelu_glu = &ref::GeluTanhGlu;
    return t;
  }();
  return table;
}

}  // namespace lifeline
