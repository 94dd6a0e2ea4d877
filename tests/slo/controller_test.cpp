// Controller trajectories on a fake clock: synthetic P95 streams in, ladder levels, events and
// batch knobs out. Expected trajectories are worked out by hand from the policy in
// controller.h (ticks every 200 ms unless stated).
#include "slo/controller.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

constexpr int64_t kTickUs = 200'000;

SeriesSnapshot Row(std::string cls, std::string model, Metric m, double p95_ms, uint64_t count) {
  SeriesSnapshot s;
  s.slo_class = std::move(cls);
  s.model = std::move(model);
  WindowStats& w = s.window[static_cast<size_t>(m)];
  w.count = count;
  w.p50_ms = w.p95_ms = w.p99_ms = w.mean_ms = p95_ms;
  return s;
}

// A snapshot where class `cls` (all models) shows `p95_ms` TTFT over `count` samples.
TrackerSnapshot ClassTtft(const std::string& cls, double p95_ms, uint64_t count = 100) {
  TrackerSnapshot s;
  s.by_class.push_back(Row(cls, "", Metric::kTtft, p95_ms, count));
  return s;
}

SloConfig LadderConfig() {
  SloConfig c = DefaultSloConfig();
  c.controller.min_samples = 20;
  c.ladder.enter_ratio = 1.0;
  c.ladder.recover_ratio = 0.9;
  c.ladder.recover_ticks = 3;
  c.ladder.min_dwell_ms = 1000;
  c.ladder.raise_interval_ms = 0;  // one step per tick
  return c;
}

int LevelOf(const Controller& c, const std::string& cls) {
  return static_cast<int>(c.knobs()->LevelOf(cls));
}

TEST(ControllerTest, RaisesPerTickHoldsInBandRecoversWithTicksAndDwell) {
  Controller ctl(LadderConfig(), {}, 0);
  // chat's TTFT target is 350 ms: 500 is over, 340 inside the band [315, 350], 300 healthy.
  std::vector<int> levels;
  for (int k = 0; k < 36; ++k) {
    const double p95 = k < 5 ? 500 : k < 15 ? 340 : 300;
    ctl.Tick(k * kTickUs, ClassTtft("chat", p95));
    levels.push_back(LevelOf(ctl, "chat"));
  }
  // Raise each tick to shed (4) and stay there; hold in the band; then the first lowering
  // after 3 healthy ticks (dwell long over), each next one after 3 healthy ticks AND 1000 ms
  // (5 ticks) in the level: ticks 17, 22, 27, 32.
  const std::vector<int> expected = {1, 2, 3, 4, 4,                    // 0-4
                                     4, 4, 4, 4, 4, 4, 4, 4, 4, 4,     // 5-14 band
                                     4, 4, 3, 3, 3, 3, 3, 2, 2, 2,     // 15-24
                                     2, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0};  // 25-35
  EXPECT_EQ(levels, expected);

  const std::vector<LadderEvent> ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 8u);
  const int64_t at[] = {0, 200'000, 400'000, 600'000, 3'400'000, 4'400'000, 5'400'000, 6'400'000};
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].at_us, at[i]) << i;
    EXPECT_EQ(ev[i].slo_class, "chat");
    EXPECT_EQ(static_cast<int>(ev[i].to), static_cast<int>(ev[i].from) + (i < 4 ? 1 : -1)) << i;
    EXPECT_EQ(ev[i].metric, Metric::kTtft);
    EXPECT_EQ(ev[i].target_ms, 350);
    EXPECT_EQ(ev[i].p95_ms, i < 4 ? 500 : 300);
  }
  EXPECT_EQ(ev[0].from, Level::kNormal);
  EXPECT_EQ(ev[0].to, Level::kTruncate);
  EXPECT_EQ(ev[3].to, Level::kShed);
  EXPECT_EQ(ev[0].reason, "ttft p95 500.0 ms > 1.00 x target 350.0 ms");
  EXPECT_EQ(ev[4].reason, "ttft p95 300.0 ms < 0.90 x target 350.0 ms for 3 ticks");
  EXPECT_EQ(ev[5].reason, "ttft p95 300.0 ms < 0.90 x target 350.0 ms for 5 ticks");
  // Other classes never moved.
  EXPECT_EQ(LevelOf(ctl, "medical"), 0);
  // One transition of each kind up and down.
  const auto counts = ctl.TransitionCounts();
  ASSERT_EQ(counts.size(), 8u);
  for (const TransitionCount& t : counts) EXPECT_EQ(t.count, 1u);
}

TEST(ControllerTest, RaiseIntervalPacesEscalation) {
  SloConfig cfg = LadderConfig();
  cfg.ladder.raise_interval_ms = 1000;
  Controller ctl(cfg, {}, 0);
  std::vector<int> levels;
  for (int k = 0; k < 17; ++k) {
    ctl.Tick(k * kTickUs, ClassTtft("chat", 1000));
    levels.push_back(LevelOf(ctl, "chat"));
  }
  // The first raise is immediate; the next ones 1000 ms (5 ticks) apart: ticks 0, 5, 10, 15.
  const std::vector<int> expected = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4};
  EXPECT_EQ(levels, expected);
}

TEST(ControllerTest, ClassMaxLevelCapsTheLadder) {
  SloConfig cfg = LadderConfig();
  for (SloClass& c : cfg.classes) {
    if (c.name == "medical") c.max_level = 2;
  }
  Controller ctl(cfg, {}, 0);
  for (int k = 0; k < 10; ++k) ctl.Tick(k * kTickUs, ClassTtft("medical", 900));
  EXPECT_EQ(LevelOf(ctl, "medical"), 2);
  EXPECT_EQ(ctl.RecentEvents().size(), 2u);
}

