// ServingHub with the SLO control plane, on two real tiny models (stories260K loaded as
// "heavy" and "light", cascade heavy -> light) and a class whose TTFT target (1 us) no real
// request can meet: every tick raises a (class, model) ladder one level, and each level's
// effect on new requests is checked (truncate caps max_tokens, cascade serves from "light"
// while light's own ladder stays where its own samples put it, shed is a 429 with
// Retry-After on a busy model and never on an idle one), then the levels return to 0 once
// nothing is in flight. The controller is ticked by hand (tick_ms is set to a minute) and a
// model is kept busy by a request whose sink holds the engine thread at its first token, so
// every level is observed deterministically.
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
#include "serving/serving_hub.h"
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
  std::vector<api::GenerationEvent> events;
  bool done = false;

  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      done = done || ev.terminal();
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  // The terminal event (kError with code "timeout" if none came within 20 s).
  api::GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, 20s, [&] { return done; })) {
      api::ApiError e;
      e.code = "timeout";
      return api::GenerationEvent::Error(e);
    }
    return events.back();
  }
};

// A request that keeps its model busy: its sink holds the engine thread at the first token
// until Release(), so the model has a request in flight (not idle) for as long as the test
// needs, whatever the machine's speed.
struct Blocker {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, released = false, done = false;

  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      std::unique_lock<std::mutex> lock(mu);
      if (ev.terminal()) {
        done = true;
        cv.notify_all();
        return;
      }
      if (started) return;
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
    };
  }
  bool WaitStarted() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 20s, [&] { return started; });
  }
  void Release() {
    std::unique_lock<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
    cv.wait_for(lock, 20s, [&] { return done; });
  }
};

api::GenerationRequest Request(int32_t max_tokens, const std::string& model = "heavy") {
  api::GenerationRequest r;
  r.model = model;
  r.prompts = {api::PromptInput{"Once upon a time", {}, false}};
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
    service_ = std::make_unique<ServingHub>(std::move(engines), TightConfig());
    service_->Start();
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }
  // The class's level: the highest over its models, or one (class, model) ladder's.
  int Level() { return static_cast<int>(service_->controller().knobs()->LevelOf("tight")); }
  int Level(const std::string& model) {
    return static_cast<int>(service_->controller().knobs()->LevelOf("tight", model));
  }

  // After a transition a raise is judged on samples newer than it too (window buckets that
  // start after it): wait past a bucket boundary, serve min_samples requests on `model`, then
  // tick: that model's ladder rises one level.
  void TickWithFreshSamples(const std::string& model = "heavy") {
    std::this_thread::sleep_for(110ms);
    for (int i = 0; i < 3; ++i) {
      Collector c;
      auto res = service_->Submit(Request(2, model), c.Sink());
      ASSERT_TRUE(res.accepted()) << res.error->message;
      ASSERT_EQ(res.served_model, model);
      c.Wait();
    }
    const int before = Level(model);
    service_->TickNow();
    ASSERT_EQ(Level(model), before + 1);
  }

  std::unique_ptr<ServingHub> service_;
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
    ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kDone) << ev.error.code;
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
    ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kDone) << ev.error.code;
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

  // Level 3 (cascade): a request for "heavy" is served by "light", and says so. Light's own
  // ladder has seen none of heavy's samples: still normal, so the request is not truncated.
  TickWithFreshSamples();
  TickWithFreshSamples();
  ASSERT_EQ(Level("heavy"), 3);
  EXPECT_EQ(Level("light"), 0);
  {
    Collector c;
    auto res = service_->Submit(Request(6), c.Sink());
    ASSERT_TRUE(res.accepted()) << res.error->message;
    EXPECT_EQ(res.served_model, "light");
    auto ev = c.Wait();
    ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kDone) << ev.error.code;
    EXPECT_EQ(ev.usage.completion_tokens, 6);
    EXPECT_FALSE(ev.timings.contains("lifeline")) << ev.timings.dump();
  }

  // Level 4 (shed) on light, the last member, from its own samples.
  for (int level = 1; level <= 4; ++level) TickWithFreshSamples("light");
  ASSERT_EQ(Level("light"), 4);
  // Meanwhile heavy, its traffic routed away, had no samples since its last transition: it
  // stepped down on its own (recover_ticks 2, no dwell), whatever light's ladder did.
  EXPECT_LT(Level("heavy"), 3);
  {
    // Idle, light is never shed: a refusal would free nothing.
    Collector c;
    auto res = service_->Submit(Request(2, "light"), c.Sink());
    ASSERT_TRUE(res.accepted()) << res.error->message;
    c.Wait();
  }
  {
    // Busy (a request in flight), it sheds: 429 with a Retry-After.
    Blocker busy;
    auto held = service_->Submit(Request(8, "light"), busy.Sink());
    ASSERT_TRUE(held.accepted()) << held.error->message;
    ASSERT_TRUE(busy.WaitStarted());
    Collector c;
    auto res = service_->Submit(Request(2, "light"), c.Sink());
    busy.Release();
    ASSERT_FALSE(res.accepted());
    EXPECT_EQ(res.error->http_status, 429);
    EXPECT_GE(res.error->retry_after_s, 1);
    EXPECT_NE(res.error->message.find("tight"), std::string::npos) << res.error->message;
  }

  // /v1/slo shows the class at its worst ladder, each ladder, and the transitions (heavy
  // 0 -> 3 and down again, light 0 -> 4); /metrics both level gauges.
  auto status_text = service_->SloStatusJson();
  ASSERT_TRUE(status_text.has_value());
  const auto status = nlohmann::json::parse(*status_text);
  EXPECT_GE(status["events_total"].get<int>(), 7);
  int light_raises = 0;
  for (const auto& e : status["events"]) {
    if (e["model"] == "light") {
      EXPECT_GT(e["to_level"], e["from_level"]) << e.dump();
      ++light_raises;
    }
  }
  EXPECT_EQ(light_raises, 4);
  bool found = false;
  for (const auto& cls : status["classes"]) {
    if (cls["name"] != "tight") continue;
    found = true;
    EXPECT_EQ(cls["level"], 4);
    EXPECT_EQ(cls["level_name"], "shed");
    ASSERT_EQ(cls["ladders"].size(), 2u);
    EXPECT_EQ(cls["ladders"][0]["model"], "heavy");
    EXPECT_EQ(cls["ladders"][1]["model"], "light");
    EXPECT_EQ(cls["ladders"][1]["level"], 4);
  }
  EXPECT_TRUE(found);
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("lifeline_slo_degradation_level{class=\"tight\"} 4"), std::string::npos);
  EXPECT_NE(metrics.find("lifeline_slo_model_degradation_level{class=\"tight\",model=\"light\"} 4"),
            std::string::npos);
  EXPECT_NE(metrics.find("outcome=\"routed\""), std::string::npos);
  EXPECT_NE(metrics.find("outcome=\"shed_429\""), std::string::npos);

  // Load stopped: nothing in flight and no new sample, each ladder is idle and drops to
  // normal after recover_ticks = 2 idle ticks.
  std::this_thread::sleep_for(1150ms);
  for (int i = 0; i < 8; ++i) service_->TickNow();
  EXPECT_EQ(Level(), 0);
  Collector c;
  auto res = service_->Submit(Request(20), c.Sink());
  ASSERT_TRUE(res.accepted());
  EXPECT_EQ(res.served_model, "heavy");
  auto ev = c.Wait();
  ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kDone);
  EXPECT_EQ(ev.usage.completion_tokens, 20);
}

}  // namespace
}  // namespace lifeline::serving
