// Percentiles (nearest rank), summaries, goodput, the early-stop rule and knee detection on
// small latency lists whose answers are worked out by hand in the comments.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "bench/loadgen/stats.h"

namespace lifeline::loadgen {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Percentile, NearestRankTextbookExample) {
  // The classic nearest-rank example: 15, 20, 35, 40, 50 (n = 5).
  // P5: ceil(0.25) = 1 -> 15; P30: ceil(1.5) = 2 -> 20; P40: ceil(2.0) = 2 -> 20;
  // P50: ceil(2.5) = 3 -> 35; P100: rank 5 -> 50.
  const std::vector<double> v = {50, 15, 40, 20, 35};  // order does not matter
  EXPECT_EQ(Percentile(v, 5), 15);
  EXPECT_EQ(Percentile(v, 30), 20);
  EXPECT_EQ(Percentile(v, 40), 20);
  EXPECT_EQ(Percentile(v, 50), 35);
  EXPECT_EQ(Percentile(v, 100), 50);
  EXPECT_EQ(Percentile(v, 0), 15);  // rank clamped to 1
  // P25: ceil(1.25) = 2 -> 20 (a rounded rank would give 15). P30 above is 20 where linear
  // interpolation between closest ranks would give 20 + 0.2 * 15 = 23.
  EXPECT_EQ(Percentile(v, 25), 20);
  EXPECT_EQ(Percentile(v, 75), 40);  // ceil(3.75) = 4
}

TEST(Percentile, TwentyValues) {
  // 10, 20, ..., 200. P50 = rank 10 -> 100; P90 = rank 18 -> 180; P95 = rank 19 -> 190;
  // P99 = ceil(19.8) = 20 -> 200.
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(10.0 * i);
  EXPECT_EQ(Percentile(v, 50), 100);
  EXPECT_EQ(Percentile(v, 90), 180);
  EXPECT_EQ(Percentile(v, 95), 190);
  EXPECT_EQ(Percentile(v, 99), 200);
  EXPECT_EQ(NearestRank(20, 95), 19);
  EXPECT_EQ(NearestRank(7, 95), 7);   // ceil(6.65)
  EXPECT_EQ(NearestRank(100, 95), 95);
  EXPECT_EQ(NearestRank(0, 95), 0);
}

TEST(Percentile, EmptyIsNaN) {
  EXPECT_TRUE(std::isnan(Percentile(std::vector<double>{}, 95)));
  const LatencySummary s = Summarize(std::vector<double>{});
  EXPECT_EQ(s.count, 0);
  EXPECT_TRUE(std::isnan(s.p95));
  EXPECT_TRUE(std::isnan(s.mean));
}

TEST(Summarize, MeanPercentilesMaxIgnoringNonFinite) {
  // 100, 200, 300, 400: mean 250; P50 rank 2 -> 200; P90 ceil(3.6) = 4 -> 400; P99 -> 400.
  const std::vector<double> v = {400, kInf, 100, 300, std::nan(""), 200};
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.mean, 250);
  EXPECT_EQ(s.p50, 200);
  EXPECT_EQ(s.p90, 400);
  EXPECT_EQ(s.p95, 400);
  EXPECT_EQ(s.p99, 400);
  EXPECT_EQ(s.max, 400);
}

TEST(Goodput, CountsValuesAtOrUnderTheThreshold) {
  // 100 and 387 meet a 387 ms SLO; 388 and a failure (+inf) do not: 2 good in 4 s = 0.5/s.
  const std::vector<double> v = {100, 387, 388, kInf};
  EXPECT_EQ(CountMeetingSlo(v, 387), 2);
  EXPECT_DOUBLE_EQ(GoodputRps(v, 387, 4.0), 0.5);
  EXPECT_EQ(GoodputRps(v, 387, 0), 0);
}