TEST(ControllerTest, TooFewSamplesNeverRaiseAndAnIdleClassRecovers) {
  Controller ctl(LadderConfig(), {}, 0);
  for (int k = 0; k < 10; ++k) ctl.Tick(k * kTickUs, ClassTtft("chat", 10'000, 19));
  EXPECT_EQ(LevelOf(ctl, "chat"), 0);
  EXPECT_TRUE(ctl.RecentEvents().empty());

  ctl.Tick(10 * kTickUs, ClassTtft("chat", 10'000, 20));  // enough samples now
  ctl.Tick(11 * kTickUs, ClassTtft("chat", 10'000, 20));
  EXPECT_EQ(LevelOf(ctl, "chat"), 2);
  // Traffic stops (shedding would do that): the class drops out of the snapshot. An idle
  // class counts as healthy, so it steps down: tick 11 + 5 (dwell), then +5.
  std::vector<int> levels;
  for (int k = 12; k < 22; ++k) {
    ctl.Tick(k * kTickUs, TrackerSnapshot{});
    levels.push_back(LevelOf(ctl, "chat"));
  }
  EXPECT_EQ(levels, (std::vector<int>{2, 2, 2, 2, 1, 1, 1, 1, 1, 0}));
  const auto ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2].reason, "no samples in the window (idle) for 5 ticks");
  EXPECT_EQ(ev[2].target_ms, 0);
}

TEST(ControllerTest, ThinWindowHoldsTheLevelAndAWindowEmptiedOfAllMetricsRecovers) {
  Controller ctl(LadderConfig(), {}, 0);
  ctl.Tick(0, ClassTtft("chat", 10'000));
  ctl.Tick(kTickUs, ClassTtft("chat", 10'000));
  ASSERT_EQ(LevelOf(ctl, "chat"), 2);
  // Sustained overload with long end-to-end times: samples trickle in, 5 < min_samples 20
  // per window, for 30 ticks (6 s, dwell and recover_ticks long satisfied). That is no
  // evidence of health: the level holds.
  for (int k = 2; k < 32; ++k) {
    ctl.Tick(k * kTickUs, ClassTtft("chat", 100, 5));
    ASSERT_EQ(LevelOf(ctl, "chat"), 2) << "tick " << k;
  }
  EXPECT_EQ(ctl.RecentEvents().size(), 2u);
  // A thin tick neither counts as healthy nor resets the count: two healthy ticks, a thin
  // one, one more healthy tick make the three the recovery needs.
  ctl.Tick(32 * kTickUs, ClassTtft("chat", 100));
  ctl.Tick(33 * kTickUs, ClassTtft("chat", 100));
  ctl.Tick(34 * kTickUs, ClassTtft("chat", 100, 5));
  EXPECT_EQ(LevelOf(ctl, "chat"), 2);
  ctl.Tick(35 * kTickUs, ClassTtft("chat", 100));
  EXPECT_EQ(LevelOf(ctl, "chat"), 1);
  // The class is still in the snapshot but every window is empty (the tracker keeps series
  // whose samples have aged out): idle, so healthy ticks again; dwell 1 s = 5 ticks.
  TrackerSnapshot empty;
  empty.by_class.push_back(Row("chat", "", Metric::kTtft, 0, 0));
  std::vector<int> levels;
  for (int k = 36; k < 41; ++k) {
    ctl.Tick(k * kTickUs, empty);
    levels.push_back(LevelOf(ctl, "chat"));
  }
  EXPECT_EQ(levels, (std::vector<int>{1, 1, 1, 1, 0}));
}

TEST(ControllerTest, BandTickResetsTheRecoveryCount) {
  Controller ctl(LadderConfig(), {}, 0);
  ctl.Tick(0, ClassTtft("chat", 400));
  ASSERT_EQ(LevelOf(ctl, "chat"), 1);
  // Healthy, healthy, band, healthy, healthy, healthy: 3 consecutive only at the last one.
  const double p95[] = {300, 300, 330, 300, 300, 300};
  std::vector<int> levels;
  for (int k = 0; k < 6; ++k) {
    ctl.Tick((10 + k) * kTickUs, ClassTtft("chat", p95[k]));  // dwell (1 s) long satisfied
    levels.push_back(LevelOf(ctl, "chat"));
  }
  EXPECT_EQ(levels, (std::vector<int>{1, 1, 1, 1, 1, 0}));
}

TEST(ControllerTest, WorstTargetedMetricDrives) {
  SloConfig cfg = LadderConfig();
  SloClass search;
  search.name = "search";
  search.ttft_p95_ms = 300;
  search.e2e_p95_ms = 1000;
  search.tpot_p95_ms = 50;
  cfg.classes.push_back(search);
  Controller ctl(cfg, {}, 0);
  TrackerSnapshot s;
  SeriesSnapshot row = Row("search", "", Metric::kTtft, 200, 100);   // 0.67
  row.window[static_cast<size_t>(Metric::kE2e)] = {100, 0, 1500, 0, 0};  // 1.5
  row.window[static_cast<size_t>(Metric::kTpot)] = {100, 0, 60, 0, 0};   // 1.2
  row.window[static_cast<size_t>(Metric::kItl)] = {100, 0, 9999, 0, 0};  // no target: ignored
  s.by_class.push_back(row);
  const Pressure p = PressureOf(cfg.classes.back(), &s.by_class[0], 20);
  EXPECT_TRUE(p.has_signal);
  EXPECT_EQ(p.metric, Metric::kE2e);
  EXPECT_DOUBLE_EQ(p.ratio, 1.5);
  ctl.Tick(0, s);
  const auto ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].metric, Metric::kE2e);
  EXPECT_EQ(ev[0].p95_ms, 1500);
  EXPECT_EQ(ev[0].target_ms, 1000);
  EXPECT_FALSE(PressureOf(cfg.classes.back(), nullptr, 20).has_signal);
}

SloConfig BatchConfig() {
  SloConfig c = LadderConfig();
  for (SloClass& k : c.classes) k.max_level = 0;  // isolate the batch loop from the ladder
  c.controller.batch_adjust_interval_ms = 1000;
  return c;
}

TrackerSnapshot ModelTtft(const std::string& cls, const std::string& model, double p95_ms) {
  TrackerSnapshot s;
  s.by_class_model.push_back(Row(cls, model, Metric::kTtft, p95_ms, 100));
  s.by_class.push_back(Row(cls, "", Metric::kTtft, p95_ms, 100));
  return s;
}

TEST(ControllerTest, BatchHalvesToFloorDoublesToCapHoldsInBetween) {
  Controller ctl(BatchConfig(), {"m", "idle"}, 0);
  EXPECT_EQ(ctl.knobs()->ForModel("m")->max_running, 64);
  EXPECT_EQ(ctl.knobs()->ForModel("m")->max_step_tokens, 512);  // 64 x 8
  std::vector<int> batch;
  std::vector<int64_t> step_tokens;
  for (int k = 0; k < 52; ++k) {
    // chat target 350: 420 = 1.2 x (halve), 175 = 0.5 x (double), then 350 = 1.0 x (hold).
    const double p95 = k < 21 ? 420 : k < 47 ? 175 : 350;
    ctl.Tick(k * kTickUs, ModelTtft("chat", "m", p95));
    batch.push_back(ctl.knobs()->ForModel("m")->max_running);
    step_tokens.push_back(ctl.knobs()->ForModel("m")->max_step_tokens);
  }
  // One change per 1000 ms (5 ticks): halving at ticks 0, 5, 10, 15 to the floor 4; doubling
  // from tick 21 (first tick 1000 ms after the last change) every 5 ticks to the cap 128.
  std::vector<int> expected;
  for (int k = 0; k < 52; ++k) {
    int v;
    if (k < 21) {
      v = k < 5 ? 32 : k < 10 ? 16 : k < 15 ? 8 : 4;
    } else {
      v = k < 26 ? 8 : k < 31 ? 16 : k < 36 ? 32 : k < 41 ? 64 : 128;
    }
    expected.push_back(v);
  }
  EXPECT_EQ(batch, expected);
  EXPECT_EQ(step_tokens[15], 128);  // max(min_step_tokens 128, 4 x 8 = 32)
  EXPECT_EQ(step_tokens[5], 128);   // 16 x 8 = 128
  EXPECT_EQ(step_tokens[0], 256);   // 32 x 8
  EXPECT_EQ(step_tokens[51], 1024); // 128 x 8
  // The model without traffic kept its initial limit.
  EXPECT_EQ(ctl.knobs()->ForModel("idle")->max_running, 64);
}

TEST(ControllerTest, BatchHoldsInsideItsBandAndReportsChanges) {
  Controller ctl(BatchConfig(), {"m"}, 0);
  // 1.05 x and 0.95 x are inside [0.9, 1.1]: hold.
  auto r1 = ctl.Tick(0, ModelTtft("chat", "m", 350 * 1.05));
  auto r2 = ctl.Tick(2'000'000, ModelTtft("chat", "m", 350 * 0.95));
  EXPECT_TRUE(r1.batch_changes.empty());
  EXPECT_TRUE(r2.batch_changes.empty());
  EXPECT_EQ(ctl.knobs()->ForModel("m")->max_running, 64);
  auto r3 = ctl.Tick(4'000'000, ModelTtft("chat", "m", 700));
  ASSERT_EQ(r3.batch_changes.size(), 1u);
  EXPECT_EQ(r3.batch_changes[0].model, "m");
  EXPECT_EQ(r3.batch_changes[0].from, 64);
  EXPECT_EQ(r3.batch_changes[0].to, 32);
  EXPECT_DOUBLE_EQ(r3.batch_changes[0].ratio, 2.0);
  // The worst class on the model decides: one class healthy, another over -> halve.
  TrackerSnapshot mixed = ModelTtft("chat", "m", 100);
  mixed.by_class_model.push_back(Row("medical", "m", Metric::kTtft, 300, 100));  // 2 x 150
  auto r4 = ctl.Tick(6'000'000, mixed);
  ASSERT_EQ(r4.batch_changes.size(), 1u);
  EXPECT_EQ(r4.batch_changes[0].to, 16);
}

TEST(ControllerTest, KnobsPublishedOnlyOnChangeAndReadersSeeConsistentSnapshots) {
  Controller ctl(BatchConfig(), {"m"}, 0);
  const auto first = ctl.knobs();
  EXPECT_EQ(first->version, 1u);
  auto r = ctl.Tick(0, ModelTtft("chat", "m", 350));  // hold
  EXPECT_FALSE(r.published);
  EXPECT_EQ(ctl.knobs().get(), first.get());

  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    uint64_t last = 0;
    while (!stop.load()) {
      const auto k = ctl.board().Load();
      const ModelKnobs* m = k->ForModel("m");
      // Every snapshot is whole: step tokens always follow the batch it was published with.
      if (k->version < last || m == nullptr ||
          m->max_step_tokens != std::max<int64_t>(128, int64_t{m->max_running} * 8)) {
        bad.fetch_add(1);
      }
      last = k->version;
    }
  });
  std::mt19937 gen(3);
  for (int k = 1; k < 3000; ++k) {
    const double p95 = std::uniform_int_distribution<>(0, 1)(gen) ? 700 : 100;
    ctl.Tick(int64_t{k} * 1'000'000, ModelTtft("chat", "m", p95));
  }
  stop.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ctl.knobs()->version, 100u);
  // The first snapshot is untouched by later publications.
  EXPECT_EQ(first->version, 1u);
  EXPECT_EQ(first->ForModel("m")->max_running, 64);
}

TEST(ControllerTest, EventLogIsBounded) {
  SloConfig cfg = LadderConfig();
  cfg.ladder.event_log_size = 3;
  Controller ctl(cfg, {}, 0);
  for (int k = 0; k < 4; ++k) ctl.Tick(k * kTickUs, ClassTtft("chat", 900));
  const auto ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ctl.EventsTotal(), 4u);
  EXPECT_EQ(ev.front().to, Level::kTrimContext);  // the oldest (normal -> truncate) dropped
  EXPECT_EQ(ev.back().to, Level::kShed);
}

TEST(ControllerTest, LatencyStreamThroughTheTracker) {
  // A live stream: 30 TTFT samples per 200 ms tick into a 5 x 1 s window. 2 s of 500 ms
  // latencies, then 100 ms. Recovery cannot start until the slow samples left the window.
  SloConfig cfg = LadderConfig();
  cfg.ladder.raise_interval_ms = 400;
  cfg.window = WindowSpec{1'000'000, 5};
  LatencyTracker tracker(cfg.window);
  Controller ctl(cfg, {"m"}, 0);
  std::mt19937_64 gen(5);
  std::vector<int> levels;
  int64_t first_lowering_us = -1;
  int min_batch = 1 << 30;
  for (int k = 0; k < 80; ++k) {
    const int64_t now = k * kTickUs;
    const double base = now < 2'000'000 ? 500 : 100;
    std::uniform_real_distribution<> jitter(0.9, 1.1);
    for (int i = 0; i < 30; ++i) tracker.Record("chat", "m", Metric::kTtft, now, base * jitter(gen));
    const TickResult r = ctl.Tick(now, tracker.Snapshot(now));
    for (const LadderEvent& e : r.events) {
      if (e.to < e.from && first_lowering_us < 0) first_lowering_us = e.at_us;
    }
    levels.push_back(LevelOf(ctl, "chat"));
    min_batch = std::min(min_batch, ctl.knobs()->ForModel("m")->max_running);
  }
  // Raised at ticks 0, 2, 4, 6 (400 ms apart) -> shed by 1.2 s. The batch halved once a
  // second down to the floor while the window was slow, then doubled back to the cap.
  EXPECT_EQ(levels[0], 1);
  EXPECT_EQ(levels[6], 4);
  EXPECT_EQ(min_batch, 4);
  EXPECT_EQ(ctl.knobs()->ForModel("m")->max_running, 128);
  // The last slow sample (t = 1.8 s, epoch 1) leaves the window at epoch 6 (t = 6 s); the P95
  // stays above target until then, so no lowering before 6 s; and by 16 s all is normal.
  EXPECT_GE(first_lowering_us, 6'000'000);
  EXPECT_EQ(levels.back(), 0);
}

TEST(ControllerTest, LevelNames) {
  EXPECT_EQ(LevelName(Level::kNormal), "normal");
  EXPECT_EQ(LevelName(Level::kTruncate), "truncate");
  EXPECT_EQ(LevelName(Level::kTrimContext), "trim_context");
  EXPECT_EQ(LevelName(Level::kCascade), "cascade");
  EXPECT_EQ(LevelName(Level::kShed), "shed");
}

// A class-level snapshot whose whole window shows `p95_ms` over `count` samples and whose
// samples since the last transition show `fresh_p95_ms` over `fresh_count`.
TrackerSnapshot ClassTtftWithFresh(const std::string& cls, double p95_ms, uint64_t count,
                                   double fresh_p95_ms, uint64_t fresh_count) {
  TrackerSnapshot s = ClassTtft(cls, p95_ms, count);
  std::array<WindowStats, kMetricCount> fresh{};
  WindowStats& w = fresh[static_cast<size_t>(Metric::kTtft)];
  w.count = fresh_count;
  w.p50_ms = w.p95_ms = w.p99_ms = w.mean_ms = fresh_p95_ms;
  s.by_class.back().since_change = fresh;
  return s;
}

// The samples that caused one raise must not cause the next: after a transition a raise also
// needs the samples since it to be over target (judged with min_samples like the window).
TEST(ControllerTest, RaiseAfterATransitionNeedsFreshEvidence) {
  Controller ctl(LadderConfig(), {}, 0);
  ctl.Tick(0, ClassTtft("chat", 500));  // no transition yet: the window alone decides
  EXPECT_EQ(LevelOf(ctl, "chat"), 1);
  const std::pair<std::string, std::string> chat{"chat", ""};  // the class-wide ladder
  ASSERT_EQ(ctl.LastTransitions().count(chat), 1u);
  EXPECT_EQ(ctl.LastTransitions().at(chat), 0);
  // Still 500 over the window, but nothing (or too little) since the raise: hold.
  ctl.Tick(1 * kTickUs, ClassTtftWithFresh("chat", 500, 100, 0, 0));
  ctl.Tick(2 * kTickUs, ClassTtftWithFresh("chat", 500, 100, 900, 19));
  EXPECT_EQ(LevelOf(ctl, "chat"), 1);
  // Enough fresh samples, within target: the level is working; hold (a healthy tick judged
  // on the fresh samples, but recover_ticks and min_dwell_ms are not reached yet).
  ctl.Tick(3 * kTickUs, ClassTtftWithFresh("chat", 500, 100, 200, 30));
  EXPECT_EQ(LevelOf(ctl, "chat"), 1);
  // Fresh samples over target too: raise.
  ctl.Tick(4 * kTickUs, ClassTtftWithFresh("chat", 500, 100, 600, 30));
  EXPECT_EQ(LevelOf(ctl, "chat"), 2);
  EXPECT_EQ(ctl.LastTransitions().at(chat), 4 * kTickUs);
  const std::vector<LadderEvent> ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].at_us, 4 * kTickUs);
}

