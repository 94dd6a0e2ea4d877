// Matmul parity: for every weight type and every ISA level this CPU supports, the table's
// matmul against
//   (a) the scalar twins (TwinMatmul: same activation quantization, integer block sums, f32
//       accumulation in another order) - tolerance kTwinRelTol of sum |w * x|, and
//   (b) dequantized weights times unquantized activations in f64 - tolerance: the rigorous
//       activation-rounding bound of ActQuantBound plus the twin tolerance.
// Shapes have row counts not divisible by the thread count and token counts 1, 3, 8, 33
// (remainders of every tile size); float types use a column count that is not a multiple of
// any vector width.
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/kernel_table.h"
#include "kernels/matmul_test_util.h"

namespace lifeline {
namespace {

using testing::SupportedLevels;

using testing::AbsMagnitude;
using testing::ActQuantBound;
using testing::DequantMatmul;
using testing::TwinMatmul;
using testing::kAbsFloor;
using testing::kGuard;
using testing::kTwinRelTol;

struct Shape {
  int64_t rows;
  int64_t cols;
};

bool IsFloatType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

std::vector<Shape> ShapesFor(GgmlType t) {
  if (IsFloatType(t)) return {{37, 517}, {8, 64}, {5, 1}};
  if (TypeTraits(t).block_elems == kQK_K) return {{37, 256}, {19, 1024}};
  return {{37, 64}, {19, 4096}, {3, 32}};
}

struct Param {
  GgmlType type;
  IsaLevel level;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << TypeTraits(p.type).name << "@" << IsaLevelName(p.level);
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(TypeTraits(info.param.type).name) + "_" +
         std::string(IsaLevelName(info.param.level));
}

std::vector<Param> AllParams() {
  std::vector<Param> out;
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                     GgmlType::kQ5_K, GgmlType::kQ5_0, GgmlType::kQ4_1, GgmlType::kQ5_1,
                     GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32, GgmlType::kQ2_K,
                     GgmlType::kQ3_K, GgmlType::kIQ4_NL}) {
    for (IsaLevel l : SupportedLevels()) out.push_back({t, l});
  }
  return out;
}

class MatmulParity : public ::testing::TestWithParam<Param> {
 protected:
  // Runs the level's matmul with a 3-thread pool; checks the guard after y.
  std::vector<float> Run(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens) {
    const KernelTable& table = KernelsFor(GetParam().level);
    EXPECT_EQ(table.isa, GetParam().level);
    std::vector<float> y(static_cast<size_t>(n_tokens * w.rows) + 8, kGuard);
    table.matmul(w, x.data(), n_tokens, y.data(), pool_);
    for (size_t i = y.size() - 8; i < y.size(); ++i) EXPECT_EQ(y[i], kGuard) << "wrote past y";
    y.resize(y.size() - 8);
    return y;
  }

  void Check(const std::vector<uint8_t>& bytes, const Shape& s, int64_t n_tokens,
             uint32_t seed, bool check_dequant) {
    const GgmlType type = GetParam().type;
    const WeightMatrix w = testing::View(type, bytes, s.rows, s.cols);
    const std::vector<float> x = testing::RandomNormal(seed, n_tokens * s.cols);
    const std::vector<float> y = Run(w, x, n_tokens);
    const std::vector<float> twin = TwinMatmul(w, x.data(), n_tokens);
    const std::vector<double> mag = AbsMagnitude(w, x.data(), n_tokens);
    const std::vector<double> deq = DequantMatmul(w, x.data(), n_tokens);
    const std::vector<double> bound = ActQuantBound(w, x.data(), n_tokens);
    int failures = 0;
    for (int64_t i = 0; i < n_tokens * s.rows && failures < 5; ++i) {
      const double tol = kTwinRelTol * mag[i] + kAbsFloor;
      const std::string where = "rows=" + std::to_string(s.rows) + " cols=" +
                                std::to_string(s.cols) + " n_tokens=" + std::to_string(n_tokens) +
                                " t=" + std::to_string(i / s.rows) + " r=" + std::to_string(i % s.rows);
      if (GetParam().level == IsaLevel::kScalar) {
        // The scalar table is the twin run through the tiled driver: bit-identical.
        if (y[i] != twin[i]) ++failures;
        EXPECT_EQ(y[i], twin[i]) << where;
      } else {
        if (!(std::fabs(y[i] - twin[i]) <= tol)) ++failures;
        EXPECT_NEAR(y[i], twin[i], tol) << where;
      }
      if (check_dequant) {
        EXPECT_NEAR(y[i], deq[i], 1.0001 * bound[i] + tol) << where << " (vs dequantized f64)";
      }
    }
  }

  ComputePool pool_{3};
};

TEST_P(MatmulParity, QuantizedRandomWeights) {
  uint32_t seed = 1;
  for (const Shape& s : ShapesFor(GetParam().type)) {
    const auto bytes = testing::QuantizedRandomWeights(GetParam().type, s.rows, s.cols, seed++);
    for (int64_t n_tokens : {1, 3, 8, 33}) Check(bytes, s, n_tokens, seed++, true);
  }
}

TEST_P(MatmulParity, RandomBlockBytes) {
  uint32_t seed = 100;
  for (const Shape& s : ShapesFor(GetParam().type)) {
    const auto bytes = testing::RandomBlockBytes(GetParam().type, s.rows, s.cols, seed++);
    for (int64_t n_tokens : {1, 5, 17, 40}) Check(bytes, s, n_tokens, seed++, true);
  }
}

// Long prompts take the packed-weight GEMM path where a level has one (from 16 to 32
// tokens depending on the type): a token count that is not a multiple of the 16-token groups.
TEST_P(MatmulParity, LongPrompt) {
  const Shape s = ShapesFor(GetParam().type)[0];
  const auto bytes = testing::QuantizedRandomWeights(GetParam().type, s.rows, s.cols, 21);
  Check(bytes, s, 70, 22, true);
}

