// OpProfile: with a profile installed, every RunMatmulGroup call adds one call, its weight
// bytes and its time to the entry of its matrices and token class; with none installed
// nothing is recorded.
#include "engine/kernels/op_profile.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "kernels/matmul_test_util.h"

namespace lifeline {
namespace {

TEST(OpProfile, RecordsEachGroupCallByMatricesAndTokenClass) {
  ComputePool pool(2);
  const int64_t cols = 64;
  const auto a = testing::QuantizedRandomWeights(GgmlType::kQ8_0, 32, cols, 1);
  const auto b = testing::QuantizedRandomWeights(GgmlType::kQ4_0, 16, cols, 2);
  MatmulGroup g;
  g.n = 2;
  g.w[0] = testing::View(GgmlType::kQ8_0, a, 32, cols);
  g.w[1] = testing::View(GgmlType::kQ4_0, b, 16, cols);
  std::vector<float> y0(32 * 3), y1(16 * 3);
  g.y[0] = y0.data();
  g.y[1] = y1.data();
  const std::vector<float> x = testing::RandomNormal(3, 3 * cols);
  const double group_bytes = 32.0 * g.w[0].row_bytes + 16.0 * g.w[1].row_bytes;

  OpProfile profile;
  RunMatmulGroup(BestKernels(), g, x.data(), 1, pool);  // not installed: not recorded
  SetOpProfile(&profile);
  RunMatmulGroup(BestKernels(), g, x.data(), 1, pool);
  RunMatmulGroup(BestKernels(), g, x.data(), 1, pool);
  RunMatmulGroup(BestKernels(), g, x.data(), 3, pool);
  SetOpProfile(nullptr);
  RunMatmulGroup(BestKernels(), g, x.data(), 1, pool);  // uninstalled again

  const std::vector<OpProfileEntry> e = profile.Entries();
  ASSERT_EQ(e.size(), 2u);
  int64_t decode_calls = 0, batch_calls = 0;
  for (const OpProfileEntry& entry : e) {
    EXPECT_EQ(entry.key, "q8_0 32x64 + q4_0 16x64");
    EXPECT_EQ(entry.weight_bytes, group_bytes * entry.calls);
    // Multiply-adds: tokens x rows x cols of both matrices per call.
    EXPECT_EQ(entry.macs, (entry.decode ? 1.0 : 3.0) * (32 + 16) * cols * entry.calls);
    EXPECT_GT(entry.seconds, 0.0);
    (entry.decode ? decode_calls : batch_calls) += entry.calls;
  }
  EXPECT_EQ(decode_calls, 2);
  EXPECT_EQ(batch_calls, 1);
  EXPECT_DOUBLE_EQ(profile.TotalSeconds(), e[0].seconds + e[1].seconds);
  // Each fused group call quantizes its activations once, timed as a stage.
  const std::vector<OpStage> stages = profile.Stages();
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(std::string(stages[0].name), "activation quantization (+ fused RMSNorm)");
  EXPECT_EQ(stages[0].calls, 3);
  EXPECT_GT(stages[0].seconds, 0.0);
  EXPECT_LT(stages[0].seconds, profile.TotalSeconds());
  profile.Reset();
  EXPECT_TRUE(profile.Entries().empty());
  EXPECT_TRUE(profile.Stages().empty());
}

TEST(OpProfile, StageTimersRecordOnlyWhileAProfileIsInstalled) {
  OpProfile profile;
  { const OpStageTimer t("attention"); }  // not installed: not recorded
  SetOpProfile(&profile);
  { const OpStageTimer t("attention"); }
  { const OpStageTimer t("embedding"); }
  { const OpStageTimer t("attention"); }
  SetOpProfile(nullptr);
  { const OpStageTimer t("attention"); }
  const std::vector<OpStage> stages = profile.Stages();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(std::string(stages[0].name), "attention");  // in the order first seen
  EXPECT_EQ(stages[0].calls, 2);
  EXPECT_EQ(std::string(stages[1].name), "embedding");
  EXPECT_EQ(stages[1].calls, 1);
}

}  // namespace
}  // namespace lifeline
