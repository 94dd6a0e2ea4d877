// PredictionAudit: admission's predictions against measured first tokens, on hand-made
// observations (no clock but the timestamps given).
#include "slo/prediction_audit.h"

#include <cmath>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

// The first run's second model: predictions 10x high (1102 ms predicted, ~110 ms measured).
// Four requests in, the correction has taken out most of the error: the predictions as made
// are back within a factor 1.6 of what happens, not 10x.
TEST(PredictionAuditTest, ATenfoldMispredictionIsCorrectedWithinAFewRequests) {
  PredictionAudit a;  // alpha 0.4
  EXPECT_DOUBLE_EQ(a.correction(), 1.0);
  std::vector<double> used;
  for (int i = 0; i < 6; ++i) {
    const double raw = 1100, measured = 110;
    const double corr = a.correction();
    used.push_back(measured / (raw * corr));
    a.Observe(raw, corr, measured, (i + 1) * 1000);
  }
  // The first observation seeds the mean at once: exp(log 0.1) = 0.1.
  EXPECT_NEAR(used[0], 0.1, 1e-12);
  EXPECT_NEAR(used[1], 1.0, 1e-9);
  EXPECT_NEAR(a.correction(), 0.1, 1e-9);
  // Too low works the same way: ten times slower than predicted.
  PredictionAudit slow;
  slow.Observe(100, 1.0, 1000, 0);
  EXPECT_NEAR(slow.correction(), 10, 1e-9);
  const PredictionAudit::Stats st = slow.Snapshot();
  EXPECT_EQ(st.count, 1u);
  EXPECT_DOUBLE_EQ(st.last_ratio, 10);
}

// A drift: the EWMA (alpha 0.4) moves 40 % of the way in log space per observation.
TEST(PredictionAuditTest, CorrectionIsAnEwmaOfLogRatiosWithinItsBounds) {
  PredictionAudit a(0.4, 20.0);
  a.Observe(100, 1.0, 100, 0);  // exact: log 1 = 0
  a.Observe(100, 1.0, 200, 1);  // log 2
  EXPECT_NEAR(a.correction(), std::exp(0.4 * std::log(2.0)), 1e-12);
  PredictionAudit far(0.4, 20.0);
  far.Observe(1, 1.0, 1000, 0);  // 1000x slow: clamped to 20
  EXPECT_DOUBLE_EQ(far.correction(), 20);
  // Bad inputs are ignored.
  far.Observe(0, 1.0, 10, 1);
  far.Observe(10, 1.0, -1, 2);
  far.Observe(10, 1.0, std::nan(""), 3);
  EXPECT_EQ(far.Snapshot().count, 1u);
}

TEST(PredictionAuditTest, ErrorDistributionOfThePredictionsAsMade) {
  PredictionAudit a;
  // Ratios as made (measured / (raw x correction in force)): 0.5, 1.0, 1.0, 2.0, 4.0.
  const double ratios[] = {0.5, 1.0, 1.0, 2.0, 4.0};
  for (int i = 0; i < 5; ++i) a.Observe(100, 2.0, 200 * ratios[i], i);
  const PredictionAudit::Stats st = a.Snapshot();
  EXPECT_EQ(st.count, 5u);
  EXPECT_EQ(st.recent, 5u);
  EXPECT_DOUBLE_EQ(st.p10, 0.5);
  EXPECT_DOUBLE_EQ(st.p50, 1.0);
  EXPECT_DOUBLE_EQ(st.p90, 4.0);
  EXPECT_DOUBLE_EQ(st.within_25pct, 0.4);
  EXPECT_DOUBLE_EQ(st.sum, 8.5);
  // Buckets per RatioBounds (le): 0.5 -> le 0.5, 1.0 -> le 1.0 (x2), 2.0 -> le 2, 4 -> le 4.
  const auto bounds = PredictionAudit::RatioBounds();
  ASSERT_EQ(st.buckets.size(), bounds.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i < st.buckets.size(); ++i) {
    total += st.buckets[i];
    if (i < bounds.size() && bounds[i] == 1.0) {
      EXPECT_EQ(st.buckets[i], 2u);
    }
  }
  EXPECT_EQ(total, 5u);
}

// The spread: the 95th percentile of the ratios as made, once 20 were checked.
TEST(PredictionAuditTest, SpreadIsTheNinetyFifthPercentileAfterTwentyChecks) {
  PredictionAudit a;
  for (int i = 1; i <= 19; ++i) a.Observe(100, 1.0, 100, i);
  EXPECT_DOUBLE_EQ(a.spread_q95(), 0.0) << "too few checks";
  // Correction stays 1 (exact predictions); then 20 ratios: 19 x 1.0 and one 3.0.
  a.Observe(100, 1.0, 300, 20);
  // Nearest rank: ceil(0.95 x 20) = 19th of the sorted ratios -> 1.0; one more 3.0 makes the
  // 20th of 21 the 3.0.
  EXPECT_DOUBLE_EQ(a.spread_q95(), 1.0);
  a.Observe(100, a.correction(), 300 * a.correction(), 21);
  EXPECT_DOUBLE_EQ(a.spread_q95(), 3.0);
}

// Everything shed on a prediction leaves nothing to check it with: after stale_after_ms
// without an observation one request is let through as a probe, once per period.
TEST(PredictionAuditTest, UncheckedPredictionsGoStaleAndAllowOneProbe) {
  PredictionAudit a(0.4, 20.0, 1000);
  EXPECT_FALSE(a.Stale(10'000'000)) << "never observed: the speed estimate's probe decides";
  a.Observe(100, 1.0, 1000, 1'000'000);
  EXPECT_FALSE(a.TryClaimProbe(1'500'000));
  EXPECT_TRUE(a.TryClaimProbe(2'000'000));
  EXPECT_FALSE(a.TryClaimProbe(2'000'001)) << "one probe per period";
  EXPECT_TRUE(a.TryClaimProbe(3'000'000));
  a.Observe(100, 1.0, 100, 3'100'000);
  EXPECT_FALSE(a.Stale(3'200'000));
}

}  // namespace
}  // namespace lifeline::slo