// The admission margin scale: per tick over target x max(1.05, sqrt(P95 / target)) capped at
// 1.25, /1.02 per tick under 0.8 x target, held in between and without signal, within
// [1, max_margin_scale]; published in the knobs.
TEST(ControllerTest, AdmissionMarginScaleFollowsTheClassP95) {
  SloConfig c = LadderConfig();
  c.admission.max_margin_scale = 1.2;
  Controller ctl(c, {}, 0);
  int64_t t = 0;
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.0);
  ctl.Tick(t++ * kTickUs, ClassTtft("chat", 360));  // chat target 350: just over -> x1.05
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.05);
  ctl.Tick(t++ * kTickUs, ClassTtft("chat", 350 * 1.1 * 1.1));  // sqrt(1.21) = 1.1
  EXPECT_NEAR(ctl.knobs()->MarginScaleOf("chat"), 1.05 * 1.1, 1e-12);
  for (int k = 0; k < 5; ++k) ctl.Tick(t++ * kTickUs, ClassTtft("chat", 500));
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.2);  // capped
  ctl.Tick(t++ * kTickUs, ClassTtft("chat", 300));             // in [0.8, 1] x target: hold
  ctl.Tick(t++ * kTickUs, ClassTtft("chat", 500, 5));          // too few samples: hold
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.2);
  ctl.Tick(t++ * kTickUs, ClassTtft("chat", 100));             // under 0.8 x target: lower
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.2 / 1.02);
  for (int k = 0; k < 20; ++k) ctl.Tick(t++ * kTickUs, ClassTtft("chat", 100));
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat"), 1.0);  // floor
  SloConfig big = LadderConfig();
  Controller fast(big, {}, 0);
  fast.Tick(0, ClassTtft("chat", 3500));  // 10x over: +25 %, not sqrt(10)
  EXPECT_DOUBLE_EQ(fast.knobs()->MarginScaleOf("chat"), 1.25);
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("medical"), 1.0);  // untouched class
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("no-such-class"), 1.0);
}

