#include "kernels/matmul_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/ref/quants_ref.h"
#include "engine/kernels/ref/vec_dot_ref.h"

namespace lifeline::testing {

std::vector<IsaLevel> SupportedLevels() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (l <= DetectIsa()) out.push_back(l);
  }
  return out;
}

namespace {

// Byte offsets of the f16 scale fields inside one block (ggml block layouts, see
// ref/quant_blocks.h): d (and m / dmin) of every quantized type.
std::vector<int> F16FieldOffsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
    case GgmlType::kIQ4_NL: return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return {0, 2};
    case GgmlType::kQ2_K: return {80, 82};
    case GgmlType::kQ3_K: return {108};
    case GgmlType::kQ6_K: return {208};
    default: return {};
  }
}

std::vector<float> DequantRow(const WeightMatrix& w, int64_t r) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  ref::DequantizeRow(w.type, w.data + r * w.row_bytes, row.data(), w.cols);
  return row;
}

}  // namespace

std::vector<float> RandomNormal(uint32_t seed, int64_t n, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> QuantizedRandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                            uint32_t seed) {
  const std::vector<float> w = RandomNormal(seed, rows * cols);
  const uint64_t row_bytes = RowBytes(type, cols).value();
  std::vector<uint8_t> out(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    ref::QuantizeRow(type, w.data() + r * cols, out.data() + r * row_bytes, cols);
  }
  return out;
}

std::vector<uint8_t> RandomBlockBytes(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const uint64_t row_bytes = RowBytes(type, cols).value();
  std::vector<uint8_t> out(row_bytes * rows);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  const auto& traits = TypeTraits(type);
  auto put16 = [&](uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); };
  if (type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kF32) {
    std::normal_distribution<float> val(0.0f, 1.0f);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = val(rng);
      if (type == GgmlType::kF16) put16(out.data() + 2 * i, Fp32ToFp16(v));
      if (type == GgmlType::kBF16) put16(out.data() + 2 * i, Fp32ToBf16(v));
      if (type == GgmlType::kF32) std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
  }
  const int64_t n_blocks = rows * (cols / traits.block_elems);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int off : F16FieldOffsets(type)) {
      put16(out.data() + b * traits.block_bytes + off, Fp32ToFp16(scale(rng)));
    }
  }
  return out;
}

WeightMatrix View(GgmlType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.type = type;
  w.data = bytes.data();
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = RowBytes(type, cols).value();
  return w;
}

std::vector<float> TwinMatmul(const WeightMatrix& w, const float* x, int64_t n_tokens) {
  QuantizedActs acts;
  acts.Reset(ActFormatFor(w.type), n_tokens, w.cols, x);
  for (int64_t t = 0; t < n_tokens; ++t) ref::QuantizeToken(x + t * w.cols, acts, t);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const ActRow a = acts.Row(t);
    for (int64_t r = 0; r < w.rows; ++r) {
      y[t * w.rows + r] = ref::VecDot(w.type, w.data + r * w.row_bytes, a, w.cols);
    }
  }
  return y;
}

std::vector<double> DequantMatmul(const WeightMatrix& w, const float* x, int64_t n_tokens) {
  std::vector<double> y(static_cast<size_t>(n_tokens * w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<float> row = DequantRow(w, r);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * x[t * w.cols + c];
      y[t * w.rows + r] = s;
    }
  }
  return y;
}

std::vector<double> AbsMagnitude(const WeightMatrix& w, const float* x, int64_t n_tokens) {
  std::vector<double> m(static_cast<size_t>(n_tokens * w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<float> row = DequantRow(w, r);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(static_cast<double>(row[c]) * x[t * w.cols + c]);
      m[t * w.rows + r] = s;
    }
  }
  return m;
}

// Per activation value, |x - x_stored| is at most:
//   Q8_0 / Q8_1: block step d = amax / 127, so rounding to an integer level costs d / 2 =
//     amax / 254, and storing d as f16 (relative error <= 2^-11) moves a level |q| <= 127 by
//     at most amax * 2^-11.  => amax * (1/254 + 2^-11)
//   Q8_K: d = |max| / 127 stays f32, so amax / 254 (times 1 + 1e-6 for the f32 rounding of d).
//   F16: |x| * 2^-11 (round to nearest, 10 stored mantissa bits); BF16: |x| * 2^-8.
//   F32: 0.
// The error of sum_c W x is at most sum_c |W| * err(x_c). Q4_1 / Q5_1 also round s = d * sum(q)
// to f16: |m| * |s| * 2^-11 per block with |s| <= 32 * 127 * d = 32 * amax.
std::vector<double> ActQuantBound(const WeightMatrix& w, const float* x, int64_t n_tokens) {
  const ActFormat fmt = ActFormatFor(w.type);
  const int64_t block = ActBlockElems(fmt);
  std::vector<double> err(static_cast<size_t>(n_tokens * w.cols));  // [n_tokens, cols]
  std::vector<double> amax_of(static_cast<size_t>(n_tokens * w.cols));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c0 = 0; c0 < w.cols; c0 += block) {
      double amax = 0;
      for (int64_t c = c0; c < c0 + block; ++c) amax = std::max(amax, std::fabs(double{x[t * w.cols + c]}));
      for (int64_t c = c0; c < c0 + block; ++c) {
        const double ax = std::fabs(double{x[t * w.cols + c]});
        double e = 0;
        switch (fmt) {
          case ActFormat::kQ8_0:
          case ActFormat::kQ8_1: e = amax * (1.0 / 254 + std::ldexp(1.0, -11)); break;
          case ActFormat::kQ8_K: e = amax / 254 * (1 + 1e-6); break;
          case ActFormat::kF16: e = ax * std::ldexp(1.0, -11); break;
          case ActFormat::kBf16: e = ax * std::ldexp(1.0, -8); break;
          case ActFormat::kF32: e = 0; break;
        }
        err[t * w.cols + c] = e;
        amax_of[t * w.cols + c] = amax;
      }
    }
  }
  std::vector<double> bound(static_cast<size_t>(n_tokens * w.rows));
  const bool has_min = w.type == GgmlType::kQ4_1 || w.type == GgmlType::kQ5_1;
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<float> row = DequantRow(w, r);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += std::fabs(double{row[c]}) * err[t * w.cols + c];
      if (has_min) {
        const auto& traits = TypeTraits(w.type);
        for (int64_t b = 0; b < w.cols / 32; ++b) {
          uint16_t m16;
          std::memcpy(&m16, w.data + r * w.row_bytes + b * traits.block_bytes + 2, 2);
          s += std::fabs(double{Fp16ToFp32(m16)}) * 32 * amax_of[t * w.cols + b * 32] *
               std::ldexp(1.0, -11);
        }
      }
      bound[t * w.rows + r] = s;
    }
  }
  return bound;
}

}  // namespace lifeline::testing
