// Fused products (MatmulGroup): for every ISA level this CPU supports, a group must give
// exactly the outputs of separate matmul calls of the same table (same activation
// quantization, same tile kernels: bit-identical, tolerance 0), run its epilogue once per
// output row with those rows already final, and run its prologue once per token row before
// the row is read. Shapes: row counts that are not multiples of the chunk quantum (16) or of
// the thread count, token counts for the GEMV tiles (1, 3) and the packed GEMM (40), pools of
// 1 and 3 threads; mixed weight types that share an activation format (Q4_K + Q6_K, as
// Q4_K_M files mix them) and ones that do not (Q8_0 + Q4_1: the unfused fallback).
#include <atomic>
#include <cstdint>
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

struct Mat {
  GgmlType type;
  int64_t rows;
};

// What the hooks saw, checked after the call.
struct HookLog {
  int64_t n_tokens = 0;
  int64_t cols = 0;
  int n = 0;
  bool row_aligned = false;
  const float* src = nullptr;            // prologue: x[t] = 2 * src[t]
  float* x = nullptr;
  std::vector<std::atomic<int>>* token_hits = nullptr;
  std::vector<std::atomic<int>>* row_hits[3] = {};   // per matrix, per row
  const std::vector<float>* want[3] = {};  // the final outputs, [n_tokens, rows]
  float* y[3] = {};
  int64_t rows[3] = {};
  int64_t ld[3] = {};  // row stride of y[i]
  int64_t epilogue_rows = 0;  // MatmulGroup::epilogue_rows
  std::atomic<int> bad_mat{0};
  std::atomic<int> not_final{0};
  std::atomic<int> misaligned{0};

  static void Prologue(const void* p, int64_t t0, int64_t t1) {
    const auto& h = *static_cast<const HookLog*>(p);
    for (int64_t t = t0; t < t1; ++t) {
      (*h.token_hits)[static_cast<size_t>(t)].fetch_add(1);
      for (int64_t c = 0; c < h.cols; ++c) h.x[t * h.cols + c] = 2.0f * h.src[t * h.cols + c];
    }
  }

  static void Epilogue(const void* p, int mat, int64_t r0, int64_t r1) {
    auto& h = *const_cast<HookLog*>(static_cast<const HookLog*>(p));
    if (h.row_aligned != (mat == -1) || mat >= h.n) {
      h.bad_mat.fetch_add(1);
      return;
    }
    const int first = mat == -1 ? 0 : mat;
    const int last = mat == -1 ? h.n - 1 : mat;
    if (h.epilogue_rows > 0 &&
        (r0 % h.epilogue_rows != 0 || (r1 % h.epilogue_rows != 0 && r1 != h.rows[first]))) {
      h.misaligned.fetch_add(1);
    }
    for (int i = first; i <= last; ++i) {
      for (int64_t r = r0; r < r1; ++r) {
        (*h.row_hits[i])[static_cast<size_t>(r)].fetch_add(1);
        for (int64_t t = 0; t < h.n_tokens; ++t) {
          const size_t k = static_cast<size_t>(t * h.rows[i] + r);
          if (h.y[i][t * h.ld[i] + r] != (*h.want[i])[k]) h.not_final.fetch_add(1);
        }
      }
    }
  }
};

