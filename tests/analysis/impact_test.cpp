// Impact of a latency distribution: expectations checked against values derived by hand from
// the curves' formulas for a five-request report (failures count as lost, cancelled requests
// are left out), the baselines, and the report's field errors.
#include "analysis/impact.h"

#include <cmath>

#include <gtest/gtest.h>

namespace lifeline::analysis {
namespace {

using nlohmann::json;

json Report() {
  return json::parse(R"({
    "config": {"slo_metric": "ttft", "slo_class": "search"},
    "targets": [{"label": "A"}, {"label": "B"}],
    "steps": [{"load": 2}],
    "requests": [
      {"step": 0, "target": 0, "ttft_ms": 100, "e2e_ms": 500, "error": null},
      {"step": 0, "target": 0, "ttft_ms": 300, "e2e_ms": 900, "error": null},
      {"step": 0, "target": 1, "ttft_ms": 200, "e2e_ms": 400, "error": null},
      {"step": 0, "target": 1, "ttft_ms": null, "e2e_ms": 50, "error": "timeout"},
      {"step": 0, "target": 1, "ttft_ms": null, "e2e_ms": null, "error": "cancelled"}]})");
}

ImpactModels Models() {
  ImpactModels m;
  m.decay = DecayCurves{0.5, 0.002, 0.2, 0.001, 1e-6, true};
  m.abandon = AbandonCurve{"search", 250.0, 0.1, 0.2};
  return m;
}

TEST(AnalysisImpact, ExpectationsMatchHandDerivedValues) {
  auto r = ComputeImpact(Report(), "report.json", Models(), ImpactOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->rows.size(), 2u);
  EXPECT_EQ(r->metric, "ttft");
  const Expectation& a = r->rows[0].value;
  EXPECT_EQ(a.requests, 2);
  EXPECT_NEAR(a.abandonment, (0.1 + 0.2) / 2, 1e-12);
  EXPECT_NEAR(a.ctr, (0.5 * std::exp(-0.2) + 0.5 * std::exp(-0.6)) / 2, 1e-12);
  const double joint_a = (0.5 * std::exp(-0.2) * 0.2 * std::exp(-0.1 - 0.01) +
                          0.5 * std::exp(-0.6) * 0.2 * std::exp(-0.3 - 0.09)) / 2;
  EXPECT_NEAR(a.joint, joint_a, 1e-12);
  EXPECT_NEAR(a.cvr, joint_a / a.ctr, 1e-12);
  const Expectation& b = r->rows[1].value;
  EXPECT_EQ(b.requests, 2);  // the cancelled request is not counted
  EXPECT_EQ(b.failed, 1);
  EXPECT_NEAR(b.abandonment, (0.1 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(b.ctr, 0.5 * std::exp(-0.4) / 2, 1e-12);
  EXPECT_NEAR(b.joint, 0.5 * std::exp(-0.4) * 0.2 * std::exp(-0.2 - 0.04) / 2, 1e-12);
  // Baseline: every request just within the 250 ms threshold.
  EXPECT_NEAR(r->rows[0].baseline.abandonment, 0.1, 1e-12);
  EXPECT_NEAR(r->rows[0].baseline.joint, 0.5 * std::exp(-0.5) * 0.2 * std::exp(-0.25 - 0.0625),
              1e-9);
  ASSERT_TRUE(r->rows[1].first_target.has_value());
  const json j = ImpactJson(*r);
  EXPECT_NEAR(j["rows"][1]["change_vs_first_target"]["joint"].get<double>(), b.joint / joint_a - 1,
              1e-12);
  const std::string md = ImpactMarkdown(*r);
  EXPECT_NE(md.find("B: this configuration loses"), std::string::npos) << md;
}

TEST(AnalysisImpact, EndToEndMetricAndZeroLatencyBaseline) {
  ImpactModels m;
  m.decay = DecayCurves{0.5, 0.002, 0.2, 0.001, 0, true};
  ImpactOptions o;
  o.metric = "e2e";
  json rep = Report();
  rep["requests"].erase(2);  // target 0 only: the baseline is zero latency
  rep["requests"].erase(2);
  rep["requests"].erase(2);
  auto r = ComputeImpact(rep, "report.json", m, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->baseline, "zero latency");
  EXPECT_NEAR(r->rows[0].value.ctr, (0.5 * std::exp(-1.0) + 0.5 * std::exp(-1.8)) / 2, 1e-12);
  EXPECT_NEAR(r->rows[0].baseline.ctr, 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(r->rows[0].value.abandonment));
}

// A target none of whose requests finished has no expectation: the summary says so instead of
// an empty sentence ("B: .").
TEST(AnalysisImpact, ATargetWithNothingFinishedSaysWhyItHasNoEstimate) {
  json rep = Report();
  rep["requests"][2]["error"] = "cancelled";  // B: every request cancelled
  rep["requests"][2]["ttft_ms"] = nullptr;
  rep["requests"][3]["error"] = "cancelled";
  auto r = ComputeImpact(rep, "report.json", Models(), ImpactOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string md = ImpactMarkdown(*r);
  EXPECT_EQ(md.find(": ."), std::string::npos) << md;
  EXPECT_NE(md.find("B: no change can be estimated: none of its requests finished"),
            std::string::npos) << md;
}

TEST(AnalysisImpact, BadFilesNameTheField) {
  auto d = DecayCurvesFromJson(json::parse(R"({"ctr":{"c0":0.3,"a":0.001},"cvr":{"v0":0.1,"b":"x","g":0}})"),
                               "fit.json");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "fit.json: cvr.b: expected a finite number");
  auto t = AbandonCurveFromJson(json::parse(R"({"scenarios":[{"name":"a"},{"name":"b"}]})"),
                                "t.json", "", "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("several scenarios; pick one with --scenario (scenarios: a, b)"),
            std::string::npos);
  json bad = Report();
  bad["requests"][0]["ttft_ms"] = "slow";
  auto r = ComputeImpact(bad, "report.json", Models(), ImpactOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "report.json: requests[0].ttft_ms: expected a non-negative number");
}

}  // namespace
}  // namespace lifeline::analysis