TEST(SmoothGoodput, RefusedAndFailedRequestsCountAgainstIt) {
  // 8 met the SLO, 2 refused (429/503), 1 failed, over 4 s: (8 - 2 - 1) / 4 = 1.25/s, where
  // goodput reads 8 / 4 = 2/s.
  EXPECT_DOUBLE_EQ(SmoothGoodputRps(8, 2, 1, 4.0), 1.25);
  // Shedding to protect the rest only pays when it saves more than it refuses: a server that
  // refuses 4 so that 6 meet the SLO scores (6 - 4) / 4 = 0.5/s, below one that serves 5 in time
  // and 5 late with no refusal (5 / 4 = 1.25/s).
  EXPECT_LT(SmoothGoodputRps(6, 4, 0, 4.0), SmoothGoodputRps(5, 0, 0, 4.0));
  // Floored at 0; no duration, no rate.
  EXPECT_EQ(SmoothGoodputRps(1, 5, 5, 4.0), 0);
  EXPECT_EQ(SmoothGoodputRps(8, 0, 0, 0), 0);
}

TEST(EarlyStop, HandWorkedCases) {
  // n = 20: P95 is the 19th smallest, so 1 bad request can still leave P95 fine, 2 cannot.
  EXPECT_FALSE(PercentileDecidedAbove(1, 20, 95));
  EXPECT_TRUE(PercentileDecidedAbove(2, 20, 95));
  // n = 100: the 95th smallest; 5 bad are tolerable, 6 are not.
  EXPECT_FALSE(PercentileDecidedAbove(5, 100, 95));
  EXPECT_TRUE(PercentileDecidedAbove(6, 100, 95));
  // n = 10: ceil(9.5) = 10, the maximum: a single bad request decides it.
  EXPECT_TRUE(PercentileDecidedAbove(1, 10, 95));
  EXPECT_FALSE(PercentileDecidedAbove(0, 10, 95));
  EXPECT_FALSE(PercentileDecidedAbove(100, 0, 95));  // unknown size never decides
}

TEST(EarlyStop, AgreesWithTheFinalPercentileForEveryOutcome) {
  // Whatever the remaining requests do, the final P95 is above the threshold exactly when
  // the rule says so: check every (n, bad) with the best case for the rest (all fast).
  for (int64_t n = 1; n <= 60; ++n) {
    for (int64_t bad = 0; bad <= n; ++bad) {
      std::vector<double> v(static_cast<size_t>(n), 1.0);
      for (int64_t i = 0; i < bad; ++i) v[static_cast<size_t>(i)] = kInf;
      const bool above = !(Percentile(v, 95) <= 10.0);
      EXPECT_EQ(PercentileDecidedAbove(bad, n, 95), above) << "n=" << n << " bad=" << bad;
    }
  }
}

TEST(Knee, HighestPassingLoadBeforeTheFirstFailure) {
  const double thr = 387;
  // 1 -> 100 ms, 2 -> 200 ms pass; 4 -> 500 ms fails; 8 passing again does not count.
  const std::vector<SweepPoint> a = {{1, 100, true}, {2, 200, true}, {4, 500, true}, {8, 300, true}};
  EXPECT_EQ(FindKnee(a, thr), 2.0);
  const std::vector<SweepPoint> all_pass = {{1, 100, true}, {2, 387, true}};  // equal passes
  EXPECT_EQ(FindKnee(all_pass, thr), 2.0);
  const std::vector<SweepPoint> first_fails = {{1, 388, true}, {2, 100, true}};
  EXPECT_FALSE(FindKnee(first_fails, thr).has_value());
  const std::vector<SweepPoint> skipped = {{1, 100, true}, {2, 100, false}};
  EXPECT_EQ(FindKnee(skipped, thr), 1.0);
  const std::vector<SweepPoint> nan_p95 = {{1, 100, true}, {2, std::nan(""), true}};
  EXPECT_EQ(FindKnee(nan_p95, thr), 1.0);
  const std::vector<SweepPoint> infinite = {{1, kInf, true}};
  EXPECT_FALSE(FindKnee(infinite, thr).has_value());
}

}  // namespace
}  // namespace lifeline::loadgen
