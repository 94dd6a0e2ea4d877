// ServingHub's control plane end to end on scripted models (FakeModel) and a fake clock:
// admission, the per-(class, model) ladders, the queue sensor (requests in flight) and the
// prediction audit run as in production, and the test decides when each request gets its
// first token and ends. Every figure is worked out from the policy in docs/slo.md; nothing
// depends on how fast the machine is.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_model.h"
#include "serving/serving_hub.h"
#include "slo/slo_config.h"

namespace lifeline::serving {
namespace {

using lifeline::testing::FakeModel;

constexpr int64_t kTickUs = 200'000;  // controller.tick_ms by default

struct FakeClock {
  std::shared_ptr<std::atomic<int64_t>> us = std::make_shared<std::atomic<int64_t>>(1'000'000'000);
  int64_t Now() const { return us->load(); }
  void Advance(int64_t d_us) { us->fetch_add(d_us); }
  ServiceClock Fn() const {
    return [us = us] { return us->load(); };
  }
};

// Collects one request's events.
struct Sink {
  std::vector<api::GenerationEvent> events;
  api::GenerationSink Fn() {
    return [this](api::GenerationEvent ev) { events.push_back(std::move(ev)); };
  }
};

class ServiceSloTest : public ::testing::Test {
 protected:
  // Models named in `names` (a FakeModel each), cascade `cascade` (heavy -> light) if any.
  void Build(const std::vector<std::string>& names, const std::vector<std::string>& cascade = {},
             slo::SloConfig config = slo::DefaultSloConfig()) {
    config.admission.speed_stale_ms = 0;  // no probes: each test says what it measures
    for (const std::string& c : cascade) {
      slo::ModelEntry m;
      m.name = c;
      m.path = "local";
      config.models.push_back(m);
    }
    std::vector<std::unique_ptr<LocalModel>> engines;
    for (const std::string& n : names) {
      auto m = std::make_unique<FakeModel>(n);
      models_.push_back(m.get());
      engines.push_back(std::move(m));
    }
    service_ = std::make_unique<ServingHub>(std::move(engines),
                                               std::vector<std::unique_ptr<RemoteBackend>>{},
                                               std::move(config), clock_.Fn());
    // As calibration would: a step costs 8 ms + 0.125 ms/token (a 64-token prompt: 16 ms).
    for (FakeModel* m : models_) {
      m->speeds()->ObservePrefill(16, 10, clock_.Now());
      m->speeds()->ObservePrefill(256, 40, clock_.Now());
      m->speeds()->ObserveDecode(5, clock_.Now());
    }
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }

  api::GenerationRequest Request(const std::string& model) {
    api::GenerationRequest r;
    r.model = model;
    r.prompts = {api::PromptInput{"hi", {}, false}};
    r.max_tokens = 300;
    r.timeline.first_byte = r.timeline.validated =
        Clock::time_point(std::chrono::microseconds(clock_.Now()));
    return r;
  }
  api::SubmitResult Submit(const std::string& model) {
    sinks_.push_back(std::make_unique<Sink>());
    return service_->Submit(Request(model), sinks_.back()->Fn());
  }
  int Level(const std::string& model, const std::string& cls = "interactive") {
    return static_cast<int>(service_->controller().knobs()->LevelOf(cls, model));
  }
  void Tick() {
    clock_.Advance(kTickUs);
    service_->TickNow();
  }

