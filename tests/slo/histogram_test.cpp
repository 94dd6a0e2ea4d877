// Histogram quantiles against exact order statistics, window expiry, Prometheus rendering.
#include "slo/histogram.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

// The nearest-rank order statistic, computed on sorted data (the definition in histogram.h).
double ExactQuantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (q <= 0) return v.front();
  if (q >= 1) return v.back();
  const auto rank = std::max<size_t>(1, static_cast<size_t>(std::ceil(q * v.size())));
  return v[rank - 1];
}

TEST(LogHistogramTest, DocumentedErrorCoversTheBucketGeometry) {
  // A midpoint estimate of a bucket [a, a g) is off by at most sqrt(g) - 1 relative.
  EXPECT_GE(LogHistogram::kRelativeError, std::sqrt(LogHistogram::kGrowth) - 1);
  EXPECT_LT(LogHistogram::kRelativeError, 0.01);
  // Enough buckets to span 1 us .. 1 h at that growth.
  EXPECT_GE(std::pow(LogHistogram::kGrowth, LogHistogram::RegularBuckets()),
            LogHistogram::kMaxMs / LogHistogram::kMinMs);
}

TEST(LogHistogramTest, EmptyIsZero) {
  LogHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Quantile(0.95), 0.0);
  EXPECT_EQ(h.mean_ms(), 0.0);
}

TEST(LogHistogramTest, SingleValueIsExact) {
  // Clamping to [min, max] makes a one-value histogram exact at every quantile.
  LogHistogram h;
  h.Record(123.456);
  for (double q : {0.0, 0.5, 0.95, 1.0}) EXPECT_DOUBLE_EQ(h.Quantile(q), 123.456);
}

TEST(LogHistogramTest, HundredIntegersHandRanks) {
  LogHistogram h;
  for (int i = 1; i <= 100; ++i) h.Record(i);
  // Nearest rank: P50 is the 50th value (50), P95 the 95th (95), P99 the 99th (99).
  EXPECT_NEAR(h.Quantile(0.50), 50, 50 * LogHistogram::kRelativeError);
  EXPECT_NEAR(h.Quantile(0.95), 95, 95 * LogHistogram::kRelativeError);
  EXPECT_NEAR(h.Quantile(0.99), 99, 99 * LogHistogram::kRelativeError);
  EXPECT_DOUBLE_EQ(h.Quantile(0), 1);
  EXPECT_DOUBLE_EQ(h.Quantile(1), 100);
  EXPECT_DOUBLE_EQ(h.sum_ms(), 5050);
  EXPECT_DOUBLE_EQ(h.mean_ms(), 50.5);
}

struct Dist {
  const char* name;
  std::function<double(std::mt19937_64&)> draw;
};

TEST(LogHistogramTest, RandomDataWithinDocumentedError) {
  const std::vector<Dist> dists = {
      {"lognormal", [](std::mt19937_64& g) { return std::lognormal_distribution<>(4.0, 1.5)(g); }},
      {"uniform", [](std::mt19937_64& g) { return std::uniform_real_distribution<>(0.01, 5000)(g); }},
      {"exponential", [](std::mt19937_64& g) { return std::exponential_distribution<>(1 / 80.0)(g); }},
      {"bimodal", [](std::mt19937_64& g) {
         return std::bernoulli_distribution(0.9)(g) ? std::normal_distribution<>(40, 3)(g) + 20
                                                    : std::normal_distribution<>(900, 50)(g);
       }},
  };
  const double qs[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};
  for (const Dist& d : dists) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      std::mt19937_64 gen(seed);
      std::vector<double> v;
      LogHistogram h;
      const int n = 20000 + static_cast<int>(seed) * 777;
      for (int i = 0; i < n; ++i) {
        const double x = std::max(0.002, d.draw(gen));
        v.push_back(x);
        h.Record(x);
      }
      for (double q : qs) {
        const double exact = ExactQuantile(v, q);
        EXPECT_LE(std::abs(h.Quantile(q) - exact), exact * LogHistogram::kRelativeError * (1 + 1e-9))
            << d.name << " seed " << seed << " q " << q << " exact " << exact;
      }
    }
  }
}

TEST(LogHistogramTest, MergeEqualsRecordingEverything) {
  std::mt19937_64 gen(7);
  std::lognormal_distribution<> dist(3, 1);
  LogHistogram a, b, all;
  for (int i = 0; i < 5000; ++i) {
    const double x = dist(gen);
    (i % 3 == 0 ? a : b).Record(x);
    all.Record(x);
  }
  LogHistogram merged;
  merged.Merge(a);
  merged.Merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_NEAR(merged.sum_ms(), all.sum_ms(), 1e-6 * all.sum_ms());
  EXPECT_EQ(merged.min_ms(), all.min_ms());
  EXPECT_EQ(merged.max_ms(), all.max_ms());
  for (double q : {0.1, 0.5, 0.95, 0.99}) EXPECT_EQ(merged.Quantile(q), all.Quantile(q)) << q;
  LogHistogram empty;
  merged.Merge(empty);
  EXPECT_EQ(merged.count(), all.count());
}

TEST(LogHistogramTest, OutOfRangeValuesClampToObservedExtremes) {
  LogHistogram h;
  h.Record(0.0001);      // 0.1 us: underflow
  h.Record(-5);          // a clock read out of order counts as 0
  h.Record(std::nan(""));
  h.Record(5e6);         // 83 min: overflow
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.Quantile(0.25), 0.0);   // rank 1: the min, exactly
  EXPECT_EQ(h.Quantile(0.75), 0.0);   // rank 3: still the underflow bucket
  EXPECT_EQ(h.Quantile(0.99), 5e6);   // rank 4: overflow reports the max
  h.Clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Quantile(0.5), 0.0);
}