void CheckGroup(IsaLevel level, const std::vector<Mat>& mats, bool row_aligned, int64_t cols,
                int64_t n_tokens, int n_threads, uint32_t seed, int64_t epilogue_rows = 0,
                int64_t pad_floats = 0) {
  const std::string where = std::string(IsaLevelName(level)) + " n_tokens=" +
                            std::to_string(n_tokens) + " threads=" + std::to_string(n_threads) +
                            " epilogue_rows=" + std::to_string(epilogue_rows) +
                            " pad=" + std::to_string(pad_floats) +
                            " first type=" + std::string(TypeTraits(mats[0].type).name) +
                            (row_aligned ? " aligned" : " concatenated");
  const KernelTable& table = KernelsFor(level);
  ASSERT_NE(table.matmul_group, nullptr) << where;
  ComputePool pool(n_threads);
  const int n = static_cast<int>(mats.size());
  std::vector<std::vector<uint8_t>> bytes;
  MatmulGroup g;
  g.n = n;
  g.row_aligned = row_aligned;
  g.epilogue_rows = epilogue_rows;
  for (int i = 0; i < n; ++i) {
    bytes.push_back(testing::QuantizedRandomWeights(mats[i].type, mats[i].rows, cols, seed + i));
  }
  for (int i = 0; i < n; ++i) g.w[i] = testing::View(mats[i].type, bytes[i], mats[i].rows, cols);

  const std::vector<float> src = testing::RandomNormal(seed + 10, n_tokens * cols);
  std::vector<float> doubled(src.size());
  for (size_t i = 0; i < src.size(); ++i) doubled[i] = 2.0f * src[i];

  // Expected: the table's own matmul, one matrix at a time, on the prologue's output.
  std::vector<std::vector<float>> want(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    want[i].assign(static_cast<size_t>(n_tokens * mats[i].rows), 0.0f);
    table.matmul(g.w[i], doubled.data(), n_tokens, want[i].data(), pool);
  }

  constexpr float kGuard = -12345.0f;
  std::vector<std::vector<float>> y(static_cast<size_t>(n));
  std::vector<std::vector<std::atomic<int>>> row_hits(static_cast<size_t>(n));
  std::vector<std::atomic<int>> token_hits(static_cast<size_t>(n_tokens));
  std::vector<float> x(src.size() + 1, kGuard);  // written only by the prologue
  HookLog log;
  log.n_tokens = n_tokens;
  log.cols = cols;
  log.n = n;
  log.row_aligned = row_aligned;
  log.epilogue_rows = epilogue_rows;
  log.src = src.data();
  log.x = x.data();
  log.token_hits = &token_hits;
  for (int i = 0; i < n; ++i) {
    const int64_t ld = mats[i].rows + pad_floats;
    y[i].assign(static_cast<size_t>(n_tokens * ld) + 1, kGuard);
    if (pad_floats > 0) g.ldy[i] = ld;
    row_hits[i] = std::vector<std::atomic<int>>(static_cast<size_t>(mats[i].rows));
    g.y[i] = y[i].data();
    log.row_hits[i] = &row_hits[i];
    log.want[i] = &want[i];
    log.y[i] = y[i].data();
    log.rows[i] = mats[i].rows;
    log.ld[i] = mats[i].rows + pad_floats;
  }
  g.prologue = &HookLog::Prologue;
  g.prologue_ctx = &log;
  g.epilogue = &HookLog::Epilogue;
  g.epilogue_ctx = &log;
  table.matmul_group(g, x.data(), n_tokens, pool);

  for (int64_t t = 0; t < n_tokens; ++t) EXPECT_EQ(token_hits[t].load(), 1) << where << " t=" << t;
  EXPECT_EQ(x.back(), kGuard) << where;
  EXPECT_EQ(log.bad_mat.load(), 0) << where;
  EXPECT_EQ(log.not_final.load(), 0) << where << ": epilogue saw rows that were not final";
  EXPECT_EQ(log.misaligned.load(), 0) << where << ": an epilogue range off epilogue_rows";
  for (int i = 0; i < n; ++i) {
    for (int64_t r = 0; r < mats[i].rows; ++r) {
      ASSERT_EQ(row_hits[i][r].load(), 1) << where << " mat=" << i << " r=" << r;
    }
    EXPECT_EQ(y[i].back(), kGuard) << where << ": wrote past y of matrix " << i;
    // Rows of ld floats: the first w.rows of each hold the product, the padding is untouched.
    const int64_t ld = mats[i].rows + pad_floats;
    std::vector<float> got, pad;
    for (int64_t t = 0; t < n_tokens; ++t) {
      got.insert(got.end(), y[i].begin() + t * ld, y[i].begin() + t * ld + mats[i].rows);
      pad.insert(pad.end(), y[i].begin() + t * ld + mats[i].rows, y[i].begin() + (t + 1) * ld);
    }
    EXPECT_EQ(pad, std::vector<float>(pad.size(), kGuard)) << where << ": wrote into the padding";
    ASSERT_EQ(got, want[i]) << where << " matrix " << i;
  }
}