TEST(ControllerTest, WithoutTheFreshSamplesRuleTheWindowAloneRaises) {
  SloConfig c = LadderConfig();
  c.ladder.raise_needs_fresh_samples = false;
  Controller ctl(c, {}, 0);
  for (int k = 0; k < 3; ++k) ctl.Tick(k * kTickUs, ClassTtftWithFresh("chat", 500, 100, 0, 0));
  EXPECT_EQ(LevelOf(ctl, "chat"), 3);
}

// The first run's sticky level 1: one burst raised the class, then the server went idle. The
// window keeps the burst's P95 for its whole length, but nothing has happened since the
// transition: the level falls after recover_ticks and min_dwell_ms, not after the window.
TEST(ControllerTest, AnIdleClassLeavesItsLevelWithoutWaitingForTheWindow) {
  Controller ctl(LadderConfig(), {}, 0);  // recover_ticks 3, min_dwell_ms 1000
  ctl.Tick(0, ClassTtft("chat", 500));
  ASSERT_EQ(LevelOf(ctl, "chat"), 1);
  std::vector<int> levels;
  for (int k = 1; k <= 6; ++k) {
    ctl.Tick(k * kTickUs, ClassTtftWithFresh("chat", 500, 100, 0, 0));
    levels.push_back(LevelOf(ctl, "chat"));
  }
  // Healthy (idle) ticks from tick 1; the dwell of 1000 ms is reached at tick 5.
  EXPECT_EQ(levels, (std::vector<int>{1, 1, 1, 1, 0, 0}));
  const std::vector<LadderEvent> ev = ctl.RecentEvents();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].reason, "no samples since the last transition (idle) for 5 ticks");
}

