// EngineService with the SLO control plane, on two real tiny models (stories260K loaded as
// "heavy" and "light", cascade heavy -> light) and a class whose TTFT target (1 us) no real
// request can meet: every tick raises the ladder one level, and each level's effect on new
// requests is checked (truncate caps max_tokens, cascade serves from "light", shed is a 429
// with Retry-After), then the level returns to 0 once the window empties. The controller is
// ticked by hand (tick_ms is set to a minute) so every level is observed deterministically.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/engine_service.h"
#include "slo/slo_config.h"
#include "stories_engine.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<ModelEngine> MakeEngine(const std::string& name) {
  ModelEngineOptions o;
  o.name = name;
  o.max_running = 4;
  o.max_step_tokens = 64;
  return lifeline::testing::MakeStoriesEngine(o);
}

// Collects one request's events.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<server::GenerationEvent> events;
  bool done = false;

  server::GenerationSink Sink() {
    return [this](server::GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      done = done || ev.terminal();
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  // The terminal event (kError with code "timeout" if none came within 20 s).
  server::GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, 20s, [&] { return done; })) {
      server::ApiError e;
      e.code = "timeout";
      return server::GenerationEvent::Error(e);
    }
    return events.back();
  }
};

server::GenerationRequest Request(int32_t max_tokens, const std::string& model = "heavy") {
  server::GenerationRequest r;
  r.model = model;
  r.prompts = {server::PromptInput{"Once upon a time", {}, false}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

slo::SloConfig TightConfig() {
  auto config = slo::ParseSloConfig(R"(
default_class = "tight"
[classes.tight]
ttft_p95_ms = 0.001
priority = 1
[controller]
tick_ms = 60000
min_samples = 3
[ladder]
min_dwell_ms = 0
raise_interval_ms = 0
recover_ticks = 2
truncate_max_tokens = 4
[window]
bucket_ms = 100
buckets = 10
[admission]
predictive = false
)", "test.toml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  slo::SloConfig c = config.ok() ? *config : slo::DefaultSloConfig();
  slo::ModelEntry heavy, light;
  heavy.name = "heavy";
  heavy.path = "local";
  light.name = "light";
  light.path = "local";
  c.models = {heavy, light};
  return c;
}

class SloServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<ModelEngine>> engines;
    engines.push_back(MakeEngine("heavy"));
    engines.push_back(MakeEngine("light"));
    ASSERT_NE(engines[0], nullptr);
    ASSERT_NE(engines[1], nullptr);
    service_ = std::make_unique<EngineService>(std::move(engines), TightConfig());
    service_->Start();
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }
  int Level() { return static_cast<int>(service_->controller().knobs()->LevelOf("tight")); }

  // After a transition a raise is judged on samples newer than it too (window buckets that
  // start after it): wait past a bucket boundary, serve min_samples requests, then tick.
  void TickWithFreshSamples() {
    std::this_thread::sleep_for(110ms);
    for (int i = 0; i < 3; ++i) {
      Collector c;
      auto res = service_->Submit(Request(2), c.Sink());
      ASSERT_TRUE(res.accepted()) << res.error->message;
      c.Wait();
    }
    const int before = Level();
    service_->TickNow();
    ASSERT_EQ(Level(), before + 1);
  }

  std::unique_ptr<EngineService> service_;
};

TEST_F(SloServingTest, UnknownClassOrRoleIs400NamingTheField) {
  auto r = Request(2);
  r.slo_class = "gold";
  Collector c;
  auto res = service_->Submit(r, c.Sink());
  ASSERT_FALSE(res.accepted());
  EXPECT_EQ(res.error->http_status, 400);
  EXPECT_EQ(res.error->param, "slo_class");
  EXPECT_NE(res.error->message.find("gold"), std::string::npos) << res.error->message;

  r.slo_class = "";
  r.user_role = "nurse";
  res = service_->Submit(r, c.Sink());
  ASSERT_FALSE(res.accepted());
  EXPECT_EQ(res.error->http_status, 400);
  EXPECT_EQ(res.error->param, "user_role");
}

