// Decay fits on simulated events with known constants: estimates within stated tolerances and
// within a few standard errors, the g = 0 comparison, the per-event CVR base, and refusals.
#include "analysis/decay.h"

#include <cmath>

#include <gtest/gtest.h>

#include "analysis/analysis_test_util.h"

namespace lifeline::analysis {
namespace {

using testutil::Events;

TEST(AnalysisDecay, RecoversCtrAndCvrConstants) {
  EventSpec e;
  e.rows = 100000;
  e.c0 = 0.4;
  e.a = 0.001;
  e.v0 = 0.35;
  e.b = 0.0006;
  e.g = 4e-7;
  e.median_ms = 500;
  e.sigma = 0.7;
  auto r = FitDecay(Events(e, 21));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ctr.converged);
  EXPECT_TRUE(r->cvr.converged);
  EXPECT_TRUE(r->cvr_per_click);
  // Tolerances: 5 % for CTR (SE ~1.5 %), 20 % for b and 40 % for g (SE ~9 % and ~17 %), and
  // every estimate within 3.5 of its own standard errors.
  EXPECT_NEAR(r->ctr.p0, 0.4, 0.02);
  EXPECT_NEAR(r->ctr.k1, 0.001, 0.05 * 0.001);
  EXPECT_NEAR(r->cvr.p0, 0.35, 0.035);
  EXPECT_NEAR(r->cvr.k1, 0.0006, 0.2 * 0.0006);
  EXPECT_NEAR(r->cvr.k2, 4e-7, 0.4 * 4e-7);
  EXPECT_LT(std::abs(r->ctr.k1 - 0.001), 3.5 * r->ctr.k1_se);
  EXPECT_LT(std::abs(r->cvr.k1 - 0.0006), 3.5 * r->cvr.k1_se);
  EXPECT_LT(std::abs(r->cvr.k2 - 4e-7), 3.5 * r->cvr.k2_se);
  EXPECT_GT(r->ctr_r2, 0.9);
  EXPECT_GT(r->joint_r2, 0.9);
  // The t^2 term is real here: the test of g = 0 rejects it.
  EXPECT_LT(r->g_p_value, 0.01);
  const nlohmann::json j = DecayJson(*r);
  for (const char* k : {"c0", "a"}) EXPECT_TRUE(j["ctr"][k].is_number()) << k;
  for (const char* k : {"v0", "b", "g"}) EXPECT_TRUE(j["cvr"][k].is_number()) << k;
  for (const char* k : {"a", "b", "g", "r2"}) EXPECT_TRUE(j["joint"][k].is_number()) << k;
  EXPECT_TRUE(j["independent"]["r2"].is_number());
}

TEST(AnalysisDecay, WithoutQuadraticTermTheIndependentFitRecoversB) {
  EventSpec e;
  e.rows = 60000;
  e.c0 = 0.5;
  e.a = 0.0012;
  e.v0 = 0.3;
  e.b = 0.0008;
  e.g = 0;
  auto r = FitDecay(Events(e, 22));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->cvr_no_g.k1, 0.0008, 0.2 * 0.0008);
  EXPECT_NEAR(r->ctr.k1, 0.0012, 0.06 * 0.0012);
  EXPECT_GT(r->g_p_value, 0.01);
  EXPECT_LT(std::abs(r->cvr.k2), 3.5 * r->cvr.k2_se);
}

TEST(AnalysisDecay, ConversionsWithoutClicksAreCountedPerEvent) {
  DecayInput in;
  for (int i = 0; i < 2000; ++i) {
    in.latency_ms.push_back(100 + i % 400);
    in.clicked.push_back(i % 3 == 0);
    in.converted.push_back(i % 7 == 0);  // some conversions without a click
  }
  auto r = FitDecay(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->cvr_per_click);
  EXPECT_EQ(DecayJson(*r)["cvr"]["base"], "events");
}

TEST(AnalysisDecay, TooFewClicksIsAnError) {
  DecayInput in;
  for (int i = 0; i < 500; ++i) {
    in.latency_ms.push_back(i);
    in.clicked.push_back(i < 3);
    in.converted.push_back(0);
  }
  auto r = FitDecay(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3 clicks in 500 events"), std::string::npos);
}

}  // namespace
}  // namespace lifeline::analysis
