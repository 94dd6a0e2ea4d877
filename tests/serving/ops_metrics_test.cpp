// serving/ops_metrics: attainment counts from the cumulative latency histograms (exact at a
// bucket bound, up to the bound below otherwise, counted by hand here), their Prometheus
// counter, and the vLLM-compatible gauges the Gateway API Inference Extension reads.
#include "serving/ops_metrics.h"

#include <gtest/gtest.h>

namespace lifeline::serving {
namespace {

slo::SloConfig Config() {
  auto c = slo::ParseSloConfig(R"(default_class = "a"
use_presets = false
[classes.a]
ttft_p95_ms = 5
e2e_p95_ms = 6
[classes.b]
ttft_p95_ms = 100
)", "test.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

const AttainmentRow* Find(const std::vector<AttainmentRow>& rows, const std::string& cls,
                          const std::string& model, slo::Metric metric) {
  for (const AttainmentRow& r : rows) {
    if (r.slo_class == cls && r.model == model && r.metric == metric) return &r;
  }
  return nullptr;
}

TEST(Attainment, CountsWithinTargetPerClassAndModel) {
  slo::LatencyTracker tracker;
  const int64_t now = 1'000'000;
  // Class a on model m1: TTFTs 1, 3, 5 (on target: counts), 5.5, 7, 100 ms.
  for (double v : {1.0, 3.0, 5.0, 5.5, 7.0, 100.0}) {
    tracker.Record("a", "m1", slo::Metric::kTtft, now, v);
    tracker.Record("a", "m1", slo::Metric::kE2e, now, v);
  }
  // Class a on model m2: 2 and 9 ms.
  tracker.Record("a", "m2", slo::Metric::kTtft, now, 2.0);
  tracker.Record("a", "m2", slo::Metric::kTtft, now, 9.0);
  const auto rows = AttainmentRows(Config(), tracker.Snapshot(now));

  const AttainmentRow* m1 = Find(rows, "a", "m1", slo::Metric::kTtft);
  ASSERT_NE(m1, nullptr);
  EXPECT_EQ(m1->count, 6u);
  EXPECT_EQ(m1->within, 3u);
  EXPECT_DOUBLE_EQ(m1->target_ms, 5);
  EXPECT_NEAR(m1->le_ms, 5, 1e-9);  // 0.005 s is a bound: exact
  const AttainmentRow* merged = Find(rows, "a", "", slo::Metric::kTtft);
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->count, 8u);
  EXPECT_EQ(merged->within, 4u);
  // 6 ms is not a bound: counted up to 5 ms, and the row says so.
  const AttainmentRow* e2e = Find(rows, "a", "m1", slo::Metric::kE2e);
  ASSERT_NE(e2e, nullptr);
  EXPECT_DOUBLE_EQ(e2e->target_ms, 6);
  EXPECT_NEAR(e2e->le_ms, 5, 1e-9);
  EXPECT_EQ(e2e->within, 3u);  // 5.5 ms met the 6 ms target but is above the 5 ms bound
  EXPECT_EQ(Find(rows, "b", "", slo::Metric::kTtft), nullptr);  // no samples, no row
  EXPECT_EQ(Find(rows, "a", "m2", slo::Metric::kE2e), nullptr);

  const nlohmann::json j = AttainmentJson(rows);
  bool saw_inexact = false;
  for (const auto& r : j) {
    if (r["metric"] == "e2e") {
      EXPECT_FALSE(r["exact"].get<bool>());
      saw_inexact = true;
    }
  }
  EXPECT_TRUE(saw_inexact);

  const std::string text = AttainmentPrometheusText(rows);
  EXPECT_NE(text.find("# TYPE lifeline_slo_within_target_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("lifeline_slo_within_target_total{class=\"a\",model=\"m1\",metric=\"ttft\"} 3\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("lifeline_slo_within_target_total{class=\"a\",model=\"m2\",metric=\"ttft\"} 1\n"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("model=\"\""), std::string::npos);  // merged rows are not exported
}

TEST(VllmCompat, GaugesUnderVllmNames) {
  EngineSnapshot s;
  s.waiting = 3;
  s.running = 5;
  s.kv_blocks_total = 200;
  s.kv_blocks_free = 150;
  const VllmGauges g = VllmGaugesOf("m", s);
  EXPECT_EQ(g.waiting, 3);
  EXPECT_EQ(g.running, 5);
  EXPECT_DOUBLE_EQ(g.kv_usage, 0.25);
  EngineSnapshot empty;
  EXPECT_DOUBLE_EQ(VllmGaugesOf("e", empty).kv_usage, 0);
  const std::string text = VllmCompatPrometheusText({g});
  for (const char* line : {"vllm:num_requests_waiting{model_name=\"m\"} 3\n",
                           "vllm:num_requests_running{model_name=\"m\"} 5\n",
                           "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n",
                           "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n",
                           // The Inference Extension's prefix scorer sizes its index from these.
                           "vllm:cache_config_info{model_name=\"m\",block_size=\"16\",num_gpu_blocks=\"200\"} 1\n",
                           "# TYPE vllm:num_requests_waiting gauge\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace lifeline::serving
