// Batches of seeds (slow: about a minute of CPU): how often the 95 % interval covers the true
// knee, how far the estimate lands from it, and how often a threshold is claimed on data
// without one. The command's default replicate counts are used.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "analysis/analysis_test_util.h"

namespace lifeline::analysis {
namespace {

TEST(AnalysisCoverage, IntervalCoversTheKneeInMostSeeds) {
  constexpr int kSeeds = 40;
  int covered = 0, found = 0;
  double worst = 0;
  for (int s = 1; s <= kSeeds; ++s) {
    const ThresholdInput in = testutil::Sessions(
        "name=s,knee=387,below=0.10,above=0.163,median=300,sigma=0.5,rows=20000", 1000 + s);
    ThresholdOptions o;  // defaults: 400 bootstrap, 299 null replicates, alpha 0.01
    o.seed = static_cast<uint64_t>(s);
    o.threads = 2;
    auto r = FindThreshold(in, o);
    ASSERT_TRUE(r.ok());
    if (!r->found) continue;
    ++found;
    covered += r->ci_lo_ms <= 387 && 387 <= r->ci_hi_ms;
    worst = std::max(worst, std::abs(r->threshold_ms - 387));
  }
  std::printf("knee 387 ms, 20000 sessions: found %d/%d, interval covers %d/%d, worst error %.1f ms\n",
              found, kSeeds, covered, kSeeds, worst);
  EXPECT_EQ(found, kSeeds);
  EXPECT_GE(covered, 36);  // 95 % nominal: 38 expected; 36 allows binomial spread
  EXPECT_LE(worst, 25);
}

TEST(AnalysisCoverage, FewClaimsWithoutAKnee) {
  constexpr int kSeeds = 40;
  int claims = 0;
  for (int s = 1; s <= kSeeds; ++s) {
    const ThresholdInput in = testutil::Sessions(
        s % 2 ? "name=flat,knee=none,below=0.12,rows=20000"
              : "name=trend,knee=none,below=0.12,slope=0.8,rows=20000", 2000 + s);
    ThresholdOptions o;
    o.seed = static_cast<uint64_t>(s);
    o.threads = 2;
    o.bootstrap = 20;  // the interval is not computed without a claim
    auto r = FindThreshold(in, o);
    ASSERT_TRUE(r.ok());
    claims += r->found;
  }
  std::printf("no knee, 20000 sessions: threshold claimed in %d/%d seeds\n", claims, kSeeds);
  EXPECT_LE(claims, 2);  // alpha 0.01: 0.4 expected
}

}  // namespace
}  // namespace lifeline::analysis
