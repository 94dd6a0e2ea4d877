// The row-interleaved weight layout (engine/kernels/interleave.h):
//   - the repacker is a bijection: every row read back (DeinterleaveRow) equals the GGUF row,
//     also when two matrices are written group by group into one (the fused gate/up);
//   - for every type with a layout and every ISA level this CPU supports, the table's matmul
//     of the repacked matrix matches the scalar twins on the ORIGINAL matrix (TwinMatmul:
//     same activation quantization, integer block sums) within the matmul parity tolerance,
//     and the dequantized f64 product within the activation-rounding bound, at token counts
//     for the GEMV tiles (1..5), the mid range (8, 15) and the packed GEMM (17, 40, 70);
//   - groups mixing repacked and row-major matrices (QKV where one matrix could not be
//     repacked) equal the same products run one by one;
//   - the reference table computes interleaved matrices exactly as their originals.
// Which tables ask for which types (interleaved_types) is printed, not asserted: a level
// without SIMD interleaved kernels still computes such matrices through the scalar twin.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/kernel_table.h"
#include "kernels/matmul_test_util.h"

namespace lifeline {
namespace {

using testing::SupportedLevels;

using kernels::CanInterleave;
using kernels::DeinterleaveRow;
using kernels::InterleaveRows;

using testing::kAbsFloor;
using testing::kGuard;
using testing::kTwinRelTol;

const GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                           GgmlType::kQ5_K, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_NL,
                           GgmlType::kF16,  GgmlType::kBF16};

// Owns the repacked bytes of a matrix.
struct Repacked {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

Repacked Repack(const WeightMatrix& src) {
  Repacked r;
  r.bytes.assign(static_cast<size_t>(src.rows) * src.row_bytes + 64, 0xa5);  // guard tail
  EXPECT_TRUE(CanInterleave(src));
  InterleaveRows(src, r.bytes.data());
  r.w = src;
  r.w.data = r.bytes.data();
  r.w.layout = WeightLayout::kInterleaved16;
  return r;
}

int64_t ColsFor(GgmlType t, int variant) {
  const bool k_quant = TypeTraits(t).block_elems == kQK_K;
  if (k_quant) return variant == 0 ? 256 : 768;
  return variant == 0 ? 64 : 544;  // 544 = 17 blocks: an odd block count
}

TEST(Interleave, LayoutCoversTheSupportedTypes) {
  for (GgmlType t : kTypes) {
    const kernels::InterleaveDesc* d = kernels::InterleaveDescFor(t);
    ASSERT_NE(d, nullptr) << TypeTraits(t).name;
    // Same bytes per block: the f16 fields plus the quads, as many as the type's blocks of
    // the layout's length take (F16 / BF16: 32 values of 2 bytes).
    const auto& traits = TypeTraits(t);
    EXPECT_EQ(d->block_elems % traits.block_elems, 0) << traits.name;
    EXPECT_EQ(kernels::InterleaveBlockBytes(*d),
              traits.block_bytes * (d->block_elems / traits.block_elems))
        << traits.name;
  }
  EXPECT_EQ(kernels::InterleaveDescFor(GgmlType::kF32), nullptr);
}

TEST(Interleave, CanInterleaveNeedsWholeGroupsAndRowLayout) {
  const auto bytes = testing::QuantizedRandomWeights(GgmlType::kQ4_0, 48, 64, 1);
  WeightMatrix w = testing::View(GgmlType::kQ4_0, bytes, 48, 64);
  EXPECT_TRUE(CanInterleave(w));
  w.rows = 40;
  EXPECT_FALSE(CanInterleave(w));
  w.rows = 48;
  w.layout = WeightLayout::kInterleaved16;
  EXPECT_FALSE(CanInterleave(w));
  // F16 / BF16: whole 32-value blocks only.
  for (GgmlType t : {GgmlType::kF16, GgmlType::kBF16}) {
    const auto f = testing::QuantizedRandomWeights(t, 16, 64, 1);
    EXPECT_TRUE(CanInterleave(testing::View(t, f, 16, 64)));
    const auto g = testing::QuantizedRandomWeights(t, 16, 48, 1);
    EXPECT_FALSE(CanInterleave(testing::View(t, g, 16, 48)));
  }
  const auto f32 = testing::QuantizedRandomWeights(GgmlType::kF32, 16, 64, 1);
  EXPECT_FALSE(CanInterleave(testing::View(GgmlType::kF32, f32, 16, 64)));
}

TEST(Interleave, RowsReadBackExactly) {
  uint32_t seed = 1;
  for (GgmlType t : kTypes) {
    for (int variant : {0, 1}) {
      const int64_t rows = 48, cols = ColsFor(t, variant);
      const auto bytes = testing::RandomBlockBytes(t, rows, cols, seed++);
      const WeightMatrix w = testing::View(t, bytes, rows, cols);
      const Repacked r = Repack(w);
      for (size_t i = bytes.size(); i < r.bytes.size(); ++i) {
        ASSERT_EQ(r.bytes[i], 0xa5) << TypeTraits(t).name << ": wrote past the matrix";
      }
      EXPECT_NE(std::vector<uint8_t>(r.bytes.begin(), r.bytes.begin() + bytes.size()), bytes)
          << TypeTraits(t).name << ": the layout moved nothing";
      std::vector<uint8_t> row(w.row_bytes);
      for (int64_t i = 0; i < rows; ++i) {
        DeinterleaveRow(r.w, i, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), bytes.data() + i * w.row_bytes, w.row_bytes))
            << TypeTraits(t).name << " row " << i;
      }
    }
  }
}

