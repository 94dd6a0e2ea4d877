// Guarded tuning (slo/autotune.h, slo/target_board.h): the target moves only on a significant,
// stable cliff, by bounded steps, within its bounds, at most once per interval; and the moved
// target is the one the controller, Resolve and /v1/slo use.
#include "slo/autotune.h"

#include <gtest/gtest.h>

#include "slo/controller.h"
#include "slo/slo_report.h"

namespace lifeline::slo {
namespace {

constexpr int64_t kT0 = 1'765'000'000'000;
constexpr int64_t kHourMs = 3'600'000;

// chat: TTFT target 400 ms; bulk: an e2e target only.
SloConfig TunedConfig(bool enabled = true) {
  SloConfig c = DefaultSloConfig();
  c.classes.clear();
  SloClass chat;
  chat.name = "chat";
  chat.ttft_p95_ms = 400;
  SloClass bulk;
  bulk.name = "bulk";
  bulk.e2e_p95_ms = 60000;
  c.classes = {bulk, chat};
  c.default_class = "chat";
  c.autotune.enabled = enabled;
  c.autotune.margin = 0.10;
  c.autotune.max_step = 0.10;
  c.autotune.min_factor = 0.5;
  c.autotune.max_factor = 2.0;
  c.autotune.stable_refits = 3;
  c.autotune.min_interval_ms = kHourMs;
  return c;
}

CliffEstimate Cliff(const std::string& cls, double at_ms, double half_width = 10, bool found = true) {
  CliffEstimate e;
  e.slo_class = cls;
  e.found = found;
  e.cliff_ms = at_ms;
  e.ci_lo_ms = at_ms - half_width;
  e.ci_hi_ms = at_ms + half_width;
  e.p_value = found ? 0.005 : 0.4;
  e.samples = 5000;
  return e;
}

TEST(AutotuneTest, DisabledNeverMoves) {
  TargetBoard board;
  Autotuner tuner(TunedConfig(/*enabled=*/false), &board);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(tuner.Observe(Cliff("chat", 300), kT0 + i * kHourMs));
  EXPECT_FALSE(board.Ttft("chat").has_value());
}

TEST(AutotuneTest, NeverMovesWithoutSignificance) {
  TargetBoard board;
  Autotuner tuner(TunedConfig(), &board);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(tuner.Observe(Cliff("chat", 300, 10, /*found=*/false), kT0 + i * kHourMs));
  }
  EXPECT_FALSE(board.Ttft("chat").has_value());
}

TEST(AutotuneTest, NeedsAStableEstimateOverItsRefits) {
  TargetBoard board;
  Autotuner tuner(TunedConfig(), &board);
  // Significant but wandering: each cliff outside the interval before it.
  const double wandering[] = {300, 340, 280, 330, 270};
  for (double c : wandering) EXPECT_FALSE(tuner.Observe(Cliff("chat", c), kT0));
  // One miss in between resets the count too.
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 300), kT0));
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 302, 10, /*found=*/false), kT0));
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 301), kT0));
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 303), kT0));
  // The third stable one moves it.
  const auto m = tuner.Observe(Cliff("chat", 299), kT0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stable_refits, 3);
}

TEST(AutotuneTest, StepsTowardCliffMinusMarginOncePerInterval) {
  TargetBoard board;
  Autotuner tuner(TunedConfig(), &board);
  int64_t now = kT0;
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(tuner.Observe(Cliff("chat", 300), now));
  // Goal 300 x 0.9 = 270; one step is at most 10 % of the current target.
  auto m = tuner.Observe(Cliff("chat", 300), now);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->from_ms, 400);
  EXPECT_DOUBLE_EQ(m->goal_ms, 270);
  EXPECT_DOUBLE_EQ(m->to_ms, 360);
  EXPECT_EQ(board.Ttft("chat"), 360.0);
  // Within the interval: no second move, however stable.
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 300), now + kHourMs - 1));
  EXPECT_EQ(board.Ttft("chat"), 360.0);
  // Then one step per interval: 324, then 291.6, then the goal (a step would pass it).
  now += kHourMs;
  m = tuner.Observe(Cliff("chat", 300), now);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->to_ms, 324);
  now += kHourMs;
  m = tuner.Observe(Cliff("chat", 300), now);
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->to_ms, 291.6, 1e-9);
  now += kHourMs;
  m = tuner.Observe(Cliff("chat", 300), now);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->to_ms, 270);
  // At the goal: nothing left to move.
  now += kHourMs;
  EXPECT_FALSE(tuner.Observe(Cliff("chat", 300), now));
  const nlohmann::json j = tuner.Json();
  EXPECT_EQ(j["moves"].size(), 4u);
  EXPECT_EQ(j["targets"][0]["class"], "chat");  // bulk has no TTFT target: not listed
  EXPECT_EQ(j["targets"][0]["source"], "autotune");
  EXPECT_EQ(j["targets"].size(), 1u);
}

