// /v1/slo JSON and the Prometheus text: fields present with the values fed in, and a
// well-formed exposition (every sample belongs to a family declared before it).
#include "slo/slo_report.h"

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

struct Fixture {
  SloConfig config;
  std::unique_ptr<LatencyTracker> tracker;
  std::unique_ptr<Controller> controller;
  OutcomeCounters outcomes;
  TrackerSnapshot snap;

  Fixture() {
    auto c = ParseSloConfig(R"(
[window]
bucket_ms = 1000
buckets = 10

[[models]]
name = "big"
path = "/m/big.gguf"
[[models]]
name = "cloud"
url = "http://h:8000/v1"
model = "llama"
)",
                            "t.toml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    config = *c;
    tracker = std::make_unique<LatencyTracker>(config.window);
    controller = std::make_unique<Controller>(config, std::vector<std::string>{"big"}, 0);
    // chat on big: TTFT 401..500 ms (P95 = the 95th value, 495 ms) over its 350 ms target.
    for (int i = 401; i <= 500; ++i) tracker->Record("chat", "big", Metric::kTtft, 100'000, i);
    tracker->Record("chat", "big", Metric::kE2e, 100'000, 1234);
    snap = tracker->Snapshot(150'000);
    controller->Tick(150'000, snap);  // chat: normal -> truncate; big: batch 64 -> 32
    outcomes.Count("chat", "big", "admitted");
    outcomes.Count("chat", "big", "shed_429");
  }
};

TEST(SloReportTest, StatusJson) {
  Fixture f;
  const nlohmann::json j = SloStatusJson(*f.controller, f.snap, 1'150'000);
  EXPECT_EQ(j["object"], "slo.status");
  EXPECT_EQ(j["default_class"], "interactive");
  EXPECT_DOUBLE_EQ(j["window_s"].get<double>(), 10.0);
  ASSERT_EQ(j["classes"].size(), 10u);
  const nlohmann::json* chat = nullptr;
  for (const auto& c : j["classes"]) {
    if (c["name"] == "chat") chat = &c;
  }
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ((*chat)["targets"]["ttft_p95_ms"], 350.0);
  EXPECT_TRUE((*chat)["targets"]["e2e_p95_ms"].is_null());
  EXPECT_EQ((*chat)["level"], 1);
  EXPECT_EQ((*chat)["level_name"], "truncate");
  EXPECT_DOUBLE_EQ((*chat)["level_age_ms"].get<double>(), 1000.0);
  EXPECT_EQ((*chat)["live"]["ttft"]["count"], 100);
  EXPECT_NEAR((*chat)["live"]["ttft"]["p95_ms"].get<double>(), 495, 495 * LogHistogram::kRelativeError);
  EXPECT_DOUBLE_EQ((*chat)["live"]["e2e"]["p50_ms"].get<double>(), 1234);
  EXPECT_EQ((*chat)["by_model"]["big"]["ttft"]["count"], 100);
  EXPECT_EQ((*chat)["pressure"]["metric"], "ttft");
  // One ladder per model: big moved, cloud did not; the class shows the worst.
  ASSERT_EQ((*chat)["ladders"].size(), 2u);
  EXPECT_EQ((*chat)["ladders"][0]["model"], "big");
  EXPECT_EQ((*chat)["ladders"][0]["level_name"], "truncate");
  EXPECT_EQ((*chat)["ladders"][1]["model"], "cloud");
  EXPECT_EQ((*chat)["ladders"][1]["level"], 0);
  EXPECT_TRUE((*chat)["ladders"][0]["in_flight"].is_null());  // no in-flight set given
  EXPECT_TRUE(j["classes"][0]["live"].is_null());  // asr: no traffic

  ASSERT_EQ(j["events"].size(), 1u);
  const auto& e = j["events"][0];
  EXPECT_EQ(e["class"], "chat");
  EXPECT_EQ(e["model"], "big");
  EXPECT_EQ(e["from"], "normal");
  EXPECT_EQ(e["to"], "truncate");
  EXPECT_DOUBLE_EQ(e["age_ms"].get<double>(), 1000.0);
  EXPECT_EQ(e["metric"], "ttft");
  EXPECT_EQ(e["target_ms"], 350.0);
  EXPECT_NEAR(e["p95_ms"].get<double>(), 495, 495 * LogHistogram::kRelativeError);
  EXPECT_EQ(j["events_total"], 1);

  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["name"], "big");
  EXPECT_EQ(j["models"][0]["next_in_cascade"], "cloud");
  EXPECT_EQ(j["models"][0]["max_running"], 32);  // halved: 1.41 x target > 1.1
  EXPECT_EQ(j["models"][1]["remote"], true);
  EXPECT_EQ(j["models"][1]["url"], "http://h:8000/v1");
  EXPECT_TRUE(j["models"][1]["next_in_cascade"].is_null());
  EXPECT_EQ(j["roles"]["doctor"], 0.8);
  // max_events keeps the most recent.
  EXPECT_TRUE(SloStatusJson(*f.controller, f.snap, 1'150'000, 0)["events"].empty());
}

TEST(SloReportTest, PredictionAuditJsonAndMetrics) {
  PredictionAudit a;
  EXPECT_TRUE(PredictionAuditJson(a.Snapshot())["ratio_p50"].is_null());
  a.Observe(100, 1.0, 200, 0);  // measured 2x the prediction
  const nlohmann::json j = PredictionAuditJson(a.Snapshot());
  EXPECT_EQ(j["checked"], 1);
  EXPECT_DOUBLE_EQ(j["correction"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["ratio_p50"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["within_25pct"].get<double>(), 0.0);
  const std::string text = PredictionAuditPrometheusText({{"big", a.Snapshot()}});
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("lifeline_admission_prediction_ratio_bucket{model=\"big\",le=\"1.5\"} 0")) << text;
  EXPECT_TRUE(has("lifeline_admission_prediction_ratio_bucket{model=\"big\",le=\"2\"} 1"));
  EXPECT_TRUE(has("lifeline_admission_prediction_ratio_bucket{model=\"big\",le=\"+Inf\"} 1"));
  EXPECT_TRUE(has("lifeline_admission_prediction_ratio_count{model=\"big\"} 1"));
  EXPECT_TRUE(has("lifeline_admission_prediction_correction{model=\"big\"} 2"));
}

TEST(SloReportTest, PrometheusText) {
  Fixture f;
  const std::string text = SloPrometheusText(*f.controller, f.snap, &f.outcomes);
  auto has = [&](const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("lifeline_ttft_seconds_count{class=\"chat\",model=\"big\"} 100")) << text;
  EXPECT_TRUE(has("lifeline_ttft_seconds_bucket{class=\"chat\",model=\"big\",le=\"0.387\"} 0"));
  EXPECT_TRUE(has("lifeline_ttft_seconds_bucket{class=\"chat\",model=\"big\",le=\"0.5\"} 100"));
  EXPECT_TRUE(has("lifeline_e2e_latency_seconds_sum{class=\"chat\",model=\"big\"} 1.234"));
  EXPECT_TRUE(has("lifeline_time_per_output_token_seconds_count{class=\"chat\",model=\"big\"} 0"));
  EXPECT_TRUE(has("lifeline_slo_target_seconds{class=\"interactive\",metric=\"ttft\"} 0.387"));
  EXPECT_TRUE(has("lifeline_slo_target_seconds{class=\"risk-control\",metric=\"e2e\"} 0.085"));
  EXPECT_TRUE(has("lifeline_slo_degradation_level{class=\"chat\"} 1"));
  EXPECT_TRUE(has("lifeline_slo_degradation_level{class=\"medical\"} 0"));
  EXPECT_TRUE(has("lifeline_slo_ladder_transitions_total{class=\"chat\",model=\"big\",from=\"normal\",to=\"truncate\"} 1"));
  // Each (class, model) ladder: chat moved on big only; the cloud member has its own.
  EXPECT_TRUE(has("lifeline_slo_model_degradation_level{class=\"chat\",model=\"big\"} 1"));
  EXPECT_TRUE(has("lifeline_slo_model_degradation_level{class=\"chat\",model=\"cloud\"} 0"));
  EXPECT_TRUE(has("lifeline_batch_max_running{model=\"big\"} 32"));
  EXPECT_TRUE(has("lifeline_batch_max_step_tokens{model=\"big\"} 256"));
  EXPECT_TRUE(has("lifeline_slo_requests_total{class=\"chat\",model=\"big\",outcome=\"shed_429\"} 1"));
  EXPECT_TRUE(has("lifeline_slo_window_samples{class=\"chat\",metric=\"ttft\"} 100"));
  EXPECT_NE(text.find("lifeline_slo_window_p95_seconds{class=\"chat\",metric=\"ttft\"} 0.49"),
            std::string::npos);

  // Well-formed: each sample line is `name{labels} number` and its family (name minus a
  // histogram suffix) was declared with HELP and TYPE before it; no family twice.
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_]\w*="[^"]*"(,[a-zA-Z_]\w*="[^"]*")*\})? (\S+)$)");
  std::set<std::string> declared;
  std::map<std::string, std::string> types;
  std::istringstream in(text);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(declared.insert(name).second) << "family twice: " << name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      types[rest.substr(0, rest.find(' '))] = rest.substr(rest.find(' ') + 1);
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
    std::string family = m[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (family.size() > s.size() && family.compare(family.size() - s.size(), s.size(), s) == 0 &&
          types.count(family.substr(0, family.size() - s.size())) &&
          types[family.substr(0, family.size() - s.size())] == "histogram") {
        family = family.substr(0, family.size() - s.size());
      }
    }
    EXPECT_TRUE(declared.count(family)) << line;
    std::size_t used = 0;
    const std::string value = m[4];
    if (value != "+Inf" && value != "NaN") {
      EXPECT_NO_THROW((void)std::stod(value, &used)) << line;
      EXPECT_EQ(used, value.size()) << line;
    }
    ++samples;
  }
  EXPECT_GT(samples, 100);
  EXPECT_EQ(types["lifeline_ttft_seconds"], "histogram");
  EXPECT_EQ(types["lifeline_slo_ladder_transitions_total"], "counter");
  // Without outcome counters the family is left out.
  EXPECT_EQ(SloPrometheusText(*f.controller, f.snap, nullptr).find("lifeline_slo_requests_total"),
            std::string::npos);
}

}  // namespace
}  // namespace lifeline::slo