// The strided form writes two matrices of one shape group by group into one buffer (the
// fused gate/up matrix): read back as one interleaved matrix of twice the rows, its rows
// 32k..32k+15 are the first matrix's rows 16k.., and rows 32k+16.. the second's.
TEST(Interleave, TwoMatricesAlternateGroupByGroup) {
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    const int64_t rows = 48, cols = ColsFor(t, 1);
    const auto a_bytes = testing::RandomBlockBytes(t, rows, cols, seed++);
    const auto b_bytes = testing::RandomBlockBytes(t, rows, cols, seed++);
    const WeightMatrix a = testing::View(t, a_bytes, rows, cols);
    const WeightMatrix b = testing::View(t, b_bytes, rows, cols);
    const uint64_t group_bytes = kernels::kInterleaveRows * a.row_bytes;
    std::vector<uint8_t> fused_bytes(2 * a_bytes.size() + 64, 0xa5);  // guard tail
    // Two halves of the groups each, as the loader's threads split them.
    for (int64_t g0 : {0, 2}) {
      const int64_t g1 = g0 == 0 ? 2 : rows / kernels::kInterleaveRows;
      InterleaveRows(a, fused_bytes.data(), g0, g1, 2 * group_bytes);
      InterleaveRows(b, fused_bytes.data() + group_bytes, g0, g1, 2 * group_bytes);
    }
    for (size_t i = 2 * a_bytes.size(); i < fused_bytes.size(); ++i) {
      ASSERT_EQ(fused_bytes[i], 0xa5) << TypeTraits(t).name << ": wrote past the fused matrix";
    }
    WeightMatrix fused = a;
    fused.rows = 2 * rows;
    fused.data = fused_bytes.data();
    fused.layout = WeightLayout::kInterleaved16;
    std::vector<uint8_t> row(a.row_bytes);
    for (int64_t r = 0; r < fused.rows; ++r) {
      const int64_t group = r / kernels::kInterleaveRows;
      const auto& src = group % 2 == 0 ? a_bytes : b_bytes;
      const int64_t src_row = group / 2 * kernels::kInterleaveRows + r % kernels::kInterleaveRows;
      DeinterleaveRow(fused, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), src.data() + src_row * a.row_bytes, a.row_bytes))
          << TypeTraits(t).name << " fused row " << r;
    }
  }
}

struct Param {
  GgmlType type;
  IsaLevel level;
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(TypeTraits(info.param.type).name) + "_" +
         std::string(IsaLevelName(info.param.level));
}

std::vector<Param> AllParams() {
  std::vector<Param> out;
  for (GgmlType t : kTypes) {
    for (IsaLevel l : SupportedLevels()) out.push_back({t, l});
  }
  return out;
}

class InterleavedParity : public ::testing::TestWithParam<Param> {
 protected:
  std::vector<float> Run(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens) {
    const KernelTable& table = KernelsFor(GetParam().level);
    std::vector<float> y(static_cast<size_t>(n_tokens * w.rows) + 8, kGuard);
    table.matmul(w, x.data(), n_tokens, y.data(), pool_);
    for (size_t i = y.size() - 8; i < y.size(); ++i) EXPECT_EQ(y[i], kGuard) << "wrote past y";
    y.resize(y.size() - 8);
    return y;
  }

  void Check(const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols, int64_t n_tokens,
             uint32_t seed) {
    const GgmlType type = GetParam().type;
    const WeightMatrix w = testing::View(type, bytes, rows, cols);
    const Repacked r = Repack(w);
    const std::vector<float> x = testing::RandomNormal(seed, n_tokens * cols);
    const std::vector<float> y = Run(r.w, x, n_tokens);
    const std::vector<float> twin = testing::TwinMatmul(w, x.data(), n_tokens);
    const std::vector<double> mag = testing::AbsMagnitude(w, x.data(), n_tokens);
    const std::vector<double> deq = testing::DequantMatmul(w, x.data(), n_tokens);
    const std::vector<double> bound = testing::ActQuantBound(w, x.data(), n_tokens);
    int failures = 0;
    for (int64_t i = 0; i < n_tokens * rows && failures < 5; ++i) {
      const double tol = kTwinRelTol * mag[i] + kAbsFloor;
      const std::string where = "rows=" + std::to_string(rows) + " cols=" +
                                std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens) +
                                " t=" + std::to_string(i / rows) + " r=" + std::to_string(i % rows);
      if (!(std::fabs(y[i] - twin[i]) <= tol)) ++failures;
      EXPECT_NEAR(y[i], twin[i], tol) << where;
      EXPECT_NEAR(y[i], deq[i], 1.0001 * bound[i] + tol) << where << " (vs dequantized f64)";
    }
  }

  ComputePool pool_{3};
};

