// The SLO controller: once per tick (owner's timer, ~200 ms) it compares the windowed P95 of
// each (class, model) with the class's targets and
//   - moves the class's degradation level (0 normal, 1 truncate, 2 trim context, 3 cascade,
//     4 shed) one step at a time, with hysteresis: raise when P95 > enter_ratio x target (at
//     most once per raise_interval_ms); lower only after recover_ticks consecutive ticks with
//     P95 < recover_ratio x target and min_dwell_ms in the level. A window with samples but
//     fewer than min_samples holds (neither a healthy nor an unhealthy tick: under overload
//     a thin window says nothing about health); only an idle class, no sample of any metric
//     in its window, counts as healthy, so the ladder still returns to 0 after load stops.
//     Once a class has had a transition, a window still over target counts as healthy when
//     the samples since that transition are (>= min_samples below recover_ratio) or when
//     there are none (idle since), and a tick counts as healthy when no request is in flight
//     on any model (TrackerSnapshot::live_requests = 0, filled in by the service) and the
//     class recorded no sample since the previous tick (idle):
//     the window otherwise remembers the burst that raised the level for its whole length,
//     and an idle server kept truncating answers for 30 s;
//   - halves / doubles each local model's batch limit (max running sequences, with the step
//     token budget following) when the worst class P95 on that model is above
//     batch_high_ratio / below batch_low_ratio x target, within [floor, cap];
//   - logs every level transition (bounded ring) and publishes the knobs.
//
// Isolation: ladder level, healthy-tick count and admission margin are kept per (class,
// model), judged on that pair's own samples and requests in flight, so one model's overload
// never truncates, routes or sheds another model's requests. The models are the config's
// cascade members plus the local models; a controller with none keeps one state per class
// (model "") judged over all models merged.
//
// The queue as a sensor: with a snapshot that carries the requests in flight
// (TrackerSnapshot::has_in_flight), a row's pressure is its window with the in-flight ages
// added as lower bounds (SeriesSnapshot::censored), and a thin window (fewer than
// min_samples) still signals overload when requests in flight are already past the target at
// the rank a P95 of min_samples would read (see PressureOfRow). Idle means nothing in flight
// on that (class, model) -- nor on the cascade members it routes to -- and no sample since
// the previous tick; after recover_ticks idle ticks the level drops to normal at once (no
// dwell): nobody is being degraded for anyone.
//
// Publication: Knobs are immutable and published as a shared_ptr (KnobBoard) that the engine
// loads at step start and HTTP threads at admission; a load copies a pointer under a lock
// held only for such copies, so neither ever waits for a tick. A new Knobs (higher version)
// is published only when something changed.
//
// Ownership: the controller owns a copy of the config, the per-class and per-model state, the
// event log. Thread-safety: Tick and the report accessors lock one mutex (never taken by the
// engine); board()/knobs() are safe from any thread. Failure: none (inputs are validated
// config and snapshots); a class absent from the snapshot has no signal.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/board.h"
#include "slo/latency_tracker.h"
#include "slo/slo_config.h"
#include "slo/target_board.h"

