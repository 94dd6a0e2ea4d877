// LiveEconomics (economics/live_economics.h) on a fake clock: a cliff planted in the traffic
// (client disconnects, or outcomes the application posts) is found within its interval; no
// cliff is claimed on a flat rate; joins by request and by session; the window and horizon
// bound what is kept; refusals and errors are not samples.
#include "economics/live_economics.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace lifeline::economics {
namespace {

struct FakeClock {
  int64_t now_ms = 1'765'000'000'000;
};

EconomicsOptions TestOptions(FakeClock* clock) {
  EconomicsOptions o;
  o.refit_interval_ms = 0;  // RefitNow by hand
  o.min_samples = 200;
  o.bootstrap = 100;
  o.null_replicates = 99;
  o.alpha = 0.02;
  o.now_ms = [clock] { return clock->now_ms; };
  o.target_ms = [](const std::string& cls) -> std::optional<double> {
    if (cls == "search") return 350.0;
    return std::nullopt;
  };
  return o;
}

api::RequestLogEntry Finished(const std::string& id, const std::string& cls, double wait_ms,
                              bool left) {
  api::RequestLogEntry e;
  e.id = id;
  e.slo_class = cls;
  e.outcome = left ? "cancelled" : "completed";
  e.cancel_reason = left ? "client_disconnect" : "";
  e.e2e_ms = wait_ms;
  if (left) {
    e.disconnect_ms = wait_ms;
  } else {
    e.ttft_ms = wait_ms;
    e.e2e_ms = wait_ms + 300;
  }
  return e;
}

// Waits log-normal around 300 ms; abandonment 10 % below the knee, 35 % at or above it.
struct Planted {
  double wait_ms;
  bool abandoned;
};
std::vector<Planted> PlantedCliff(int n, double knee_ms, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> wait(std::log(300.0), 0.5);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Planted> out;
  for (int i = 0; i < n; ++i) {
    const double w = wait(rng);
    out.push_back({w, u(rng) < (w >= knee_ms ? 0.35 : 0.10)});
  }
  return out;
}

const nlohmann::json* ClassOf(const nlohmann::json& j, const std::string& cls) {
  for (const auto& c : j["classes"]) {
    if (c["class"] == cls) return &c;
  }
  return nullptr;
}

TEST(LiveEconomicsTest, FindsACliffPlantedInClientDisconnects) {
  FakeClock clock;
  LiveEconomics econ(TestOptions(&clock));
  const auto planted = PlantedCliff(6000, 387, 7);
  for (size_t i = 0; i < planted.size(); ++i) {
    econ.OnFinished(Finished("r" + std::to_string(i), "search", planted[i].wait_ms, planted[i].abandoned));
  }
  econ.RefitNow();
  const nlohmann::json j = econ.EconomicsJson();
  const nlohmann::json* c = ClassOf(j, "search");
  ASSERT_NE(c, nullptr) << j.dump();
  EXPECT_EQ((*c)["status"], "found") << c->dump();
  EXPECT_EQ((*c)["samples"], 6000);
  EXPECT_NEAR((*c)["cliff_ms"].get<double>(), 387, 15) << c->dump();
  EXPECT_LE((*c)["ci95_ms"][0].get<double>(), 387 + 15);
  EXPECT_GE((*c)["ci95_ms"][1].get<double>(), 387 - 15);
  EXPECT_EQ((*c)["target_ms"], 350.0);
  EXPECT_NE((*c)["summary"].get<std::string>().find("the target is 350 ms"), std::string::npos);
  EXPECT_EQ((*c)["bins"].size(), 20u);
  EXPECT_EQ(j["refits"], 1);
  EXPECT_NE(econ.MetricsText().find("lifeline_economics_cliff_ms{class=\"search\"}"),
            std::string::npos);
}

TEST(LiveEconomicsTest, AFlatRateClaimsNoCliff) {
  FakeClock clock;
  LiveEconomics econ(TestOptions(&clock));
  std::mt19937 rng(3);
  std::lognormal_distribution<double> wait(std::log(300.0), 0.5);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 4000; ++i) {
    econ.OnFinished(Finished("r" + std::to_string(i), "chat", wait(rng), u(rng) < 0.2));
  }
  econ.RefitNow();
  const nlohmann::json j = econ.EconomicsJson();
  const nlohmann::json* c = ClassOf(j, "chat");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "no_cliff") << c->dump();
  EXPECT_TRUE((*c)["cliff_ms"].is_null());
  EXPECT_EQ(econ.MetricsText().find("lifeline_economics_cliff_ms{"), std::string::npos);
}