TEST(AutotuneTest, NeverLeavesItsBounds) {
  TargetBoard board;
  SloConfig c = TunedConfig();
  c.autotune.max_step = 1.0;  // steps as large as allowed, to reach the bounds at once
  c.autotune.min_interval_ms = 0;
  Autotuner tuner(c, &board);
  // A cliff at 50 ms: the goal 45 ms is under half the configured 400: held at 200.
  for (int i = 0; i < 3; ++i) tuner.Observe(Cliff("chat", 50, 5), kT0);
  EXPECT_EQ(board.Ttft("chat"), 200.0);
  // A cliff at 5 s: the goal is over twice the configured 400: held at 800.
  TargetBoard board2;
  Autotuner up(c, &board2);
  for (int i = 0; i < 3; ++i) up.Observe(Cliff("chat", 5000, 50), kT0);
  EXPECT_EQ(board2.Ttft("chat"), 800.0);
}

TEST(AutotuneTest, AClassWithoutATtftTargetIsLeftAlone) {
  TargetBoard board;
  SloConfig c = TunedConfig();
  c.autotune.min_interval_ms = 0;
  Autotuner tuner(c, &board);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(tuner.Observe(Cliff("bulk", 300), kT0));
  EXPECT_FALSE(tuner.Observe(Cliff("unknown-class", 300), kT0));
  EXPECT_FALSE(board.Ttft("bulk").has_value());
}

// The moved target is the one in force: Resolve's budget, the controller's pressure and
// /v1/slo (with where it came from).
TEST(AutotuneTest, TheMovedTargetIsTheOneInForce) {
  const SloConfig config = TunedConfig();
  TargetBoard board;
  board.SetTtft("chat", 250);
  RequestSloFields fields;
  fields.slo_class = "chat";
  auto configured = Resolve(config, fields);
  auto moved = Resolve(config, fields, &board);
  ASSERT_TRUE(configured.ok() && moved.ok());
  EXPECT_DOUBLE_EQ(configured->ttft_budget_ms, 400);
  EXPECT_DOUBLE_EQ(moved->ttft_budget_ms, 250);

  // TTFT P95 of 300 ms: inside the configured 400, over the moved 250.
  SloConfig ladder = config;
  ladder.controller.min_samples = 20;
  ladder.ladder.raise_interval_ms = 0;
  TrackerSnapshot snap;
  SeriesSnapshot row;
  row.slo_class = "chat";
  WindowStats& w = row.window[static_cast<size_t>(Metric::kTtft)];
  w.count = 100;
  w.p50_ms = w.p95_ms = w.p99_ms = w.mean_ms = 300;
  snap.by_class.push_back(row);
  Controller plain(ladder, {}, 0);
  Controller tuned(ladder, {}, 0);
  tuned.SetTargetBoard(&board);
  for (int k = 1; k <= 3; ++k) {
    plain.Tick(k * 200'000, snap);
    tuned.Tick(k * 200'000, snap);
  }
  EXPECT_EQ(plain.knobs()->LevelOf("chat"), Level::kNormal);
  EXPECT_GT(tuned.knobs()->LevelOf("chat"), Level::kNormal);

  const nlohmann::json status = SloStatusJson(tuned, snap, 600'000);
  bool seen = false;
  for (const auto& c : status["classes"]) {
    if (c["name"] != "chat") continue;
    seen = true;
    EXPECT_EQ(c["targets"]["ttft_p95_ms"], 250.0);
    EXPECT_EQ(c["configured_targets"]["ttft_p95_ms"], 400.0);
    EXPECT_EQ(c["target_sources"]["ttft_p95_ms"], "autotune");
  }
  EXPECT_TRUE(seen) << status.dump();
}

TEST(AutotuneTest, TheConfigSectionIsParsedAndCheckedNamingTheKey) {
  auto c = ParseSloConfig("[autotune]\nenabled = true\nmargin = 0.2\nstable_refits = 5\n", "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->autotune.enabled);
  EXPECT_DOUBLE_EQ(c->autotune.margin, 0.2);
  EXPECT_EQ(c->autotune.stable_refits, 5);
  auto bad = ParseSloConfig("[autotune]\nmax_factor = 0.5\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("autotune.max_factor"), std::string::npos) << bad.status().message();
  auto unknown = ParseSloConfig("[autotune]\nspeed = 1\n", "t.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("autotune.speed"), std::string::npos) << unknown.status().message();
}

}  // namespace
}  // namespace lifeline::slo