namespace lifeline::slo {

enum class Level : uint8_t { kNormal = 0, kTruncate = 1, kTrimContext = 2, kCascade = 3, kShed = 4 };
inline constexpr int32_t kTopLevel = 4;
// "normal", "truncate", "trim_context", "cascade", "shed"
std::string_view LevelName(Level level);

// The worst P95 / target ratio of a series over the metrics the class has targets for.
struct Pressure {
  bool has_signal = false;  // some targeted metric has >= min_samples in its window
  double ratio = 0;         // max p95 / target over metrics with signal
  Metric metric = Metric::kTtft;
  double p95_ms = 0;
  double target_ms = 0;
  uint64_t samples = 0;
  // The most samples any metric (targeted or not) has in the window; 0: the class is idle.
  uint64_t window_samples = 0;
  // Its requests think (thinking models): a thinking time in the window, or one thinking
  // now. The thinking rung acts only then.
  bool thinks = false;
  // Some targeted metric has samples, but fewer than min_samples and no verdict from the
  // requests in flight: the pressure (read on the other metrics) cannot call it healthy. A
  // TTFA counted at the answer lags the TTFT of the same requests; recovering on TTFT alone
  // gave a thinking class its whole budget back while its TTFA was still over target.
  bool thin = false;
  // How long the requests admitted so far may still take to answer: the window's P95
  // thinking time, or the oldest request in flight without an answer if older (0: none).
  double think_drain_ms = 0;
};
// The class as its pressure is read on a series whose requests miss its TTFT budget even
// alone (SeriesSnapshot::floor_ms above the target): the target admission holds them to,
// twice that floor (admission.cpp, below_floor). Otherwise the class itself.
SloClass AtFloor(const SloClass& cls, const SeriesSnapshot* row);
Pressure PressureOf(const SloClass& cls, const SeriesSnapshot* series, int64_t min_samples);
// `in_flight`, when given, adds the thin-window rule: with fewer than min_samples samples, a
// P95 over target is certain when the k-th oldest request in flight (k = min_samples -
// ceil(0.95 x min_samples) + 1: the rank a P95 reads in min_samples values, the rest taken as
// fast as possible) is already older than the target -- 2 requests for min_samples 20.
Pressure PressureOfStats(const SloClass& cls, const std::array<WindowStats, kMetricCount>& window,
                         int64_t min_samples, const InFlightStats* in_flight = nullptr);
// A row's pressure: its censored stats (window + in-flight lower bounds) when the snapshot
// carried the requests in flight, with the thin-window rule; else its window.
Pressure PressureOfRow(const SloClass& cls, const SeriesSnapshot* row, int64_t min_samples);

struct LadderEvent {
  int64_t at_us = 0;
  std::string slo_class;
  std::string model;  // the (class, model) ladder that moved; "" for a class-wide one
  Level from = Level::kNormal;
  Level to = Level::kNormal;
  std::string reason;
  // The signal behind the transition; p95_ms = 0 and target_ms = 0 when there was none.
  Metric metric = Metric::kTtft;
  double p95_ms = 0;
  double target_ms = 0;
};

// Bounded ring of the most recent events; the oldest are dropped.
class EventLog {
 public:
  explicit EventLog(size_t capacity) : capacity_(capacity) {}
  void Push(LadderEvent e);
  std::vector<LadderEvent> Recent() const { return {events_.begin(), events_.end()}; }  // oldest first
  uint64_t total() const { return total_; }  // ever pushed
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::deque<LadderEvent> events_;
  uint64_t total_ = 0;
};

struct ModelKnobs {
  std::string model;
  int32_t max_running = 0;      // scheduler SchedulerKnobs::max_running
  int64_t max_step_tokens = 0;  // scheduler SchedulerKnobs::max_step_tokens
};

// One (class, model) ladder's published state.
struct ClassLevel {
  std::string slo_class;
  std::string model;          // "" for a class-wide ladder (a controller without models)
  Level level = Level::kNormal;
  double margin_scale = 1.0;  // admission's prediction_margin multiplier (AdmissionParams)
  double thinking_scale = 1.0;  // the thinking rung: budgets x this (ThinkingPolicy::scale)
};

struct Knobs {
  uint64_t version = 0;  // 1 for the first publication, +1 per change
  int64_t at_us = 0;
  std::vector<ModelKnobs> models;   // controlled local models, construction order
  std::vector<ClassLevel> classes;  // sorted by (class, model)
  std::vector<int32_t> preferred_batch_sizes;
  int64_t max_queue_delay_us = 0;

