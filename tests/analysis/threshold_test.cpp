// Threshold discovery on simulated sessions with known truth: the knee and rates recovered
// within stated tolerances, the interval covering the truth, no threshold claimed on data
// without one, jumps down for completion outcomes, deterministic for any thread count, and
// degenerate inputs refused.
#include "analysis/threshold.h"

#include <cmath>

#include <gtest/gtest.h>

#include "analysis/analysis_test_util.h"

namespace lifeline::analysis {
namespace {

using testutil::QuickOptions;
using testutil::Sessions;

// The product's premise: +63 % abandonment past 387 ms. 20k sessions.
TEST(AnalysisThreshold, RecoversKneeRatesAndInterval) {
  const ThresholdInput in =
      Sessions("name=search,knee=387,below=0.10,above=0.163,median=300,sigma=0.5,rows=20000", 3);
  auto r = FindThreshold(in, QuickOptions(3));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->found);
  EXPECT_LT(r->p_value, 0.01);
  EXPECT_NEAR(r->threshold_ms, 387, 10);
  EXPECT_LE(r->ci_lo_ms, 387);
  EXPECT_GE(r->ci_hi_ms, 387);
  EXPECT_LE(r->ci_lo_ms, r->threshold_ms);
  EXPECT_GE(r->ci_hi_ms, r->threshold_ms);
  // Observed rates below / above: binomial standard errors ~0.003 and ~0.004.
  EXPECT_NEAR(r->rate_below, 0.10, 0.012);
  EXPECT_NEAR(r->rate_above, 0.163, 0.016);
  EXPECT_NEAR(r->relative_increase, 0.63, 0.2);
  EXPECT_EQ(r->n, 20000);
}

// A latency trend on both sides (logit +0.6 per second) does not move the knee.
TEST(AnalysisThreshold, KneeWithATrendAndMeasurementJitter) {
  const ThresholdInput in = Sessions(
      "name=s,knee=250,below=0.2,above=0.3,slope=0.6,median=220,sigma=0.45,jitter=5,rows=20000", 4);
  auto r = FindThreshold(in, QuickOptions(4));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->found);
  EXPECT_NEAR(r->threshold_ms, 250, 15);
  EXPECT_LE(r->ci_lo_ms, 250);
  EXPECT_GE(r->ci_hi_ms, 250);
}

TEST(AnalysisThreshold, NoBreakIsReportedAsNoThreshold) {
  // Constant rate, and a smooth logit-linear trend: the no-break model is true in both.
  for (const char* spec : {"name=flat,knee=none,below=0.12,rows=20000",
                           "name=trend,knee=none,below=0.12,slope=0.8,rows=20000"}) {
    const ThresholdInput in = Sessions(spec, 5);
    auto r = FindThreshold(in, QuickOptions(5));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->found) << spec << ": p " << r->p_value << " at " << r->candidate_ms.value_or(-1);
    EXPECT_GE(r->p_value, 0.01) << spec;
    const nlohmann::json j = ThresholdJson({*r}, QuickOptions(5));
    EXPECT_TRUE(j["scenarios"][0]["threshold_ms"].is_null());
    EXPECT_TRUE(j["scenarios"][0]["ci95_ms"].is_null());
  }
}

// Session completion drops at the knee: the search runs downwards (auto from the trend).
TEST(AnalysisThreshold, CompletionDropsAreFoundDownwards) {
  ThresholdInput in =
      Sessions("name=c,knee=300,below=0.15,above=0.28,median=260,sigma=0.5,rows=20000", 6);
  for (uint8_t& y : in.outcome) y = 1 - y;  // completed = not abandoned
  auto r = FindThreshold(in, QuickOptions(6));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->found);
  EXPECT_EQ(r->direction, -1);
  EXPECT_NEAR(r->threshold_ms, 300, 10);
  EXPECT_LT(r->relative_increase, 0);
}

TEST(AnalysisThreshold, SameResultForAnyThreadCount) {
  const ThresholdInput in = Sessions("name=s,knee=387,rows=8000", 7);
  ThresholdOptions one = QuickOptions(7);
  one.null_replicates = 19;  // least p 0.05: claimed at alpha 0.1, enough to run the interval
  one.alpha = 0.1;
  one.bootstrap = 40;
  ThresholdOptions two = one;
  one.threads = 1;
  two.threads = 3;
  auto a = FindThreshold(in, one);
  auto b = FindThreshold(in, two);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->threshold_ms, b->threshold_ms);
  EXPECT_EQ(a->ci_lo_ms, b->ci_lo_ms);
  EXPECT_EQ(a->ci_hi_ms, b->ci_hi_ms);
  EXPECT_EQ(a->p_value, b->p_value);
  EXPECT_TRUE(a->found);
}

// Users with several sessions each and a per-user effect: resampling users (groups).
TEST(AnalysisThreshold, GroupBootstrapResamplesUsers) {
  ThresholdInput in = Sessions("name=u,knee=400,rows=15000,users=2000,user_sd=0.6", 8);
  auto csv = SimulateSessions({*ParseScenarioSpec("name=u,knee=400,rows=15000,users=2000,user_sd=0.6", "t")}, 8);
  auto t = ParseCsv(*csv, "u.csv");
  ASSERT_TRUE(t.ok());
  in.groups = 0;
  for (const auto& row : t->rows) {
    const int32_t g = static_cast<int32_t>(std::stol(row[1]));
    in.group.push_back(g);
    in.groups = std::max(in.groups, g + 1);
  }
  auto r = FindThreshold(in, QuickOptions(8));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->found);
  EXPECT_NEAR(r->threshold_ms, 400, 15);
  EXPECT_LE(r->ci_lo_ms, 400);
  EXPECT_GE(r->ci_hi_ms, 400);
}

TEST(AnalysisThreshold, DegenerateInputsAreErrors) {
  ThresholdInput none;
  none.name = "x";
  auto a = FindThreshold(none, QuickOptions(1));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "scenario 'x': no sessions");

  ThresholdInput one_class = Sessions("name=y,knee=300,rows=500", 1);
  for (uint8_t& y : one_class.outcome) y = 0;
  auto b = FindThreshold(one_class, QuickOptions(1));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("every session has outcome 0"), std::string::npos);

  ThresholdInput tiny = Sessions("name=z,knee=300,rows=40", 1);
  auto c = FindThreshold(tiny, QuickOptions(1));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("too few sessions to place a breakpoint"),
            std::string::npos) << c.status().message();
}

TEST(AnalysisThreshold, JsonCarriesTheContractFields) {
  const ThresholdInput in = Sessions("name=search,knee=387,rows=10000", 9);
  ThresholdOptions o = QuickOptions(9);
  o.null_replicates = 19;
  o.alpha = 0.1;
  o.bootstrap = 40;
  auto r = FindThreshold(in, o);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->found);
  const nlohmann::json j = ThresholdJson({*r}, o);
  const nlohmann::json& s = j["scenarios"][0];
  for (const char* k : {"name", "n", "threshold_ms", "ci95_ms", "rate_below", "rate_above",
                        "relative_increase", "p_value"}) {
    EXPECT_TRUE(s.contains(k)) << k;
  }
  EXPECT_EQ(s["name"], "search");
  EXPECT_EQ(s["n"], 10000);
  ASSERT_TRUE(s["ci95_ms"].is_array());
  EXPECT_EQ(s["ci95_ms"].size(), 2u);
}

}  // namespace
}  // namespace lifeline::analysis