  FakeClock clock_;
  std::vector<FakeModel*> models_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  std::unique_ptr<ServingHub> service_;
};

// The first run's 36 s waits: a model's queue kept filling and produced no first token; the
// controller, seeing no completed TTFT, called the class idle and went back to normal. Now the
// waiting requests are the sensor: the ladder climbs while they age, never falls while the
// queue is full, and is back to normal 2 s after the queue empties.
TEST_F(ServiceSloTest, AQueueThatProducesNoFirstTokenRaisesTheLadderAndRoutes) {
  Build({"heavy", "light"}, {"heavy", "light"});
  FakeModel& heavy = *models_[0];
  int max_heavy = 0, routed = 0;
  bool fell = false;
  int prev = 0;
  // 8 requests/s for 10 s, none of heavy's ever starts.
  for (int t = 0; t < 50; ++t) {
    if (t % 1 == 0) {
      for (int k = 0; k < 2; ++k) {
        const api::SubmitResult r = Submit("heavy");
        ASSERT_TRUE(r.accepted()) << r.error->message;
        if (r.served_model == "light") ++routed;
      }
    }
    // Light serves what it gets at once.
    for (api::RequestHandle h : models_[1]->Open()) {
      models_[1]->FirstToken(h);
      models_[1]->Finish(h);
    }
    Tick();
    const int level = Level("heavy");
    fell |= level < prev;
    prev = level;
    max_heavy = std::max(max_heavy, level);
  }
  EXPECT_GE(max_heavy, 3) << "the cascade level routes new requests to light";
  EXPECT_FALSE(fell) << "the ladder fell while heavy's queue was full";
  EXPECT_GT(routed, 40);
  // The status shows the queue: requests in flight and the oldest waiting one.
  const nlohmann::json slo = service_->SloStatus();
  bool seen = false;
  for (const auto& c : slo["classes"]) {
    if (c["name"] != "interactive") continue;
    for (const auto& l : c["ladders"]) {
      if (l["model"] != "heavy") continue;
      seen = true;
      EXPECT_GT(l["in_flight"]["waiting"].get<int>(), 5) << l.dump();
      EXPECT_GT(l["in_flight"]["oldest_waiting_ms"].get<double>(), 9000) << l.dump();
    }
  }
  EXPECT_TRUE(seen);
  // The queue empties: heavy is idle, and normal 10 idle ticks (2 s) later.
  for (api::RequestHandle h : heavy.Open()) heavy.Finish(h);
  int ticks_to_normal = 0;
  while (Level("heavy") != 0 && ticks_to_normal < 100) {
    Tick();
    ++ticks_to_normal;
  }
  EXPECT_LE(ticks_to_normal, 11);
  // And the next request for heavy is served there.
  const api::SubmitResult r = Submit("heavy");
  ASSERT_TRUE(r.accepted());
  EXPECT_EQ(r.served_model, "heavy");
}

// Two models in one server, one overloaded: the other one's ladder, margin and admission never
// move -- no truncation, no routing, no shedding -- and its requests are served as alone.
TEST_F(ServiceSloTest, AnOverloadedModelNeverDegradesItsNeighbour) {
  Build({"big", "small"});  // no cascade: each is served only when named
  FakeModel& big = *models_[0];
  FakeModel& small = *models_[1];
  int small_refused = 0, small_capped = 0, big_refused = 0;
  for (int t = 0; t < 60; ++t) {
    const api::SubmitResult b = Submit("big");  // 5/s, stuck
    big_refused += b.accepted() ? 0 : 1;
    const api::SubmitResult s = Submit("small");
    if (!s.accepted()) {
      ++small_refused;
    } else {
      small_capped += small.CapOf(s.handle).has_value() ? 1 : 0;
      clock_.Advance(60'000);  // small answers its first token in 60 ms
      small.FirstToken(s.handle);
      small.Finish(s.handle);
    }
    Tick();
  }
  EXPECT_GT(Level("big"), 0);
  EXPECT_GT(big_refused, 0) << "big sheds its own load";
  EXPECT_EQ(Level("small"), 0);
  EXPECT_EQ(small_refused, 0);
  EXPECT_EQ(small_capped, 0);
  EXPECT_DOUBLE_EQ(service_->controller().knobs()->MarginScaleOf("interactive", "small"), 1.0);
  for (const slo::LadderEvent& e : service_->controller().RecentEvents()) {
    EXPECT_EQ(e.model, "big") << e.reason;
  }
  for (api::RequestHandle h : big.Open()) big.Finish(h);
}

// A predictor that runs 10x high (as it did for a small model beside a busy big one) is
// corrected by the first requests it is held to account on, and no longer sheds.
TEST_F(ServiceSloTest, APredictionTenfoldTooHighIsCorrectedWithinAFewRequests) {
  Build({"m"});
  FakeModel& m = *models_[0];
  // A stale, pessimistic fit: ~1 s for a 64-token prompt (fixed 996 ms + 0.25 ms/token).
  slo::SpeedEstimator& speeds = *m.speeds();
  speeds.ObservePrefill(16, 1000, clock_.Now());
  speeds.ObservePrefill(256, 1060, clock_.Now());
  for (int i = 0; i < 20; ++i) {  // the EWMA settles on the pessimistic values
    speeds.ObservePrefill(16, 1000, clock_.Now());
    speeds.ObservePrefill(256, 1060, clock_.Now());
  }
  // Busy (one request open), the prediction (~1.2 s) sheds.
  const api::SubmitResult held = Submit("m");
  ASSERT_TRUE(held.accepted());  // idle: admitted although predicted late
  const api::SubmitResult before = Submit("m");
  ASSERT_FALSE(before.accepted());
  EXPECT_EQ(before.error->http_status, 429);
  // The admitted one gets its first token after 100 ms: measured / predicted ~ 0.1.
  clock_.Advance(100'000);
  m.FirstToken(held.handle);
  m.Finish(held.handle);
  const slo::PredictionAudit* audit = service_->Audit("m");
  ASSERT_NE(audit, nullptr);
  EXPECT_LT(audit->correction(), 0.15);
  // Busy again: now admitted, and predicted within a factor 2 of what happens.
  const api::SubmitResult blocker = Submit("m");
  ASSERT_TRUE(blocker.accepted());
  const api::SubmitResult after = Submit("m");
  ASSERT_TRUE(after.accepted()) << after.error->message;
  clock_.Advance(100'000);
  m.FirstToken(after.handle);
  const slo::PredictionAudit::Stats st = audit->Snapshot();
  EXPECT_EQ(st.count, 2u);
  EXPECT_GT(st.last_ratio, 0.5);
  EXPECT_LT(st.last_ratio, 2.0);
  // The error distribution is published.
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("lifeline_admission_prediction_ratio_count{model=\"m\"} 2"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("lifeline_admission_prediction_correction{model=\"m\"}"),
            std::string::npos);
  const nlohmann::json slo = service_->SloStatus();
  ASSERT_EQ(slo["models"][0]["name"], "m");
  EXPECT_EQ(slo["models"][0]["prediction"]["checked"], 2);
  for (api::RequestHandle h : m.Open()) m.Finish(h);
}

// The first request after a burst: the ladder is still at shed, but the model's queue has
// emptied. It is served, not refused; the ladder is normal 2 s later.
TEST_F(ServiceSloTest, TheFirstRequestAfterABurstIsServed) {
  Build({"m"});
  FakeModel& m = *models_[0];
  for (int t = 0; t < 40; ++t) {
    (void)Submit("m");
    (void)Submit("m");
    Tick();
  }
  ASSERT_EQ(Level("m"), 4);
  EXPECT_FALSE(Submit("m").accepted()) << "busy at shed: refused";
  for (api::RequestHandle h : m.Open()) m.Finish(h);
  const api::SubmitResult first = Submit("m");
  ASSERT_TRUE(first.accepted()) << first.error->message;
  EXPECT_EQ(Level("m"), 4);  // the ladder has not come down yet
  m.FirstToken(first.handle);
  m.Finish(first.handle);
  for (int t = 0; t < 11; ++t) Tick();
  EXPECT_EQ(Level("m"), 0);
}

// A queued request its model drops as late moves down the cascade before its first token:
// the client hears which model serves it, then that model's answer; one terminal event.
// Without a lighter member the 429 reaches the client.
TEST_F(ServiceSloTest, ALateRequestMovesToTheLighterMember) {
  Build({"heavy", "light"}, {"heavy", "light"});
  FakeModel& heavy = *models_[0];
  FakeModel& light = *models_[1];
  const api::SubmitResult r = Submit("heavy");
  ASSERT_TRUE(r.accepted());
  ASSERT_EQ(r.served_model, "heavy");
  clock_.Advance(300'000);
  heavy.FailLate(r.handle);
  ASSERT_EQ(light.Open().size(), 1u) << "light took it";
  light.FirstToken(r.handle);
  light.Finish(r.handle);
  const std::vector<api::GenerationEvent>& ev = sinks_.back()->events;
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, api::GenerationEvent::Kind::kRouted);
  EXPECT_EQ(ev[0].text, "light");
  EXPECT_EQ(ev[1].kind, api::GenerationEvent::Kind::kToken);
  EXPECT_EQ(ev[2].kind, api::GenerationEvent::Kind::kDone);
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("outcome=\"late_routed\"} 1"), std::string::npos) << metrics;
  // The last member has nowhere to send it: the 429 ends the request.
  const api::SubmitResult last = Submit("light");
  ASSERT_TRUE(last.accepted());
  light.FailLate(last.handle);
  const std::vector<api::GenerationEvent>& ev2 = sinks_.back()->events;
  ASSERT_EQ(ev2.size(), 1u);
  EXPECT_EQ(ev2[0].kind, api::GenerationEvent::Kind::kError);
  EXPECT_EQ(ev2[0].error.code, "slo_late");
}

// An embedding is judged under its own class and never moves to a lighter member: another
// model's vector is not in the asked model's space. Its late refusal ends it.
TEST_F(ServiceSloTest, AnEmbeddingKeepsItsClassAndItsModel) {
  Build({"heavy", "light"}, {"heavy", "light"});
  FakeModel& heavy = *models_[0];
  FakeModel& light = *models_[1];
  api::GenerationRequest req = Request("heavy");
  req.task = api::Task::kEmbed;
  req.max_tokens.reset();
  sinks_.push_back(std::make_unique<Sink>());
  const api::SubmitResult r = service_->Submit(std::move(req), sinks_.back()->Fn());
  ASSERT_TRUE(r.accepted());
  EXPECT_EQ(r.slo_class, "search-embed");
  EXPECT_EQ(r.served_model, "heavy");
  clock_.Advance(300'000);
  heavy.FailLate(r.handle);
  EXPECT_TRUE(light.Open().empty()) << "an embedding must not be routed";
  const std::vector<api::GenerationEvent>& ev = sinks_.back()->events;
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, api::GenerationEvent::Kind::kError);
  EXPECT_EQ(ev[0].error.code, "slo_late");
  // A rerank too; a class named by the request wins.
  api::GenerationRequest rr = Request("heavy");
  rr.task = api::Task::kRerank;
  sinks_.push_back(std::make_unique<Sink>());
  EXPECT_EQ(service_->Submit(rr, sinks_.back()->Fn()).slo_class, "search-rerank");
  rr.slo_class = "chat";
  sinks_.push_back(std::make_unique<Sink>());
  EXPECT_EQ(service_->Submit(rr, sinks_.back()->Fn()).slo_class, "chat");
}

// A returning conversation: of its 1,000-token prompt the prefix cache holds 960, so only 40
// are prefilled, and admission prices those. Priced as 1,000 behind a queued prompt it would
// be shed (3 ms/token: 3.2 s predicted against 387 ms).
TEST_F(ServiceSloTest, AdmissionPricesOnlyThePromptTokensTheCacheDoesNotHold) {
  Build({"m"});
  FakeModel& model = *models_[0];
  slo::SpeedEstimator& speeds = *model.speeds();
  for (int i = 0; i < 21; ++i) {
    speeds.ObservePrefill(16, 48, clock_.Now());
    speeds.ObservePrefill(256, 768, clock_.Now());
  }
  slo::QueueLoad busy;
  busy.queued_requests = 1;
  busy.queued_prefill_tokens = 40;
  model.SetLoad(busy);
  model.SetPromptTokens(1000);
  ASSERT_TRUE(Submit("m").accepted());   // nothing open on the model: idle, served anyway
  EXPECT_FALSE(Submit("m").accepted());  // behind it, 1,040 tokens x 3 ms: shed
  model.SetCachedPromptTokens(960);
  const api::SubmitResult r = Submit("m");  // 80 tokens x 3 ms x margin: admitted
  ASSERT_TRUE(r.accepted()) << r.error->message;
  for (api::RequestHandle h : model.Open()) model.Finish(h);
}

// An embedding whose class budget the model misses even alone is judged against its floor
// (admission.cpp) and admitted behind a request in flight, where a completion is shed; in the
// queue it is late only past that budget. The same pessimistic fit as above (~1.2 s alone).
TEST_F(ServiceSloTest, AnEmbeddingBelowTheModelsFloorIsServedWhereACompletionIsShed) {
  Build({"m"});
  FakeModel& m = *models_[0];
  slo::SpeedEstimator& speeds = *m.speeds();
  for (int i = 0; i < 21; ++i) {
    speeds.ObservePrefill(16, 1000, clock_.Now());
    speeds.ObservePrefill(256, 1060, clock_.Now());
  }
  const api::SubmitResult held = Submit("m");
  ASSERT_TRUE(held.accepted());  // idle
  EXPECT_FALSE(Submit("m").accepted());  // a completion: shed
  api::GenerationRequest e = Request("m");
  e.task = api::Task::kEmbed;
  e.max_tokens.reset();
  sinks_.push_back(std::make_unique<Sink>());
  const api::SubmitResult emb = service_->Submit(std::move(e), sinks_.back()->Fn());
  ASSERT_TRUE(emb.accepted()) << emb.error->message;
  EXPECT_NE(service_->MetricsText().find("outcome=\"below_floor\"} 1"), std::string::npos);
  ASSERT_TRUE(m.SloOf(emb.handle).has_value());
  EXPECT_GT(*m.SloOf(emb.handle)->ttft_budget_ms, 2000.0);  // not search-embed's 50 ms
  for (api::RequestHandle h : m.Open()) m.Finish(h);
}

// A model whose file changed under the server: its new requests get the documented 503
// model_failed naming the change (before: 503 model_not_ready from admission, "shedding
// load: model not ready; retry after 1 s", as if it were load that may pass). In a cascade
// an unready member still routes to the next one, failed or not.
TEST_F(ServiceSloTest, AFailedModelsNewRequestsGetModelFailed) {
  Build({"heavy", "light"}, {"heavy", "light"});
  models_[1]->Fail("model file 'light.gguf' was modified in place while in use");
  EXPECT_FALSE(service_->Ready());
  EXPECT_NE(service_->NotReadyReason().find("modified in place"), std::string::npos);
  const api::SubmitResult r = Submit("light");
  ASSERT_FALSE(r.accepted());
  EXPECT_EQ(r.error->http_status, 503);
  EXPECT_EQ(r.error->code, "model_failed");
  EXPECT_NE(r.error->message.find("modified in place"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.error->retry_after_s, 0) << "not load: a retry does not help";
  // The healthy member is served; a failed heavy member routes to the light one.
  EXPECT_TRUE(Submit("heavy").accepted());
  models_[1]->Fail("");
  models_[0]->Fail("model file 'heavy.gguf' was truncated");
  const api::SubmitResult routed = Submit("heavy");
  ASSERT_TRUE(routed.accepted());
  EXPECT_EQ(routed.served_model, "light");
}

// A thinking model under a TTFA target (docs/reasoning.md). Each request thinks from its
// first token and answers after 3 s x its thinking scale: TTFA is over the 1 s target while
// TTFT is fine. The thinking rung halves the budgets new requests get -- the level stays
// normal and no answer is capped while it does -- and once shortened thinking brings TTFA
// under target, the ladder never rises and the thinking grows back.
TEST_F(ServiceSloTest, TheThinkingRungShortensThinkingBeforeAnyAnswerIsCut) {
  slo::SloConfig config = slo::DefaultSloConfig();
  for (slo::SloClass& c : config.classes) {
    if (c.name == "interactive") c.ttfa_p95_ms = 1000;
  }
  config.ladder.raise_interval_ms = 1000;
  config.ladder.min_thinking_scale = 0.25;
  Build({"r1"}, {}, config);
  FakeModel& r1 = *models_[0];
  r1.SetThinks(true);
  struct Pending {
    api::RequestHandle h;
    int64_t answer_at_us;
  };
  std::vector<Pending> pending;
  std::vector<double> scales_seen;
  int max_level = 0;
  bool capped = false;
  for (int t = 0; t < 300; ++t) {  // 60 s, 5 requests per second
    const api::SubmitResult r = Submit("r1");
    ASSERT_TRUE(r.accepted()) << r.error->message;
    const std::optional<SubmitSlo> slo = r1.SloOf(r.handle);
    ASSERT_TRUE(slo.has_value());
    const double scale = slo->thinking.scale;
    if (scales_seen.empty() || scales_seen.back() != scale) scales_seen.push_back(scale);
    capped |= r1.CapOf(r.handle).has_value();
    r1.Think(r.handle);
    pending.push_back({r.handle, clock_.Now() + static_cast<int64_t>(3'000'000 * scale)});
    Tick();
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->answer_at_us > clock_.Now()) {
        ++it;
        continue;
      }
      r1.Answer(it->h);
      r1.Finish(it->h);
      it = pending.erase(it);
    }
    max_level = std::max(max_level, Level("r1"));
  }
  ASSERT_GE(scales_seen.size(), 3u);
  EXPECT_EQ(scales_seen[0], 1.0);
  EXPECT_EQ(scales_seen[1], 0.5);
  EXPECT_EQ(scales_seen[2], 0.25) << "halved down to the floor";
  EXPECT_EQ(max_level, 0) << "shorter thinking was enough: no answer was capped";
  EXPECT_FALSE(capped);
  EXPECT_GE(service_->controller().ThinkingCuts(), 2u);
  EXPECT_GE(service_->controller().ThinkingRestores(), 1u)
      << "with TTFA back under target the thinking grows back";
  const std::string metrics = service_->MetricsText();
  EXPECT_NE(metrics.find("lifeline_ttfa_seconds_count{class=\"interactive\""), std::string::npos);
  EXPECT_NE(metrics.find("lifeline_slo_thinking_changes_total{direction=\"down\"}"),
            std::string::npos);
  EXPECT_NE(metrics.find("outcome=\"thinking_shortened\""), std::string::npos);
  const nlohmann::json status = service_->SloStatus();
  ASSERT_FALSE(status["thinking_changes"].empty());
  EXPECT_EQ(status["thinking_changes"][0]["to"], 0.5);
  EXPECT_EQ(status["thinking_changes"][0]["model"], "r1");
}

// Under load the first pressure reading may come before any request of a thinking class has
// begun to think (all still waiting): the requests admitted to think already say the class
// thinks, so the rung halves the thinking instead of raising the level.
TEST_F(ServiceSloTest, TheThinkingRungActsBeforeAnyRequestHasBegunToThink) {
  slo::SloConfig config = slo::DefaultSloConfig();
  for (slo::SloClass& c : config.classes) {
    if (c.name == "interactive") {
      c.ttft_p95_ms = 60000;
      c.ttfa_p95_ms = 1000;
    }
  }
  Build({"r1"}, {}, config);
  FakeModel& r1 = *models_[0];
  r1.SetThinks(true);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Submit("r1").accepted());
  for (int t = 0; t < 15 && service_->controller().ThinkingCuts() == 0; ++t) Tick();  // 3 s
  EXPECT_GE(service_->controller().ThinkingCuts(), 1u)
      << "waiting requests past the TTFA target, admitted to think: the thinking rung";
  EXPECT_EQ(Level("r1"), 0) << "no answer is cut while the thinking can be shortened";
}

// Admission fits the thinking to the TTFA budget: a request that may think without limit
// thinks only what the room between its predicted first token and the class's TTFA target
// holds at the measured time per token; a budget already inside the room is left alone, and a
// class without a TTFA target caps nothing.
TEST_F(ServiceSloTest, AdmissionFitsTheThinkingBudgetToTheTtfaTarget) {
  slo::SloConfig config = slo::DefaultSloConfig();
  for (slo::SloClass& c : config.classes) {
    if (c.name == "interactive") c.ttfa_p95_ms = 1000;
  }
  Build({"r1"}, {}, config);
  FakeModel& r1 = *models_[0];
  r1.SetThinks(true);
  // 5 ms per decoded token (SetUp's fit); a 64-token prompt predicts ~16 ms to the first
  // token: (1000 - 16) / 5 = 196 thinking tokens fit.
  const api::SubmitResult open = Submit("r1");
  ASSERT_TRUE(open.accepted()) << open.error->message;
  EXPECT_EQ(r1.ThinkingBudgetOf(open.handle), -1) << "the request asked for no limit";
  const std::optional<int64_t> cap = r1.ThinkingCapOf(open.handle);
  ASSERT_TRUE(cap.has_value()) << "an unlimited think under a TTFA target is fitted";
  EXPECT_GE(*cap, 180);
  EXPECT_LE(*cap, 200);

  // A budget already inside the room is not touched.
  api::GenerationRequest small = Request("r1");
  small.thinking_budget_tokens = 50;
  sinks_.push_back(std::make_unique<Sink>());
  const api::SubmitResult inside = service_->Submit(std::move(small), sinks_.back()->Fn());
  ASSERT_TRUE(inside.accepted());
  EXPECT_EQ(r1.ThinkingBudgetOf(inside.handle), 50);
  EXPECT_FALSE(r1.ThinkingCapOf(inside.handle).has_value());

  // Slower decoding (the engine's interval under load: 20 ms a token) fits fewer.
  slo::QueueLoad load;
  load.decode_interval_ms = 20;
  r1.SetLoad(load);
  const api::SubmitResult slow = Submit("r1");
  ASSERT_TRUE(slow.accepted());
  const std::optional<int64_t> slow_cap = r1.ThinkingCapOf(slow.handle);
  ASSERT_TRUE(slow_cap.has_value());
  EXPECT_LT(*slow_cap, *cap / 2);
  EXPECT_GT(*slow_cap, 0);
  EXPECT_NE(service_->MetricsText().find("outcome=\"thinking_shortened\""), std::string::npos);

  // Not one token fits (a token takes longer than the whole room): nothing is taken away
  // at admission; the class-level rung decides.
  load.decode_interval_ms = 5000;
  r1.SetLoad(load);
  const api::SubmitResult none_fits = Submit("r1");
  ASSERT_TRUE(none_fits.accepted());
  EXPECT_FALSE(r1.ThinkingCapOf(none_fits.handle).has_value());
}

TEST_F(ServiceSloTest, WithoutATtfaTargetAdmissionLeavesThinkingAlone) {
  Build({"r1"});
  FakeModel& r1 = *models_[0];
  r1.SetThinks(true);
  const api::SubmitResult r = Submit("r1");
  ASSERT_TRUE(r.accepted());
  EXPECT_FALSE(r1.ThinkingCapOf(r.handle).has_value());
}

}  // namespace
}  // namespace lifeline::serving