  const ModelKnobs* ForModel(std::string_view model) const;
  // The level of `slo_class` on `model`: its (class, model) ladder, else the class-wide one
  // (model ""), else kNormal.
  Level LevelOf(std::string_view slo_class, std::string_view model) const;
  double MarginScaleOf(std::string_view slo_class, std::string_view model) const;  // else 1
  double ThinkingScaleOf(std::string_view slo_class, std::string_view model) const;  // else 1
  // The highest level / scale of the class over its models (reports, the dashboard).
  Level LevelOf(std::string_view slo_class) const;
  double MarginScaleOf(std::string_view slo_class) const;

 private:
  const ClassLevel* Find(std::string_view slo_class, std::string_view model) const;
};

// Holds the current Knobs (base/board.h): the engines and HTTP threads load a consistent
// snapshot without ever waiting for a tick.
using KnobBoard = Board<Knobs>;

struct BatchChange {
  int64_t at_us = 0;
  std::string model;
  int32_t from = 0;
  int32_t to = 0;
  double ratio = 0;  // the worst P95 / target that drove it
};

// The thinking rung moved: a (class, model)'s thinking budgets now scale by `to`.
struct ThinkingChange {
  int64_t at_us = 0;
  std::string slo_class;
  std::string model;
  double from = 1.0;
  double to = 1.0;
  std::string reason;
};

struct TickResult {
  std::vector<LadderEvent> events;
  std::vector<BatchChange> batch_changes;
  std::vector<ThinkingChange> thinking_changes;
  bool published = false;  // a new Knobs version went out
};

struct ClassStatus {
  std::string slo_class;
  std::string model;           // "" for a class-wide ladder
  Level level = Level::kNormal;
  int64_t level_since_us = 0;  // time of the last transition (construction time if none)
  int32_t healthy_ticks = 0;   // consecutive ticks below recover_ratio x target
  Pressure last;               // the pressure seen at the last tick
  double margin_scale = 1.0;   // admission's closed-loop margin multiplier
  int32_t idle_ticks = 0;      // consecutive ticks with nothing in flight and no new sample
  double thinking_scale = 1.0;  // the thinking rung (1: thinking not shortened)
};

struct TransitionCount {
  std::string slo_class;
  std::string model;
  Level from = Level::kNormal;
  Level to = Level::kNormal;
  uint64_t count = 0;
};

class Controller {
 public:
  // `local_models`: the engine loops whose batch limits this controller sets (remote cascade
  // members have none). Every class has a ladder on each of config.models and local_models
  // (one class-wide ladder, model "", when there are none). Publishes the initial knobs
  // (batch = batching.initial, all normal).
  Controller(SloConfig config, std::vector<std::string> local_models, int64_t now_us);

  // A raise needs the P95 over the whole window AND, once the class has had a transition,
  // over the samples since it (SeriesSnapshot::since_change, when the snapshot carries it) to
  // exceed the target: otherwise the samples that caused one raise would cause the next ones
  // too, and the ladder would climb to shedding before the previous level had any effect.
  TickResult Tick(int64_t now_us, const TrackerSnapshot& snapshot);
  // (class, model) -> time of its last transition, for LatencyTracker::Snapshot(now, &since)
  // (model "": the class-wide ladder, judged on the by_class row).
  LatencyTracker::SinceBySeries LastTransitions() const;
  // The ladders' models, in order ("" alone for a controller without models).
  const std::vector<std::string>& ladder_models() const { return ladder_models_; }

  const KnobBoard& board() const { return board_; }
  std::shared_ptr<const Knobs> knobs() const { return board_.Load(); }
  const SloConfig& config() const { return config_; }
  // The targets in force (slo/target_board.h: autotune's moves); null = the configured ones.
  // Set before the first Tick; the board must outlive the controller.
  void SetTargetBoard(const TargetBoard* targets) { targets_ = targets; }
  const TargetBoard* target_board() const { return targets_; }
  // `c` with the targets in force.
  SloClass Effective(const SloClass& c) const { return targets_ != nullptr ? targets_->Apply(c) : c; }