TEST(WindowedHistogramTest, ValuesExpireWithTheirBucket) {
  WindowedHistogram w(WindowSpec{5'000'000, 12});  // 12 x 5 s
  w.Record(0, 10);
  w.Record(30'000'000, 20);
  EXPECT_EQ(w.Count(59'999'999), 2u);  // epochs 0..11 live
  EXPECT_EQ(w.Count(60'000'000), 1u);  // epoch 12: epoch 0 left the window
  EXPECT_DOUBLE_EQ(w.Quantile(60'000'000, 0.5), 20);
  EXPECT_EQ(w.Count(89'999'999), 1u);  // epoch 17: live 6..17 (30 s is epoch 6)
  EXPECT_EQ(w.Count(90'000'000), 0u);  // epoch 18: live 7..18
  EXPECT_EQ(w.Quantile(90'000'000, 0.95), 0.0);
}

TEST(WindowedHistogramTest, SlotIsRecycledAndLateValuesDropped) {
  WindowedHistogram w(WindowSpec{1'000'000, 4});
  w.Record(500'000, 1);     // epoch 0, slot 0
  w.Record(4'100'000, 7);   // epoch 4, slot 0 again: the old value is gone
  EXPECT_EQ(w.Count(4'100'000), 1u);
  EXPECT_DOUBLE_EQ(w.Quantile(4'100'000, 1.0), 7);
  w.Record(200'000, 3);     // epoch 0 arrives late, slot 0 holds epoch 4: dropped
  EXPECT_EQ(w.Count(4'100'000), 1u);
  w.Record(2'500'000, 5);   // epoch 2: late but inside the window, kept
  EXPECT_EQ(w.Count(4'100'000), 2u);
  EXPECT_DOUBLE_EQ(w.Quantile(4'100'000, 0.0), 5);
}

TEST(WindowedHistogramTest, WindowQuantileMatchesExactOverLiveValues) {
  WindowedHistogram w(WindowSpec{1'000'000, 10});
  std::mt19937_64 gen(11);
  std::lognormal_distribution<> dist(5, 0.7);
  std::vector<std::pair<int64_t, double>> all;
  for (int64_t t = 0; t < 30'000'000; t += 7'919) {
    const double x = dist(gen);
    all.emplace_back(t, x);
    w.Record(t, x);
  }
  const int64_t now = 29'999'999;  // epoch 29: live epochs 20..29 = t in [20 s, 30 s)
  std::vector<double> live;
  for (const auto& [t, x] : all) {
    if (t >= 20'000'000) live.push_back(x);
  }
  ASSERT_EQ(w.Count(now), live.size());
  for (double q : {0.5, 0.95, 0.99}) {
    const double exact = ExactQuantile(live, q);
    EXPECT_LE(std::abs(w.Quantile(now, q) - exact), exact * LogHistogram::kRelativeError) << q;
  }
}

TEST(PromHistogramTest, BucketsAreCumulativeWithInclusiveBounds) {
  PromHistogram h;
  h.Record(0.1);     // 0.0001 s: first bucket
  h.Record(85);      // exactly the 0.085 s bound: le is inclusive
  h.Record(400);     // between 0.387 and 0.5
  h.Record(100000);  // 100 s: only +Inf
  std::string out;
  AppendPromHistogram(&out, "x_seconds", "class=\"chat\"", h);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"0.001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"0.085\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"0.387\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"0.5\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"30\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{class=\"chat\",le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_count{class=\"chat\"} 4\n"), std::string::npos);
  EXPECT_NEAR(h.sum_s(), 0.0001 + 0.085 + 0.4 + 100, 1e-9);
  // One bucket line per bound plus +Inf, then _sum and _count.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'),
            static_cast<long>(DefaultPromBoundsSeconds().size()) + 3);
}

TEST(PromHistogramTest, MergeAddsCounts) {
  PromHistogram a, b;
  a.Record(10);
  b.Record(10);
  b.Record(2000);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_NEAR(a.sum_s(), 2.02, 1e-12);
}

}  // namespace
}  // namespace lifeline::slo

namespace lifeline::slo {
namespace {

// Only buckets that start at or after `since` count: the bucket holding `since` began before
// it, so its values (possibly recorded before `since`) are left out.
TEST(WindowedHistogramTest, MergeSinceKeepsOnlyBucketsStartingAfterIt) {
  WindowedHistogram w(WindowSpec{1'000'000, 10});  // 10 x 1 s
  w.Record(500'000, 100);    // epoch 0
  w.Record(1'200'000, 200);  // epoch 1
  w.Record(2'100'000, 300);  // epoch 2
  w.Record(3'900'000, 400);  // epoch 3
  const int64_t now = 4'000'000;
  EXPECT_EQ(w.Merged(now).count(), 4u);
  EXPECT_EQ(w.Merged(now, 1'000'000).count(), 3u);  // epoch 1 starts exactly at since
  EXPECT_EQ(w.Merged(now, 1'000'001).count(), 2u);  // epochs 2, 3
  EXPECT_DOUBLE_EQ(w.Merged(now, 2'500'000).Quantile(0.5), 400);
  EXPECT_EQ(w.Merged(now, 4'000'001).count(), 0u);  // nothing newer yet
  EXPECT_EQ(w.Merged(now, -5'000'000).count(), 4u);
}

}  // namespace
}  // namespace lifeline::slo