TEST(ControllerTest, HealthySamplesSinceTheTransitionLowerTheLevel) {
  Controller ctl(LadderConfig(), {}, 0);
  ctl.Tick(0, ClassTtft("chat", 500));
  for (int k = 1; k <= 5; ++k) ctl.Tick(k * kTickUs, ClassTtftWithFresh("chat", 500, 100, 200, 30));
  EXPECT_EQ(LevelOf(ctl, "chat"), 0);
  EXPECT_EQ(ctl.RecentEvents().back().reason,
            "ttft p95 200.0 ms < 0.90 x target 350.0 ms since the last transition for 5 ticks");
  // Fresh samples inside the band, or too few, hold the level as before.
  Controller band(LadderConfig(), {}, 0);
  band.Tick(0, ClassTtft("chat", 500));
  for (int k = 1; k <= 10; ++k) {
    band.Tick(k * kTickUs, ClassTtftWithFresh("chat", 500, 100, k % 2 ? 340 : 200, k % 2 ? 30 : 5));
  }
  EXPECT_EQ(LevelOf(band, "chat"), 1);
}

// The same through a real tracker and the default 30 s window: 2 s of slow samples, then
// silence. The burst raises to 1 at 0 s and, being in a bucket that began at 0 s, to 2 at
// 1 s (raise_interval_ms); from then on nothing new arrives, so the level falls one step per
// min_dwell_ms: to 1 at 6 s, to 0 at 11 s -- while the slow samples stay in the window
// until ~32 s.
TEST(ControllerTest, AfterABurstAnIdleServerIsBackToNormalBeforeTheWindowDrains) {
  SloConfig cfg = DefaultSloConfig();  // 12 x 2.5 s window, 10 recover ticks, 5 s dwell
  LatencyTracker tracker(cfg.window);
  Controller ctl(cfg, {"m"}, 0);
  int level_at_12s = -1, max_level = 0;
  for (int k = 0; k < 100; ++k) {  // 20 s of ticks
    const int64_t now = k * kTickUs;
    if (now < 2'000'000) {
      for (int i = 0; i < 20; ++i) tracker.Record("chat", "m", Metric::kTtft, now, 900);
    }
    const auto since = ctl.LastTransitions();
    ctl.Tick(now, tracker.Snapshot(now, &since));
    max_level = std::max(max_level, LevelOf(ctl, "chat"));
    if (now == 12'000'000) level_at_12s = LevelOf(ctl, "chat");
  }
  EXPECT_EQ(max_level, 2);
  EXPECT_EQ(level_at_12s, 0) << "still degraded on an idle server";
  // The burst is still in the window (it drains at ~32 s).
  const TrackerSnapshot snap = tracker.Snapshot(20'000'000);
  EXPECT_GT(snap.FindClass("chat")->window[static_cast<size_t>(Metric::kTtft)].count, 0u);
}

// After a burst the samples since the transition are slow too (the burst's own requests
// finished at level 1). With nothing in flight and no new sample for a tick the class is
// idle: the level falls though the window and the fresh samples are still over target.
TEST(ControllerTest, NothingInFlightIsIdleWhateverTheWindowRemembers) {
  auto burst = [](int64_t last_record_us, std::optional<int64_t> live) {
    TrackerSnapshot s = ClassTtftWithFresh("chat", 900, 100, 900, 50);
    s.by_class.back().last_record_us = last_record_us;
    s.live_requests = live;
    return s;
  };
  SloConfig cfg = LadderConfig();  // tick 200 ms, recover_ticks 3, min_dwell 1000 ms
  cfg.ladder.raise_interval_ms = 60'000;  // one raise only: level 1 is the one under test
  Controller ctl(cfg, {}, 0);
  ctl.Tick(0, ClassTtft("chat", 900));
  ASSERT_EQ(LevelOf(ctl, "chat"), 1);
  // Requests still running, or the last sample within the last tick: not idle, hold.
  ctl.Tick(1 * kTickUs, burst(1 * kTickUs, 2));
  ctl.Tick(2 * kTickUs, burst(2 * kTickUs - 1000, 0));
  ctl.Tick(3 * kTickUs, burst(1 * kTickUs, std::nullopt));  // unknown: never idle
  EXPECT_EQ(LevelOf(ctl, "chat"), 1);
  // Idle from tick 4: three idle ticks and the dwell by tick 6.
  std::vector<int> levels;
  for (int k = 4; k <= 7; ++k) {
    ctl.Tick(k * kTickUs, burst(2 * kTickUs - 1000, 0));
    levels.push_back(LevelOf(ctl, "chat"));
  }
  EXPECT_EQ(levels, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(ctl.RecentEvents().back().reason, "no request in flight (idle) for 3 ticks");
  // Idle never raises either: the window's old samples are no reason to degrade.
  Controller fresh(LadderConfig(), {}, 0);  // raise_interval_ms 0
  fresh.Tick(0, ClassTtft("chat", 900));
  fresh.Tick(1 * kTickUs, burst(0, 0));
  EXPECT_EQ(LevelOf(fresh, "chat"), 1);
}

}  // namespace
}  // namespace lifeline::slo