  std::vector<LadderEvent> RecentEvents() const;
  uint64_t EventsTotal() const;
  std::vector<ClassStatus> ClassStatuses() const;  // sorted by (class, model)
  std::vector<TransitionCount> TransitionCounts() const;
  // Thinking-rung moves so far: shortened (down) and restored (up), over every ladder.
  uint64_t ThinkingCuts() const;
  uint64_t ThinkingRestores() const;
  std::vector<ThinkingChange> RecentThinkingChanges() const;  // oldest first, bounded

 private:
  struct ClassState {
    Level level = Level::kNormal;
    // The last transition or thinking-rung move (a thinking move counts from when the
    // requests admitted before it have drained); none yet: no wait to raise.
    std::optional<int64_t> changed_us;
    std::optional<int64_t> level_changed_us;  // the last level transition (status)
    int32_t healthy_ticks = 0;
    Pressure last;
    double margin_scale = 1.0;
    int32_t idle_ticks = 0;
    double thinking_scale = 1.0;
  };
  // The thinking rung: halves (down) or doubles (up) the thinking scale; true if it moved.
  bool StepThinking(const SloClass& cls, const std::string& model, int64_t now_us,
                    double drain_ms, double to, std::string reason, ClassState* st,
                    TickResult* out);
  using Key = std::pair<std::string, std::string>;  // (class, model)
  // The closed-loop admission margin (AdmissionParams::max_margin_scale); true if it changed.
  bool StepMargin(const Pressure& p, ClassState* st) const;
  struct ModelState {
    std::string model;
    int32_t max_running = 0;
    std::optional<int64_t> adjusted_us;
  };

  // fresh: the pressure over samples newer than the ladder's last transition (nullptr when the
  // snapshot does not carry it, e.g. no transition yet).
  // idle: nothing in flight on the (class, model) and no sample since the previous tick.
  bool StepClass(const SloClass& cls, const std::string& model, int64_t now_us,
                 const Pressure& p, const Pressure* fresh, bool idle, ClassState* st,
                 TickResult* out);
  // A healthy tick judged on `p` (the window, or the samples since the last transition), or
  // an idle one (`idle_reason`): counts it and lowers one level after recover_ticks of them
  // and min_dwell_ms.
  bool Recover(const SloClass& cls, const std::string& model, int64_t now_us, const Pressure& p,
               bool since_transition, ClassState* st, TickResult* out);
  // An idle tick: after recover_ticks of them the level drops to normal at once.
  bool RecoverIdle(const SloClass& cls, const std::string& model, int64_t now_us,
                   ClassState* st, TickResult* out);
  // Requests of `slo_class` in flight on `model` and on the cascade members after it.
  int64_t InFlightDownstream(const TrackerSnapshot& snapshot, const std::string& slo_class,
                             const std::string& model) const;
  bool StepModel(int64_t now_us, const TrackerSnapshot& snapshot, ModelState* st,
                 TickResult* out);
  void Transition(const SloClass& cls, const std::string& model, int64_t now_us, Level to,
                  std::string reason, const Pressure& p, ClassState* st, TickResult* out);
  void Publish(int64_t now_us);
  int64_t StepTokensFor(int32_t max_running) const;

  const SloConfig config_;
  const TargetBoard* targets_ = nullptr;
  KnobBoard board_;
  uint64_t version_ = 0;

  mutable std::mutex mu_;
  int64_t started_us_;
  std::vector<std::string> ladder_models_;
  std::map<Key, ClassState> classes_;
  std::vector<ModelState> models_;
  EventLog events_;
  std::map<std::tuple<std::string, std::string, Level, Level>, uint64_t> transitions_;
  uint64_t thinking_cuts_ = 0;
  uint64_t thinking_restores_ = 0;
  std::deque<ThinkingChange> thinking_changes_;  // the latest event_log_size
};

}  // namespace lifeline::slo