// The application knows better than the socket: every request completed without a
// disconnect, and the abandonment comes only from posted events, by request id.
TEST(LiveEconomicsTest, PostedOutcomesOverrideTheDisconnectSignal) {
  FakeClock clock;
  LiveEconomics econ(TestOptions(&clock));
  const auto planted = PlantedCliff(6000, 250, 11);
  std::vector<api::OutcomeEvent> events;
  for (size_t i = 0; i < planted.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    econ.OnFinished(Finished(id, "search", planted[i].wait_ms, /*left=*/false));
    api::OutcomeEvent ev;
    ev.request_id = id;
    ev.type = planted[i].abandoned ? api::OutcomeType::kAbandoned : api::OutcomeType::kCompleted;
    events.push_back(ev);
  }
  econ.RefitNow();
  EXPECT_EQ((*ClassOf(econ.EconomicsJson(), "search"))["status"], "one_outcome");
  for (size_t at = 0; at < events.size(); at += 1000) {
    std::vector<api::OutcomeEvent> batch(events.begin() + at,
                                         events.begin() + std::min(events.size(), at + 1000));
    const api::OutcomesResult r = econ.PostOutcomes(batch);
    EXPECT_EQ(r.joined, static_cast<int64_t>(batch.size()));
    EXPECT_EQ(r.unknown, 0);
  }
  econ.RefitNow();
  const nlohmann::json j = econ.EconomicsJson();
  const nlohmann::json* c = ClassOf(j, "search");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "found") << c->dump();
  EXPECT_NEAR((*c)["cliff_ms"].get<double>(), 250, 15) << c->dump();
}

TEST(LiveEconomicsTest, JoinsBySessionToItsLatestRequestAndCountsUnknownIds) {
  FakeClock clock;
  LiveEconomics econ(TestOptions(&clock));
  api::RequestLogEntry a = Finished("a", "chat", 100, false);
  a.session_id = "s1";
  api::RequestLogEntry b = Finished("b", "chat", 900, false);
  b.session_id = "s1";
  econ.OnFinished(a);
  econ.OnFinished(b);
  api::OutcomeEvent clicked;
  clicked.session_id = "s1";
  clicked.type = api::OutcomeType::kClicked;
  api::OutcomeEvent lost;
  lost.request_id = "never-seen";
  lost.type = api::OutcomeType::kConverted;
  const api::OutcomesResult r = econ.PostOutcomes({clicked, lost});
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.joined, 1);
  EXPECT_EQ(r.unknown, 1);
  EXPECT_EQ(r.request_ids, (std::vector<std::string>{"b", ""}));  // what each event joined
  econ.RefitNow();
  const nlohmann::json j = econ.EconomicsJson();
  const nlohmann::json* c = ClassOf(j, "chat");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "too_few_samples");
  // Two bins of one request each: the click went to the 900 ms request, b.
  ASSERT_EQ((*c)["bins"].size(), 2u);
  EXPECT_EQ((*c)["bins"][0]["click_rate"], 0.0);
  EXPECT_EQ((*c)["bins"][1]["click_rate"], 1.0);
  const std::string m = econ.MetricsText();
  EXPECT_NE(m.find("lifeline_outcome_events_total{type=\"clicked\",result=\"joined\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("lifeline_outcome_events_total{type=\"converted\",result=\"unknown\"} 1"), std::string::npos) << m;
}

TEST(LiveEconomicsTest, TheWindowAndTheHorizonBoundWhatIsKept) {
  FakeClock clock;
  EconomicsOptions o = TestOptions(&clock);
  o.window_requests = 1000;
  o.horizon_ms = 60'000;
  LiveEconomics econ(o);
  for (int i = 0; i < 1500; ++i) econ.OnFinished(Finished("r" + std::to_string(i), "chat", 100, false));
  EXPECT_EQ(econ.EconomicsJson()["window"]["requests"], 1000);
  api::OutcomeEvent first, last;
  first.request_id = "r0";  // evicted
  last.request_id = "r1499";
  EXPECT_EQ(econ.PostOutcomes({first}).unknown, 1);
  EXPECT_EQ(econ.PostOutcomes({last}).joined, 1);
  econ.RefitNow();
  EXPECT_EQ((*ClassOf(econ.EconomicsJson(), "chat"))["samples"], 1000);
  // Past the horizon: none of them is a sample any more.
  clock.now_ms += 61'000;
  econ.OnFinished(Finished("new", "chat", 100, false));
  econ.RefitNow();
  EXPECT_EQ((*ClassOf(econ.EconomicsJson(), "chat"))["samples"], 1);
}

TEST(LiveEconomicsTest, RefusalsErrorsAndShutdownsAreNotSamples) {
  FakeClock clock;
  LiveEconomics econ(TestOptions(&clock));
  api::RequestLogEntry shed = Finished("x", "chat", 1, false);
  shed.outcome = "refused";
  shed.ttft_ms.reset();
  api::RequestLogEntry failed = shed;
  failed.outcome = "error";
  api::RequestLogEntry shutdown = shed;
  shutdown.outcome = "cancelled";
  shutdown.cancel_reason = "shutdown";
  for (const auto& e : {shed, failed, shutdown}) econ.OnFinished(e);
  econ.OnFinished(Finished("ok", "chat", 50, false));
  econ.RefitNow();
  EXPECT_EQ((*ClassOf(econ.EconomicsJson(), "chat"))["samples"], 1);
  // They can still be joined (the application may post for a refused request).
  api::OutcomeEvent ev;
  ev.request_id = "x";
  ev.type = api::OutcomeType::kAbandoned;
  EXPECT_EQ(econ.PostOutcomes({ev}).joined, 1);
}

}  // namespace
}  // namespace lifeline::economics