// Q, K and V: three matrices of different heights, one input.
TEST(MatmulGroup, ConcatenatedMatchesSeparateProducts) {
  uint32_t seed = 1;
  for (IsaLevel l : SupportedLevels()) {
    for (int threads : {1, 2, 3}) {
      for (int64_t n_tokens : {1, 3, 40}) {
        CheckGroup(l, {{GgmlType::kQ8_0, 200}, {GgmlType::kQ8_0, 37}, {GgmlType::kQ8_0, 37}},
                   false, 256, n_tokens, threads, seed += 20);
        // Decode splits the joined rows into one slab per thread: with 2 or 3 threads the
        // slab edge falls inside the second matrix, not the first.
        CheckGroup(l, {{GgmlType::kQ8_0, 40}, {GgmlType::kQ8_0, 300}, {GgmlType::kQ8_0, 300}},
                   false, 256, n_tokens, threads, seed += 20);
        CheckGroup(l, {{GgmlType::kQ4_0, 130}, {GgmlType::kQ4_0, 18}, {GgmlType::kQ4_0, 18}},
                   false, 512, n_tokens, threads, seed += 20);
        // Q4_K_M mixes Q4_K and Q6_K; both read Q8_K activations: still one product.
        CheckGroup(l, {{GgmlType::kQ4_K, 96}, {GgmlType::kQ6_K, 19}, {GgmlType::kQ4_K, 19}},
                   false, 512, n_tokens, threads, seed += 20);
      }
    }
  }
}

// Gate and up: the same height, the epilogue sees the same rows of both.
TEST(MatmulGroup, RowAlignedMatchesSeparateProducts) {
  uint32_t seed = 500;
  for (IsaLevel l : SupportedLevels()) {
    for (int threads : {1, 3}) {
      for (int64_t n_tokens : {1, 3, 40}) {
        CheckGroup(l, {{GgmlType::kQ8_0, 333}, {GgmlType::kQ8_0, 333}}, true, 256, n_tokens,
                   threads, seed += 20);
        CheckGroup(l, {{GgmlType::kQ4_K, 170}, {GgmlType::kQ4_K, 170}}, true, 256, n_tokens,
                   threads, seed += 20);
        CheckGroup(l, {{GgmlType::kF32, 65}, {GgmlType::kF32, 65}}, true, 96, n_tokens,
                   threads, seed += 20);
      }
    }
  }
}

// Decode walks each thread's slab in pieces of about 256 KiB of one matrix's rows (at least
// 64), shrinking to ~64 KiB (at least 16) as the slab runs out: wide rows make many pieces
// of several sizes per slab, so threads that finish early take pieces from the back of
// another's slab, and piece edges fall inside matrices whose heights are not multiples of
// 16. Every row still computed once, its epilogue after it is final.
TEST(MatmulGroup, DecodeSlabsOfManyPieces) {
  uint32_t seed = 700;
  for (IsaLevel l : SupportedLevels()) {
    for (int threads : {2, 3}) {
      CheckGroup(l, {{GgmlType::kQ8_0, 600}, {GgmlType::kQ8_0, 200}, {GgmlType::kQ8_0, 40}},
                 false, 4096, 1, threads, seed += 20);
      CheckGroup(l, {{GgmlType::kQ8_0, 500}, {GgmlType::kQ8_0, 500}}, true, 4096, 1, threads,
                 seed += 20);
    }
  }
}

// epilogue_rows = 32 (the fused gate/up matrix: SwiGLU needs a gate group and the up group
// after it in one range): every range starts and ends on a multiple of 32 rows or at the
// matrix end, in the decode slabs and their shrinking pieces (1 token, 2 and 3 threads), the
// shared chunk counter (3 tokens) and the epilogue pass after the packed GEMM (40 tokens).
// Wide rows make pieces of 32-64 rows, whose edges 16-row quanta would put mid-pair.
TEST(MatmulGroup, EpilogueRangesKeepTheirRowMultiple) {
  uint32_t seed = 900;
  for (IsaLevel l : SupportedLevels()) {
    for (int threads : {1, 2, 3}) {
      for (int64_t n_tokens : {1, 3, 40}) {
        CheckGroup(l, {{GgmlType::kQ8_0, 1120}}, false, 4096, n_tokens, threads, seed += 20,
                   32);
        CheckGroup(l, {{GgmlType::kQ4_K, 352}}, false, 512, n_tokens, threads, seed += 20, 32);
      }
    }
  }
}