TEST_P(InterleavedParity, QuantizedRandomWeights) {
  uint32_t seed = 10;
  for (int variant : {0, 1}) {
    for (int64_t rows : {16, 48, 160}) {
      const int64_t cols = ColsFor(GetParam().type, variant);
      const auto bytes = testing::QuantizedRandomWeights(GetParam().type, rows, cols, seed++);
      for (int64_t n_tokens : {1, 2, 3, 4, 5, 8, 15, 17, 40, 70}) {
        Check(bytes, rows, cols, n_tokens, seed++);
      }
    }
  }
}

// Every bit pattern of levels and sub-block scales, every f16 scale lane.
TEST_P(InterleavedParity, RandomBlockBytes) {
  uint32_t seed = 200;
  for (int variant : {0, 1}) {
    const int64_t rows = 64, cols = ColsFor(GetParam().type, variant);
    const auto bytes = testing::RandomBlockBytes(GetParam().type, rows, cols, seed++);
    for (int64_t n_tokens : {1, 4, 7, 33}) Check(bytes, rows, cols, n_tokens, seed++);
  }
}

// A group with one repacked and one row-major matrix (and a third of another row count)
// equals the three products run one by one, with tolerance 0: the same kernels run either way.
TEST_P(InterleavedParity, MixedGroupEqualsSeparateProducts) {
  const GgmlType type = GetParam().type;
  const int64_t cols = ColsFor(type, 1);
  const KernelTable& table = KernelsFor(GetParam().level);
  const auto a = testing::QuantizedRandomWeights(type, 64, cols, 31);
  const auto b = testing::QuantizedRandomWeights(type, 40, cols, 32);  // 40: cannot repack
  const auto c = testing::QuantizedRandomWeights(type, 32, cols, 33);
  const Repacked ra = Repack(testing::View(type, a, 64, cols));
  const Repacked rc = Repack(testing::View(type, c, 32, cols));
  const WeightMatrix wb = testing::View(type, b, 40, cols);
  for (int64_t n_tokens : {1, 3, 40}) {
    const std::vector<float> x = testing::RandomNormal(34, n_tokens * cols);
    std::vector<float> ya(64 * n_tokens), yb(40 * n_tokens), yc(32 * n_tokens);
    MatmulGroup g;
    g.n = 3;
    g.w[0] = ra.w;
    g.w[1] = wb;
    g.w[2] = rc.w;
    g.y[0] = ya.data();
    g.y[1] = yb.data();
    g.y[2] = yc.data();
    RunMatmulGroup(table, g, x.data(), n_tokens, pool_);
    std::vector<float> sa(ya.size()), sb(yb.size()), sc(yc.size());
    table.matmul(ra.w, x.data(), n_tokens, sa.data(), pool_);
    table.matmul(wb, x.data(), n_tokens, sb.data(), pool_);
    table.matmul(rc.w, x.data(), n_tokens, sc.data(), pool_);
    EXPECT_EQ(ya, sa) << "n_tokens " << n_tokens;
    EXPECT_EQ(yb, sb) << "n_tokens " << n_tokens;
    EXPECT_EQ(yc, sc) << "n_tokens " << n_tokens;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllLevels, InterleavedParity, ::testing::ValuesIn(AllParams()),
                         ParamName);

TEST(Interleave, ReferenceTableReadsInterleavedRowsExactly) {
  ComputePool pool(2);
  for (GgmlType t : kTypes) {
    const int64_t rows = 32, cols = ColsFor(t, 0);
    const auto bytes = testing::QuantizedRandomWeights(t, rows, cols, 41);
    const WeightMatrix w = testing::View(t, bytes, rows, cols);
    const Repacked r = Repack(w);
    const std::vector<float> x = testing::RandomNormal(42, 3 * cols);
    std::vector<float> y0(3 * rows), y1(3 * rows);
    ReferenceKernels().matmul(w, x.data(), 3, y0.data(), pool);
    ReferenceKernels().matmul(r.w, x.data(), 3, y1.data(), pool);
    EXPECT_EQ(y0, y1) << TypeTraits(t).name;
  }
}

TEST(Interleave, TablesSayWhichTypesTheyWantRepacked) {
  for (IsaLevel l : SupportedLevels()) {
    const uint32_t bits = KernelsFor(l).interleaved_types;
    std::string names;
    for (GgmlType t : kTypes) {
      if (bits >> static_cast<uint32_t>(t) & 1u) names += " " + std::string(TypeTraits(t).name);
    }
    std::printf("[interleave] %s table repacks:%s\n", std::string(IsaLevelName(l)).c_str(),
                names.empty() ? " nothing" : names.c_str());
    // Only types with a layout can be asked for.
    for (uint32_t id = 0; id < 32; ++id) {
      if ((bits >> id & 1u) == 0) continue;
      const auto traits = GetTypeTraits(id);
      ASSERT_TRUE(traits.has_value());
      EXPECT_TRUE(kernels::HasInterleavedLayout(traits->type)) << traits->name;
    }
  }
}

}  // namespace
}  // namespace lifeline