TEST_F(SloServingTest, LadderTruncatesCascadesShedsAndRecovers) {
  // Level 0: served as asked, by the named model; samples feed the tracker.
  for (int i = 0; i < 3; ++i) {
    Collector c;
    auto res = service_->Submit(Request(3), c.Sink());
    ASSERT_TRUE(res.accepted()) << res.error->message;
    EXPECT_EQ(res.served_model, "heavy");
    auto ev = c.Wait();
    ASSERT_EQ(ev.kind, server::GenerationEvent::Kind::kDone) << ev.error.code;
    EXPECT_EQ(ev.usage.completion_tokens, 3);
    EXPECT_FALSE(ev.timings.contains("lifeline"));
  }
  EXPECT_EQ(Level(), 0);

  // Level 1 (truncate): max_tokens 20 is capped to truncate_max_tokens = 4.
  service_->TickNow();
  ASSERT_EQ(Level(), 1);
  {
    Collector c;
    auto res = service_->Submit(Request(20), c.Sink());
    ASSERT_TRUE(res.accepted()) << res.error->message;
    auto ev = c.Wait();
    ASSERT_EQ(ev.kind, server::GenerationEvent::Kind::kDone) << ev.error.code;
    EXPECT_EQ(ev.finish_reason, "length");
    EXPECT_EQ(ev.usage.completion_tokens, 4);
    ASSERT_TRUE(ev.timings.contains("lifeline")) << ev.timings.dump();
    EXPECT_EQ(ev.timings["lifeline"]["truncated"], true);
    EXPECT_EQ(ev.timings["lifeline"]["reason"], "max_tokens_cap");
    EXPECT_EQ(ev.lifeline["reason"], "max_tokens_cap");
    EXPECT_EQ(ev.lifeline["max_tokens"], 4);
    EXPECT_EQ(ev.lifeline["requested_max_tokens"], 20);
    EXPECT_NE(ev.lifeline["detail"].get<std::string>().find("ladder.truncate_max_tokens 4"),
              std::string::npos) << ev.lifeline.dump();
  }

  // Level 3 (cascade): a request for "heavy" is served by "light", and says so.
  TickWithFreshSamples();
  TickWithFreshSamples();
  ASSERT_EQ(Level(), 3);
  {
    Collector c;
    auto res = service_->Submit(Request(2), c.Sink());
    ASSERT_TRUE(res.accepted()) << res.error->message;
    EXPECT_EQ(res.served_model, "light");
    auto ev = c.Wait();
    EXPECT_EQ(ev.kind, server::GenerationEvent::Kind::kDone) << ev.error.code;
  }

  // Level 4 (shed): 429 with a Retry-After.
  TickWithFreshSamples();
  ASSERT_EQ(Level(), 4);
  {
    Collector c;
    auto res = service_->Submit(Request(2), c.Sink());
    ASSERT_FALSE(res.accepted());
    EXPECT_EQ(res.error->http_status, 429);
    EXPECT_GE(res.error->retry_after_s, 1);
    EXPECT_NE(res.error->message.find("tight"), std::string::npos) << res.error->message;
  }

  // /v1/slo shows the level and the four transitions; /metrics the level gauge.
  auto status_text = service_->SloStatusJson();
  ASSERT_TRUE(status_text.has_value());
  const auto status = nlohmann::json::parse(*status_text);
  EXPECT_EQ(status["events_total"], 4);
  bool found = false;
  for (const auto& cls : status["classes"]) {
    if (cls["name"] != "tight") continue;
    found = true;
    EXPECT_EQ(cls["level"], 4);
    EXPECT_EQ(cls["level_name"], "shed");
  }
  EXPECT_TRUE(found);
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("lifeline_slo_degradation_level{class=\"tight\"} 4"), std::string::npos);
  EXPECT_NE(metrics.find("outcome=\"routed\""), std::string::npos);
  EXPECT_NE(metrics.find("outcome=\"shed_429\""), std::string::npos);

  // Load stopped: once the window (10 x 100 ms) empties there is no signal, every tick is
  // healthy, and the level falls one step per recover_ticks = 2 ticks.
  std::this_thread::sleep_for(1150ms);
  for (int i = 0; i < 8; ++i) service_->TickNow();
  EXPECT_EQ(Level(), 0);
  Collector c;
  auto res = service_->Submit(Request(20), c.Sink());
  ASSERT_TRUE(res.accepted());
  EXPECT_EQ(res.served_model, "heavy");
  auto ev = c.Wait();
  ASSERT_EQ(ev.kind, server::GenerationEvent::Kind::kDone);
  EXPECT_EQ(ev.usage.completion_tokens, 20);
}

}  // namespace
}  // namespace lifeline::serving