// Output rows ldy floats apart (MatmulGroup::ldy): the same values in the first w.rows of
// each row, nothing written to the padding, on the decode tiles (1 token), the shared chunk
// counter (3) and the packed GEMM (40), and through the unfused fallback (Q8_0 + Q4_1 read
// different activation formats).
TEST(MatmulGroup, PaddedOutputRows) {
  uint32_t seed = 1100;
  for (IsaLevel l : SupportedLevels()) {
    for (int threads : {1, 2}) {
      for (int64_t n_tokens : {1, 3, 40}) {
        CheckGroup(l, {{GgmlType::kQ8_0, 96}, {GgmlType::kQ8_0, 37}}, false, 256, n_tokens,
                   threads, seed += 20, 0, 16);
        CheckGroup(l, {{GgmlType::kQ4_K, 64}, {GgmlType::kQ4_K, 64}}, true, 256, n_tokens,
                   threads, seed += 20, 32, 5);
        CheckGroup(l, {{GgmlType::kQ8_0, 48}, {GgmlType::kQ4_1, 32}}, false, 256, n_tokens,
                   threads, seed += 20, 0, 16);
      }
    }
  }
}

// Different activation formats (Q8_0 and Q8_1) or a type without a tile kernel cannot share
// one quantization: the group falls back to separate products, with the same hook contract.
TEST(MatmulGroup, UnfusableGroupsFallBack) {
  uint32_t seed = 900;
  for (IsaLevel l : SupportedLevels()) {
    for (int64_t n_tokens : {1, 40}) {
      CheckGroup(l, {{GgmlType::kQ8_0, 45}, {GgmlType::kQ4_1, 45}}, true, 256, n_tokens, 3,
                 seed += 20);
      CheckGroup(l, {{GgmlType::kQ8_0, 45}, {GgmlType::kQ4_1, 21}, {GgmlType::kQ8_0, 7}}, false,
                 256, n_tokens, 3, seed += 20);
    }
  }
}

// The unfused twin of the model's path: a table without matmul_group runs the same hooks
// around plain matmul calls.
TEST(MatmulGroup, RunMatmulGroupWithoutGroupEntry) {
  const int64_t rows = 40, cols = 64, n_tokens = 3;
  const auto bytes = testing::QuantizedRandomWeights(GgmlType::kQ8_0, rows, cols, 3);
  const WeightMatrix w = testing::View(GgmlType::kQ8_0, bytes, rows, cols);
  const std::vector<float> x = testing::RandomNormal(4, n_tokens * cols);
  ComputePool pool(2);
  KernelTable unfused = BestKernels();
  unfused.matmul_group = nullptr;
  std::vector<float> want(static_cast<size_t>(rows * n_tokens));
  BestKernels().matmul(w, x.data(), n_tokens, want.data(), pool);
  const std::vector<float> product = want;
  for (float& v : want) v += 1.0f;
  std::vector<float> y(want.size());
  MatmulGroup g;
  g.n = 1;
  g.w[0] = w;
  g.y[0] = y.data();
  int calls = 0;
  struct Ctx {
    float* y;
    int64_t rows, n_tokens;
    int* calls;
  } ctx{y.data(), rows, n_tokens, &calls};
  g.epilogue = [](const void* p, int mat, int64_t r0, int64_t r1) {
    const auto& c = *static_cast<const Ctx*>(p);
    ++*c.calls;
    EXPECT_EQ(mat, 0);
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      for (int64_t r = r0; r < r1; ++r) c.y[t * c.rows + r] += 1.0f;
    }
  };
  g.epilogue_ctx = &ctx;
  RunMatmulGroup(unfused, g, x.data(), n_tokens, pool);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(y, want);

  // Output rows ldy floats apart through the same fallback: the product in the first rows of
  // each, the padding untouched.
  const int64_t ld = rows + 7;
  std::vector<float> padded(static_cast<size_t>(ld * n_tokens), -7.0f);
  g.y[0] = padded.data();
  g.ldy[0] = ld;
  g.epilogue = nullptr;
  RunMatmulGroup(unfused, g, x.data(), n_tokens, pool);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < ld; ++r) {
      const float expect = r < rows ? product[static_cast<size_t>(t * rows + r)] : -7.0f;
      ASSERT_EQ(padded[static_cast<size_t>(t * ld + r)], expect) << "t=" << t << " r=" << r;
    }
  }
}

}  // namespace
}  // namespace lifeline