namespace lifeline::slo {
namespace {

// ---- Isolation per (class, model) and the queue as a sensor --------------------------------

int ModelLevel(const Controller& c, const std::string& cls, const std::string& model) {
  return static_cast<int>(c.knobs()->LevelOf(cls, model));
}

// The first run's two-model server: the 1.1B's P95 drove the class-wide ladder and margin,
// and the 60 ms model was truncated and shed. Each (class, model) now has its own.
TEST(ControllerIsolationTest, OneModelsOverloadNeverMovesAnotherModelsLadder) {
  Controller ctl(LadderConfig(), {"heavy", "light"}, 0);
  TrackerSnapshot s;
  s.by_class_model.push_back(Row("chat", "heavy", Metric::kTtft, 900, 100));
  s.by_class_model.push_back(Row("chat", "light", Metric::kTtft, 60, 100));
  s.by_class.push_back(Row("chat", "", Metric::kTtft, 900, 200));  // merged: dominated by heavy
  for (int k = 0; k < 3; ++k) ctl.Tick(k * kTickUs, s);
  EXPECT_EQ(ModelLevel(ctl, "chat", "heavy"), 3);
  EXPECT_EQ(ModelLevel(ctl, "chat", "light"), 0);
  EXPECT_EQ(LevelOf(ctl, "chat"), 3);  // the class as a whole shows its worst ladder
  EXPECT_GT(ctl.knobs()->MarginScaleOf("chat", "heavy"), 1.0);
  EXPECT_DOUBLE_EQ(ctl.knobs()->MarginScaleOf("chat", "light"), 1.0);
  for (const LadderEvent& e : ctl.RecentEvents()) EXPECT_EQ(e.model, "heavy");
  // A model the controller does not know has no ladder: normal.
  EXPECT_EQ(ModelLevel(ctl, "chat", "elsewhere"), 0);
  // Statuses and transition counts carry the model.
  int heavy_rows = 0;
  for (const ClassStatus& st : ctl.ClassStatuses()) {
    if (st.slo_class == "chat" && st.model == "heavy") ++heavy_rows;
  }
  EXPECT_EQ(heavy_rows, 1);
  for (const TransitionCount& t : ctl.TransitionCounts()) EXPECT_EQ(t.model, "heavy");
}

// Thin windows: padded to min_samples with the fastest possible values, the P95 is the k-th
// largest, k = min_samples - ceil(0.95 min_samples) + 1. Requests in flight past the target
// at that rank make the P95 over target whatever else completes.
TEST(ControllerQueueSensorTest, ThinWindowSignalsWhenEnoughRequestsInFlightArePastTarget) {
  SloClass chat;
  chat.name = "chat";
  chat.ttft_p95_ms = 350;
  std::array<WindowStats, kMetricCount> empty{};
  InFlightStats f;
  f.requests = f.waiting = 1;
  f.waiting_ages_ms = f.ages_ms = {5000};
  EXPECT_FALSE(PressureOfStats(chat, empty, 20, &f).has_signal) << "one late request is no P95";
  f.requests = f.waiting = 3;
  f.waiting_ages_ms = f.ages_ms = {5000, 700, 100};
  Pressure p = PressureOfStats(chat, empty, 20, &f);
  ASSERT_TRUE(p.has_signal);
  EXPECT_EQ(p.metric, Metric::kTtft);
  EXPECT_DOUBLE_EQ(p.p95_ms, 700);  // the 2nd oldest (k = 20 - 19 + 1)
  EXPECT_DOUBLE_EQ(p.ratio, 2.0);
  f.waiting_ages_ms = {5000, 300, 100};  // the 2nd oldest is within target
  EXPECT_FALSE(PressureOfStats(chat, empty, 20, &f).has_signal);
  // min_samples 100: k = 100 - 95 + 1 = 6 requests must be past the target.
  f.waiting_ages_ms = {900, 900, 900, 900, 900, 100};
  EXPECT_FALSE(PressureOfStats(chat, empty, 100, &f).has_signal);
  f.waiting_ages_ms = {900, 900, 900, 900, 900, 800};
  EXPECT_DOUBLE_EQ(PressureOfStats(chat, empty, 100, &f).p95_ms, 800);
  // Without the in-flight stats a thin window says nothing, as before.
  EXPECT_FALSE(PressureOfStats(chat, empty, 20).has_signal);
}

// The first run's 36 s waits: the heavy model's queue stayed full, none of it produced a first
// token, the window emptied and the class "recovered" as idle. Through a real tracker and the
// default settings: requests waiting for their first token are lower bounds of TTFT, so the
// ladder climbs; once the queue empties the (class, model) is idle and back to normal within
// recover_ticks ticks (2 s), not one dwell per level.
TEST(ControllerQueueSensorTest, AQueueThatProducesNoFirstTokenIsOverloadedNotIdle) {
  SloConfig cfg = DefaultSloConfig();  // 30 s window, min_samples 20, 1 s raise interval
  LatencyTracker tracker(cfg.window);
  Controller ctl(cfg, {"heavy"}, 0);
  // 30 requests arrive in the first 3 s and none gets a token for 40 s.
  std::vector<InFlightRequest> waiting;
  for (int i = 0; i < 30; ++i) waiting.push_back({"chat", "heavy", i * 100'000, false});
  int max_level = 0, min_level_after_first_raise = 9;
  bool raised = false;
  for (int k = 0; k < 200; ++k) {
    const int64_t now = k * kTickUs;
    std::vector<InFlightRequest> in_flight;
    for (const InFlightRequest& r : waiting) {
      if (r.first_byte_us <= now) in_flight.push_back(r);
    }
    const auto since = ctl.LastTransitions();
    LatencyTracker::SnapshotOptions o;
    o.since_by_series = &since;
    o.has_in_flight = true;
    o.in_flight = in_flight;
    ctl.Tick(now, tracker.Snapshot(now, o));
    const int level = ModelLevel(ctl, "chat", "heavy");
    max_level = std::max(max_level, level);
    raised |= level > 0;
    if (raised) min_level_after_first_raise = std::min(min_level_after_first_raise, level);
  }
  EXPECT_EQ(max_level, 4);
  EXPECT_GE(min_level_after_first_raise, 1) << "a full queue looked idle";
  for (const LadderEvent& e : ctl.RecentEvents()) {
    EXPECT_GT(e.to, e.from) << e.reason;  // only raises while the queue is full
  }
  // The queue empties at 40 s: idle from the next tick on, normal after 10 idle ticks.
  int64_t normal_at = -1;
  for (int k = 200; k < 240; ++k) {
    const int64_t now = k * kTickUs;
    const auto since = ctl.LastTransitions();
    LatencyTracker::SnapshotOptions o;
    o.since_by_series = &since;
    o.has_in_flight = true;
    ctl.Tick(now, tracker.Snapshot(now, o));
    if (normal_at < 0 && ModelLevel(ctl, "chat", "heavy") == 0) normal_at = now;
  }
  EXPECT_EQ(normal_at, 40'000'000 + 9 * kTickUs);
  EXPECT_EQ(ctl.RecentEvents().back().reason, "no request in flight (idle) for 10 ticks");
  EXPECT_EQ(ctl.RecentEvents().back().from, Level::kShed);
}

// A healthy window does not hide a queue aging past its budget: 100 first tokens at 100 ms
// and 10 requests waiting for 2 s make the censored P95 (10 of 110 > 5 %) about 2 s.
TEST(ControllerQueueSensorTest, WaitingRequestsCountInTheP95) {
  SloConfig cfg = LadderConfig();
  LatencyTracker tracker(cfg.window);
  for (int i = 0; i < 100; ++i) tracker.Record("chat", "m", Metric::kTtft, 5'000'000, 100);
  std::vector<InFlightRequest> in_flight;
  for (int i = 0; i < 10; ++i) in_flight.push_back({"chat", "m", 3'000'000, false});
  LatencyTracker::SnapshotOptions o;
  o.has_in_flight = true;
  o.in_flight = in_flight;
  const TrackerSnapshot snap = tracker.Snapshot(5'000'000, o);
  const SeriesSnapshot* row = snap.Find("chat", "m");
  ASSERT_NE(row, nullptr);
  EXPECT_NEAR((*row)[Metric::kTtft].p95_ms, 100, 1);  // the window alone looks healthy
  ASSERT_TRUE(row->censored.has_value());
  EXPECT_NEAR((*row->censored)[static_cast<size_t>(Metric::kTtft)].p95_ms, 2000, 2000 * 0.01);
  Controller ctl(cfg, {"m"}, 0);
  ctl.Tick(5'000'000, snap);
  EXPECT_EQ(ModelLevel(ctl, "chat", "m"), 1);
  // The same window without the in-flight requests: healthy, no raise.
  Controller blind(cfg, {"m"}, 0);
  blind.Tick(5'000'000, tracker.Snapshot(5'000'000));
  EXPECT_EQ(ModelLevel(blind, "chat", "m"), 0);
}

// Idle is per (class, model): the light model's requests finished, so its ladder goes back to
// normal while the heavy model, with requests still in flight, holds.
TEST(ControllerQueueSensorTest, IdleIsJudgedPerModel) {
  SloConfig cfg = LadderConfig();  // recover_ticks 3, min_dwell 1000 ms
  cfg.ladder.raise_interval_ms = 60'000;
  Controller ctl(cfg, {"heavy", "light"}, 0);
  TrackerSnapshot slow;
  slow.has_in_flight = true;
  slow.by_class_model.push_back(Row("chat", "heavy", Metric::kTtft, 900, 100));
  slow.by_class_model.push_back(Row("chat", "light", Metric::kTtft, 900, 100));
  for (SeriesSnapshot& row : slow.by_class_model) row.in_flight.requests = 2;
  ctl.Tick(0, slow);
  ASSERT_EQ(ModelLevel(ctl, "chat", "heavy"), 1);
  ASSERT_EQ(ModelLevel(ctl, "chat", "light"), 1);
  TrackerSnapshot later = slow;  // same windows, samples older than a tick
  later.by_class_model[1].in_flight.requests = 0;  // light's requests finished
  std::vector<int> light;
  for (int k = 1; k <= 4; ++k) {
    ctl.Tick(k * kTickUs, later);
    light.push_back(ModelLevel(ctl, "chat", "light"));
  }
  EXPECT_EQ(light, (std::vector<int>{1, 1, 0, 0}));  // 3 idle ticks, no dwell needed
  EXPECT_EQ(ModelLevel(ctl, "chat", "heavy"), 1);
}


// ---- The thinking rung (docs/reasoning.md) --------------------------------------------

// A class whose requests think: TTFA at `ttfa_p95_ms` over 100 samples, `thinking` of them
// with a thinking time (0: nobody thought).
TrackerSnapshot ThinkingClass(const std::string& cls, double ttfa_p95_ms, uint64_t thinking) {
  TrackerSnapshot s;
  SeriesSnapshot row = Row(cls, "", Metric::kTtfa, ttfa_p95_ms, 100);
  WindowStats& think = row.window[static_cast<size_t>(Metric::kThink)];
  think.count = thinking;
  // One tick of thinking: a cut counts as made one tick after it (Controller::StepThinking).
  think.p95_ms = think.p50_ms = think.p99_ms = think.mean_ms = thinking > 0 ? 200 : 0;
  s.by_class.push_back(std::move(row));
  return s;
}

SloConfig ThinkingConfig() {
  SloConfig c = LadderConfig();  // raise_interval 0, recover_ticks 3, dwell 1000 ms
  for (SloClass& cls : c.classes) {
    if (cls.name == "chat") cls.ttfa_p95_ms = 1000;
  }
  return c;
}

double ThinkingScaleOf(const Controller& c, const std::string& cls) {
  return c.knobs()->ThinkingScaleOf(cls, "");
}

// Over its TTFA target, a thinking class halves its thinking budgets down to the floor
// (1/8 by default) before its level rises: no answer is cut while thinking can still be
// shortened. A class whose requests do not think skips the rung.
TEST(ControllerThinkingTest, ThinkingShortensBeforeAnyAnswerIsCut) {
  Controller ctl(ThinkingConfig(), {}, 0);
  std::vector<double> scales;
  std::vector<int> levels;
  for (int k = 0; k < 5; ++k) {
    ctl.Tick(k * kTickUs, ThinkingClass("chat", 3000, 40));
    scales.push_back(ThinkingScaleOf(ctl, "chat"));
    levels.push_back(LevelOf(ctl, "chat"));
  }
  EXPECT_EQ(scales, (std::vector<double>{0.5, 0.25, 0.125, 0.125, 0.125}));
  EXPECT_EQ(levels, (std::vector<int>{0, 0, 0, 1, 2}));
  EXPECT_EQ(ctl.ThinkingCuts(), 3u);
  const std::vector<ThinkingChange> changes = ctl.RecentThinkingChanges();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].from, 1.0);
  EXPECT_EQ(changes[0].to, 0.5);
  EXPECT_EQ(changes[0].reason, "ttfa p95 3000.0 ms > 1.00 x target 1000.0 ms");
  EXPECT_EQ(ctl.RecentEvents().front().from, Level::kNormal) << "then the ladder";

  Controller plain(ThinkingConfig(), {}, 0);
  plain.Tick(0, ThinkingClass("chat", 3000, 0));
  EXPECT_EQ(LevelOf(plain, "chat"), 1);
  EXPECT_EQ(ThinkingScaleOf(plain, "chat"), 1.0);

  SloConfig off = ThinkingConfig();
  off.ladder.min_thinking_scale = 1.0;  // the rung turned off
  Controller no_rung(off, {}, 0);
  no_rung.Tick(0, ThinkingClass("chat", 3000, 40));
  EXPECT_EQ(LevelOf(no_rung, "chat"), 1);
}

// Recovery undoes the cuts in reverse: the level comes down first, then the thinking grows
// back one doubling per recover_ticks healthy ticks and dwell.
TEST(ControllerThinkingTest, HealthyTicksRestoreTheLevelThenTheThinking) {
  Controller ctl(ThinkingConfig(), {}, 0);
  for (int k = 0; k < 4; ++k) ctl.Tick(k * kTickUs, ThinkingClass("chat", 3000, 40));
  ASSERT_EQ(LevelOf(ctl, "chat"), 1);
  ASSERT_EQ(ThinkingScaleOf(ctl, "chat"), 0.125);
  std::vector<std::pair<int, double>> path;
  for (int k = 4; k < 40; ++k) {
    ctl.Tick(k * kTickUs, ThinkingClass("chat", 500, 40));
    const std::pair<int, double> now{LevelOf(ctl, "chat"), ThinkingScaleOf(ctl, "chat")};
    if (path.empty() || path.back() != now) path.push_back(now);
  }
  const std::vector<std::pair<int, double>> expected = {
      {1, 0.125}, {0, 0.125}, {0, 0.25}, {0, 0.5}, {0, 1.0}};
  EXPECT_EQ(path, expected);
  EXPECT_EQ(ctl.ThinkingRestores(), 3u);
}

// TTFA is counted when the answer comes, after the TTFT of the same requests: a window with
// plenty of fast TTFTs and only a few TTFAs is no evidence that the answers come in time. The
// thinking stays short until TTFA itself has min_samples under target (an overload run gave
// the whole budget back on TTFT alone while TTFA was at twice its target).
TEST(ControllerThinkingTest, AThinTtfaWindowDoesNotRestoreTheThinking) {
  SloConfig config = ThinkingConfig();
  for (SloClass& cls : config.classes) {
    if (cls.name == "chat") cls.ttft_p95_ms = 1000;
  }
  Controller ctl(config, {}, 0);
  ctl.Tick(0, ThinkingClass("chat", 3000, 40));
  ASSERT_EQ(ThinkingScaleOf(ctl, "chat"), 0.5);
  for (int k = 1; k < 30; ++k) {
    TrackerSnapshot s = ThinkingClass("chat", 500, 40);
    SeriesSnapshot& row = s.by_class.back();
    WindowStats& ttft = row.window[static_cast<size_t>(Metric::kTtft)];
    ttft.count = 100;
    ttft.p95_ms = ttft.p50_ms = ttft.p99_ms = ttft.mean_ms = 100;
    row.window[static_cast<size_t>(Metric::kTtfa)].count = 5;  // < min_samples
    ctl.Tick(k * kTickUs, s);
    ASSERT_EQ(ThinkingScaleOf(ctl, "chat"), 0.5) << "tick " << k;
  }
  // Enough TTFA samples under target: the thinking grows back.
  for (int k = 30; k < 40; ++k) {
    TrackerSnapshot s = ThinkingClass("chat", 500, 40);
    WindowStats& ttft = s.by_class.back().window[static_cast<size_t>(Metric::kTtft)];
    ttft.count = 100;
    ttft.p95_ms = 100;
    ctl.Tick(k * kTickUs, s);
  }
  EXPECT_EQ(ThinkingScaleOf(ctl, "chat"), 1.0);
}

// Nothing in flight and no sample: the thinking budget is whole again after recover_ticks
// idle ticks, like a level.
TEST(ControllerThinkingTest, AnIdleClassGetsItsWholeThinkingBack) {
  Controller ctl(ThinkingConfig(), {}, 0);
  ctl.Tick(0, ThinkingClass("chat", 3000, 40));
  ctl.Tick(kTickUs, ThinkingClass("chat", 3000, 40));
  ASSERT_EQ(ThinkingScaleOf(ctl, "chat"), 0.25);
  std::vector<double> scales;
  for (int k = 2; k < 7; ++k) {
    TrackerSnapshot idle = ThinkingClass("chat", 3000, 40);
    idle.live_requests = 0;
    idle.by_class.back().last_record_us = 0;
    idle.by_class.back().since_change.emplace();  // nothing since the last change
    ctl.Tick(k * kTickUs, idle);
    scales.push_back(ThinkingScaleOf(ctl, "chat"));
  }
  EXPECT_EQ(scales, (std::vector<double>{0.25, 0.25, 1.0, 1.0, 1.0}));
}

}  // namespace
}  // namespace lifeline::slo