// The packed GEMM of many tokens, per shape edge: row counts below, at and above one
// 16-row tile (the padding rows of a partial tile must not leak into y), tile counts that
// pair up (kernels that take two tiles at once: 17 = a whole tile + 1 row, 50 = two pairs,
// the second partial) or leave one tile over (40 = a pair + a partial tile), token counts
// that leave a partial 6- or 8-token group (and 64 + 7: many full groups plus a remainder), and
// K-quant rows of 1 and 3 super-blocks. Every token count here is >= every type's packed
// threshold (32), so types with a packed kernel take it; the others check their tiles.
TEST_P(MatmulParity, PackedGemmEdges) {
  const GgmlType type = GetParam().type;
  const bool k_quant = TypeTraits(type).block_elems == kQK_K;
  const int64_t cols_a = IsFloatType(type) ? 517 : (k_quant ? 256 : 96);
  const int64_t cols_b = IsFloatType(type) ? 64 : (k_quant ? 768 : 544);
  uint32_t seed = 300;
  for (const Shape s : {Shape{1, cols_a}, Shape{16, cols_b}, Shape{17, cols_a}, Shape{40, cols_a},
                        Shape{50, cols_b}}) {
    const auto bytes = testing::QuantizedRandomWeights(type, s.rows, s.cols, seed++);
    for (int64_t n_tokens : {32, 41, 71}) Check(bytes, s, n_tokens, seed++, true);
  }
  // Random level and scale bytes: every nibble / high-bit pattern through the packers.
  const Shape s{19, cols_b};
  const auto bytes = testing::RandomBlockBytes(type, s.rows, s.cols, seed++);
  Check(bytes, s, 45, seed++, true);
}

// Activations with all-zero blocks and a single huge value: zero scales must give exact zeros
// of those blocks' contributions, and no inf/NaN.
TEST_P(MatmulParity, SparseActivations) {
  const GgmlType type = GetParam().type;
  const Shape s = ShapesFor(type)[0];
  const auto bytes = testing::QuantizedRandomWeights(type, s.rows, s.cols, 7);
  const WeightMatrix w = testing::View(type, bytes, s.rows, s.cols);
  std::vector<float> x(static_cast<size_t>(2 * s.cols), 0.0f);
  x[s.cols - 1] = 1000.0f;  // token 0: one value; token 1: all zeros
  const std::vector<float> y = Run(w, x, 2);
  const std::vector<float> twin = TwinMatmul(w, x.data(), 2);
  const std::vector<double> mag = AbsMagnitude(w, x.data(), 2);
  for (int64_t i = 0; i < 2 * s.rows; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    EXPECT_NEAR(y[i], twin[i], kTwinRelTol * mag[i] + kAbsFloor) << i;
  }
  for (int64_t r = 0; r < s.rows; ++r) EXPECT_EQ(y[s.rows + r], 0.0f) << r;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllLevels, MatmulParity, ::testing::ValuesIn(AllParams()),
                         ParamName);

// The reference table (dequantize + f32) against f64: only f32 rounding separates them.
TEST(ReferenceMatmul, MatchesDequantizedF64) {
  ComputePool pool(2);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ6_K, GgmlType::kF16}) {
    const int64_t rows = 9, cols = 512;
    const auto bytes = testing::QuantizedRandomWeights(type, rows, cols, 3);
    const WeightMatrix w = testing::View(type, bytes, rows, cols);
    const std::vector<float> x = testing::RandomNormal(4, 3 * cols);
    std::vector<float> y(3 * rows);
    ReferenceKernels().matmul(w, x.data(), 3, y.data(), pool);
    const auto deq = DequantMatmul(w, x.data(), 3);
    const auto mag = AbsMagnitude(w, x.data(), 3);
    for (int64_t i = 0; i < 3 * rows; ++i) EXPECT_NEAR(y[i], deq[i], kTwinRelTol * mag[i] + kAbsFloor);
  }
}

// A type with no dot product (Q8_1 is activation-only) and a zero-token call.
TEST(MatmulEdges, ZeroTokensWritesNothing) {
  ComputePool pool(2);
  const auto bytes = testing::QuantizedRandomWeights(GgmlType::kQ8_0, 4, 64, 1);
  const WeightMatrix w = testing::View(GgmlType::kQ8_0, bytes, 4, 64);
  float y[4] = {kGuard, kGuard, kGuard, kGuard};
  for (IsaLevel l : SupportedLevels()) {
    KernelsFor(l).matmul(w, nullptr, 0, y, pool);
    for (float v : y) EXPECT_EQ(v, kGuard);
  }
}

// Single-threaded pool and a pool with more threads than row tiles give the same answer as
// the 3-thread pool (each output is computed by exactly one tile, independent of the split).
TEST(MatmulEdges, ThreadCountDoesNotChangeResults) {
  const int64_t rows = 37, cols = 1024;
  const auto bytes = testing::QuantizedRandomWeights(GgmlType::kQ4_K, rows, cols, 11);
  const WeightMatrix w = testing::View(GgmlType::kQ4_K, bytes, rows, cols);
  const std::vector<float> x = testing::RandomNormal(12, 40 * cols);
  for (IsaLevel l : SupportedLevels()) {
    std::vector<float> y1(40 * rows), y8(40 * rows);
    ComputePool p1(1), p8(8);
    KernelsFor(l).matmul(w, x.data(), 40, y1.data(), p1);
    KernelsFor(l).matmul(w, x.data(), 40, y8.data(), p8);
    EXPECT_EQ(y1, y8) << IsaLevelName(l);
  }
}

}  // namespace
}  // namespace lifeline