namespace lifeline::slo {
namespace {

// A class whose TTFT budget is below what its requests need alone on a model (the tracker's
// floor): the ladder reads its P95 against twice that floor -- the target admission holds
// those requests to -- and does not escalate on a miss no refusal could cure. Without the
// floor the same stream raises the ladder; a floor below the budget changes nothing.
TEST(ControllerTest, AClassBelowTheModelsFloorIsJudgedAgainstTheFloor) {
  SloConfig cfg = LadderConfig();
  cfg.window = WindowSpec{1'000'000, 5};
  for (double floor_ms : {0.0, 230.0, 20.0}) {
    LatencyTracker tracker(cfg.window);
    Controller ctl(cfg, {"emb"}, 0);
    int max_level = 0;
    for (int k = 0; k < 20; ++k) {
      const int64_t now = k * kTickUs;
      for (int i = 0; i < 30; ++i) tracker.Record("search-embed", "emb", Metric::kTtft, now, 300);
      if (floor_ms > 0) tracker.RecordFloor("search-embed", "emb", now, floor_ms);
      ctl.Tick(now, tracker.Snapshot(now));
      max_level = std::max(max_level, static_cast<int>(ctl.knobs()->LevelOf("search-embed", "emb")));
    }
    // 300 ms against 50 ms: escalates without a floor or with one below the budget; against
    // 2 x 230 = 460 ms it is within its target.
    if (floor_ms == 230.0) {
      EXPECT_EQ(max_level, 0) << "floor " << floor_ms;
    } else {
      EXPECT_GE(max_level, 1) << "floor " << floor_ms;
    }
    const SeriesSnapshot* row = tracker.Snapshot(20 * kTickUs).Find("search-embed", "emb");
    ASSERT_NE(row, nullptr);
    EXPECT_NEAR(row->floor_ms, floor_ms, 1e-9);
  }
}

TEST(LatencyTrackerFloorTest, TheFloorAveragesAndLeavesWithTheWindow) {
  const WindowSpec spec{1'000'000, 5};
  LatencyTracker tracker(spec);
  tracker.RecordFloor("c", "m", 0, 200);
  tracker.RecordFloor("c", "m", 100'000, 300);  // moving average, alpha 0.2: 220
  tracker.RecordFloor("c", "n", 100'000, 100);
  TrackerSnapshot s = tracker.Snapshot(200'000);
  EXPECT_NEAR(s.Find("c", "m")->floor_ms, 220, 1e-9);
  EXPECT_NEAR(s.FindClass("c")->floor_ms, 220, 1e-9);  // the class row: its highest
  tracker.RecordFloor("c", "m", 200'000, -5);           // ignored
  EXPECT_NEAR(tracker.Snapshot(200'000).Find("c", "m")->floor_ms, 220, 1e-9);
  // Older than the window (5 s): no floor.
  EXPECT_EQ(tracker.Snapshot(5'200'001).Find("c", "m")->floor_ms, 0);
}

}  // namespace
}  // namespace lifeline::slo
