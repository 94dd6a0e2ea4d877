#include "slo/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lifeline::slo {

namespace {

std::string Fmt(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

bool Elapsed(const std::optional<int64_t>& since_us, int64_t now_us, int64_t interval_ms) {
  return !since_us || now_us - *since_us >= interval_ms * 1000;
}

}  // namespace

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kNormal: return "normal";
    case Level::kTruncate: return "truncate";
    case Level::kTrimContext: return "trim_context";
    case Level::kCascade: return "cascade";
    case Level::kShed: return "shed";
  }
  return "?";
}

SloClass AtFloor(const SloClass& cls, const SeriesSnapshot* row) {
  if (row == nullptr || !cls.ttft_p95_ms || row->floor_ms <= *cls.ttft_p95_ms) return cls;
  SloClass at_floor = cls;
  at_floor.ttft_p95_ms = 2 * row->floor_ms;
  return at_floor;
}

Pressure PressureOf(const SloClass& cls, const SeriesSnapshot* series, int64_t min_samples) {
  if (series == nullptr) return Pressure{};
  return PressureOfStats(AtFloor(cls, series), series->window, min_samples);
}

Pressure PressureOfRow(const SloClass& cls, const SeriesSnapshot* row, int64_t min_samples) {
  if (row == nullptr) return Pressure{};
  const SloClass at_floor = AtFloor(cls, row);
  if (!row->censored) return PressureOfStats(at_floor, row->window, min_samples);
  return PressureOfStats(at_floor, *row->censored, min_samples, &row->in_flight);
}

Pressure PressureOfStats(const SloClass& cls, const std::array<WindowStats, kMetricCount>& window,
                         int64_t min_samples, const InFlightStats* in_flight) {
  Pressure p;
  for (const WindowStats& w : window) p.window_samples = std::max(p.window_samples, w.count);
  // A class thinks once a request of it thought, or one in flight is thinking or was admitted
  // to think: the first reading under pressure may come before any request began thinking,
  // and must pick the thinking rung all the same.
  p.thinks = window[static_cast<size_t>(Metric::kThink)].count > 0 ||
             (in_flight != nullptr && (in_flight->thinking > 0 || in_flight->to_think > 0));
  p.think_drain_ms = window[static_cast<size_t>(Metric::kThink)].p95_ms;
  if (in_flight != nullptr && !in_flight->unanswered_ages_ms.empty()) {
    p.think_drain_ms = std::max(p.think_drain_ms, in_flight->unanswered_ages_ms.front());
  }
  const std::pair<Metric, std::optional<double>> targets[] = {
      {Metric::kTtft, cls.ttft_p95_ms}, {Metric::kTtfa, cls.ttfa_p95_ms},
      {Metric::kE2e, cls.e2e_p95_ms}, {Metric::kTpot, cls.tpot_p95_ms}};
  auto take = [&](Metric metric, double p95_ms, double target_ms, uint64_t samples) {
    const double ratio = p95_ms / target_ms;
    if (!p.has_signal || ratio > p.ratio) {
      p.has_signal = true;
      p.ratio = ratio;
      p.metric = metric;
      p.p95_ms = p95_ms;
      p.target_ms = target_ms;
      p.samples = samples;
    }
  };
  // The rank a P95 reads among min_samples values, counted from the top.
  const int64_t need = std::max<int64_t>(1, min_samples);
  const auto k_top = static_cast<size_t>(
      need - static_cast<int64_t>(std::ceil(0.95 * static_cast<double>(need))) + 1);
  for (const auto& [metric, target] : targets) {
    if (!target) continue;
    const WindowStats& w = window[static_cast<size_t>(metric)];
    if (w.count >= static_cast<uint64_t>(min_samples)) {
      take(metric, w.p95_ms, *target, w.count);
      continue;
    }
    // A thin window: the requests still in flight may already settle it. Fill the window up
    // to min_samples with the fastest possible values (0): its P95 is then the k_top-th
    // largest value, and if the k_top-th oldest request in flight is past the target, every
    // completion of the window has its P95 over target.
    if (w.count > 0) p.thin = true;
    if (in_flight == nullptr || metric == Metric::kTpot) continue;
    const std::vector<double>& ages = metric == Metric::kTtft   ? in_flight->waiting_ages_ms
                                      : metric == Metric::kTtfa ? in_flight->unanswered_ages_ms
                                                                : in_flight->ages_ms;
    const size_t k = std::min(k_top, InFlightStats::kTopAges);
    if (ages.size() < k || ages[k - 1] <= *target) continue;
    take(metric, ages[k - 1], *target, w.count);
  }
  return p;
}

void EventLog::Push(LadderEvent e) {
  if (capacity_ == 0) return;
  if (events_.size() == capacity_) events_.pop_front();
  events_.push_back(std::move(e));
  ++total_;
}

const ModelKnobs* Knobs::ForModel(std::string_view model) const {
  for (const ModelKnobs& m : models) {
    if (m.model == model) return &m;
  }
  return nullptr;
}

const ClassLevel* Knobs::Find(std::string_view slo_class, std::string_view model) const {
  const ClassLevel* class_wide = nullptr;
  for (const ClassLevel& c : classes) {
    if (c.slo_class != slo_class) continue;
    if (c.model == model) return &c;
    if (c.model.empty()) class_wide = &c;
  }
  return class_wide;
}

Level Knobs::LevelOf(std::string_view slo_class, std::string_view model) const {
  const ClassLevel* c = Find(slo_class, model);
  return c != nullptr ? c->level : Level::kNormal;
}

double Knobs::ThinkingScaleOf(std::string_view slo_class, std::string_view model) const {
  const ClassLevel* c = Find(slo_class, model);
  return c != nullptr ? c->thinking_scale : 1.0;
}

double Knobs::MarginScaleOf(std::string_view slo_class, std::string_view model) const {
  const ClassLevel* c = Find(slo_class, model);
  return c != nullptr ? c->margin_scale : 1.0;
}

Level Knobs::LevelOf(std::string_view slo_class) const {
  Level out = Level::kNormal;
  for (const ClassLevel& c : classes) {
    if (c.slo_class == slo_class) out = std::max(out, c.level);
  }
  return out;
}

double Knobs::MarginScaleOf(std::string_view slo_class) const {
  double out = 1.0;
  for (const ClassLevel& c : classes) {
    if (c.slo_class == slo_class) out = std::max(out, c.margin_scale);
  }
  return out;
}

Controller::Controller(SloConfig config, std::vector<std::string> local_models, int64_t now_us)
    : config_(std::move(config)),
      started_us_(now_us),
      events_(static_cast<size_t>(config_.ladder.event_log_size)) {
  for (const ModelEntry& m : config_.models) ladder_models_.push_back(m.name);
  for (const std::string& m : local_models) {
    if (std::find(ladder_models_.begin(), ladder_models_.end(), m) == ladder_models_.end()) {
      ladder_models_.push_back(m);
    }
  }
  if (ladder_models_.empty()) ladder_models_.push_back("");  // one class-wide ladder
  for (const SloClass& c : config_.classes) {
    for (const std::string& m : ladder_models_) classes_.emplace(Key{c.name, m}, ClassState{});
  }
  for (std::string& m : local_models) {
    models_.push_back(ModelState{std::move(m), config_.batching.initial, std::nullopt});
  }
  std::lock_guard lock(mu_);
  Publish(now_us);
}

int64_t Controller::StepTokensFor(int32_t max_running) const {
  return std::max<int64_t>(config_.batching.min_step_tokens,
                           int64_t{max_running} * config_.batching.step_tokens_per_seq);
}

void Controller::Publish(int64_t now_us) {
  auto k = std::make_shared<Knobs>();
  k->version = ++version_;
  k->at_us = now_us;
  for (const ModelState& m : models_) {
    k->models.push_back(ModelKnobs{m.model, m.max_running, StepTokensFor(m.max_running)});
  }
  for (const auto& [key, st] : classes_) {
    k->classes.push_back(
        ClassLevel{key.first, key.second, st.level, st.margin_scale, st.thinking_scale});
  }
  k->preferred_batch_sizes = config_.batching.preferred_batch_sizes;
  k->max_queue_delay_us = static_cast<int64_t>(config_.batching.max_queue_delay_ms * 1000.0);
  board_.Publish(std::move(k));
}

void Controller::Transition(const SloClass& cls, const std::string& model, int64_t now_us,
                            Level to, std::string reason, const Pressure& p, ClassState* st,
                            TickResult* out) {
  LadderEvent e;
  e.at_us = now_us;
  e.slo_class = cls.name;
  e.model = model;
  e.from = st->level;
  e.to = to;
  e.reason = std::move(reason);
  if (p.has_signal) {
    e.metric = p.metric;
    e.p95_ms = p.p95_ms;
    e.target_ms = p.target_ms;
  }
  ++transitions_[{cls.name, model, e.from, e.to}];
  events_.Push(e);
  out->events.push_back(std::move(e));
  st->level = to;
  st->changed_us = now_us;
  st->level_changed_us = now_us;
  st->healthy_ticks = 0;
}

bool Controller::StepClass(const SloClass& cls, const std::string& model, int64_t now_us,
                           const Pressure& p, const Pressure* fresh, bool idle, ClassState* st,
                           TickResult* out) {
  const LadderParams& lp = config_.ladder;
  st->last = p;
  const auto level = static_cast<int32_t>(st->level);
  st->idle_ticks = idle ? st->idle_ticks + 1 : 0;
  if ((level > 0 || st->thinking_scale < 1.0) && idle) {
    // Nothing runs or waits on this model for this class: whatever the window remembers, no
    // request is being degraded for anyone's benefit. (At level 0 the window still decides: a
    // burst that just ended raises the level, and after a transition a further raise needs
    // samples newer than it, raise_needs_fresh_samples, which an idle model does not make.)
    return RecoverIdle(cls, model, now_us, st, out);
  }
  if (p.has_signal && p.ratio > lp.enter_ratio) {
    // Overloaded by the whole window. Since the last transition, though, the class may have
    // been idle (no sample at all) or healthy: the window then only remembers the burst
    // that raised the level, and holding the level for the window's length (30 s by
    // default) would keep truncating the answers of an idle server. Judge the level on its
    // own samples: recover as from a healthy tick (below).
    const bool fresh_ok = (level > 0 || st->thinking_scale < 1.0) && fresh != nullptr &&
                          (fresh->window_samples == 0 ||
                           (fresh->has_signal && !fresh->thin &&
                            fresh->ratio < lp.recover_ratio));
    if (!fresh_ok) {
      st->healthy_ticks = 0;
      const bool may_shorten =
          level == 0 && p.thinks && st->thinking_scale > lp.min_thinking_scale;
      if ((level >= cls.max_level && !may_shorten) ||
          !Elapsed(st->changed_us, now_us, lp.raise_interval_ms)) {
        return false;
      }
      // Not (yet) overloaded by what came after the last transition: hold until the
      // previous level has been judged on its own samples.
      if (fresh != nullptr && !(fresh->has_signal && fresh->ratio > lp.enter_ratio)) {
        return false;
      }
      if (may_shorten) {
        // The thinking rung first: shorter thinking brings the answer sooner without cutting
        // any answer; the level rises only once the thinking is as short as it may get.
        return StepThinking(cls, model, now_us, p.think_drain_ms,
                            std::max(lp.min_thinking_scale, st->thinking_scale / 2),
                            Fmt("%s p95 %.1f ms > %.2f x target %.1f ms",
                                MetricName(p.metric).data(), p.p95_ms, lp.enter_ratio,
                                p.target_ms),
                            st, out);
      }
      Transition(cls, model, now_us, static_cast<Level>(level + 1),
                 Fmt("%s p95 %.1f ms > %.2f x target %.1f ms", MetricName(p.metric).data(),
                     p.p95_ms, lp.enter_ratio, p.target_ms),
                 p, st, out);
      return true;
    }
    return Recover(cls, model, now_us, *fresh, /*since_transition=*/true, st, out);
  }
  if (p.has_signal && p.ratio >= lp.recover_ratio) {
    const bool fresh_ok = (level > 0 || st->thinking_scale < 1.0) && fresh != nullptr &&
                          (fresh->window_samples == 0 ||
                           (fresh->has_signal && !fresh->thin &&
                            fresh->ratio < lp.recover_ratio));
    if (fresh_ok) return Recover(cls, model, now_us, *fresh, /*since_transition=*/true, st, out);
    st->healthy_ticks = 0;  // inside the hysteresis band: hold
    return false;
  }
  if ((!p.has_signal && p.window_samples > 0) || p.thin) {
    // Traffic, but too few samples to judge (all metrics, or one of the targeted ones): hold.
    // Counting it healthy made the level fall and rise again under sustained overload
    // whenever samples came in slowly. (A thin tick neither counts nor resets the count.)
    return false;
  }
  return Recover(cls, model, now_us, p, /*since_transition=*/false, st, out);
}

bool Controller::RecoverIdle(const SloClass& cls, const std::string& model, int64_t now_us,
                             ClassState* st, TickResult* out) {
  const LadderParams& lp = config_.ladder;
  st->healthy_ticks = st->idle_ticks;
  if (st->idle_ticks < lp.recover_ticks) return false;
  if (st->level == Level::kNormal) {
    if (st->thinking_scale >= 1.0) return false;
    return StepThinking(cls, model, now_us, 0, 1.0,
                        Fmt("no request in flight (idle) for %d ticks", st->idle_ticks), st,
                        out);
  }
  // Straight to normal: the next request is judged afresh (and raises again at once if the
  // load comes back); stepping down one dwell at a time kept an empty model truncating or
  // shedding for 20 s after its queue had emptied.
  Transition(cls, model, now_us, Level::kNormal,
             Fmt("no request in flight (idle) for %d ticks", st->idle_ticks), Pressure{}, st,
             out);
  return true;
}

bool Controller::Recover(const SloClass& cls, const std::string& model, int64_t now_us,
                         const Pressure& p, bool since_transition, ClassState* st,
                         TickResult* out) {
  const LadderParams& lp = config_.ladder;
  const auto level = static_cast<int32_t>(st->level);
  ++st->healthy_ticks;
  const int64_t dwell_ms = lp.min_dwell_ms;
  if ((level == 0 && st->thinking_scale >= 1.0) || st->healthy_ticks < lp.recover_ticks ||
      now_us - st->changed_us.value_or(started_us_) < dwell_ms * 1000) {
    return false;
  }
  const int32_t ticks = st->healthy_ticks;
  const char* where = since_transition ? " since the last transition" : "";
  if (level == 0) {
    // Normal again: the thinking grows back, one doubling per recovery.
    return StepThinking(cls, model, now_us, p.think_drain_ms,
                        std::min(1.0, st->thinking_scale * 2),
                        p.has_signal ? Fmt("%s p95 %.1f ms < %.2f x target %.1f ms%s for %d ticks",
                                           MetricName(p.metric).data(), p.p95_ms,
                                           lp.recover_ratio, p.target_ms, where, ticks)
                                     : Fmt("no samples (idle) for %d ticks", ticks),
                        st, out);
  }
  std::string reason =
      p.has_signal
          ? Fmt("%s p95 %.1f ms < %.2f x target %.1f ms%s for %d ticks",
                MetricName(p.metric).data(), p.p95_ms, lp.recover_ratio, p.target_ms, where,
                ticks)
          : Fmt("no samples %s (idle) for %d ticks",
                since_transition ? "since the last transition" : "in the window", ticks);
  Transition(cls, model, now_us, static_cast<Level>(level - 1), std::move(reason), p, st, out);
  return true;
}

bool Controller::StepThinking(const SloClass& cls, const std::string& model, int64_t now_us,
                              double drain_ms, double to, std::string reason,
                              ClassState* st, TickResult* out) {
  if (to == st->thinking_scale) return false;
  ThinkingChange c;
  c.at_us = now_us;
  c.slo_class = cls.name;
  c.model = model;
  c.from = st->thinking_scale;
  c.to = to;
  c.reason = std::move(reason);
  (to < c.from ? thinking_cuts_ : thinking_restores_) += 1;
  thinking_changes_.push_back(c);
  while (thinking_changes_.size() > static_cast<size_t>(config_.ladder.event_log_size)) {
    thinking_changes_.pop_front();
  }
  out->thinking_changes.push_back(std::move(c));
  st->thinking_scale = to;
  // Like a transition, the next move is judged on samples newer than this one -- but a
  // budget applies only to requests admitted from now on, and those already thinking answer
  // up to one thinking time later at the old budget. So the change counts as made once they
  // have drained (now + Pressure::think_drain_ms, at most a minute): their slow answers
  // are not taken for the new budget's, which would halve again and then raise the level
  // before the first cut had any effect.
  const auto drain_us = static_cast<int64_t>(std::clamp(drain_ms, 0.0, 60'000.0) * 1000.0);
  st->changed_us = now_us + drain_us;
  st->healthy_ticks = 0;
  return true;
}

uint64_t Controller::ThinkingCuts() const {
  std::lock_guard lock(mu_);
  return thinking_cuts_;
}

uint64_t Controller::ThinkingRestores() const {
  std::lock_guard lock(mu_);
  return thinking_restores_;
}

std::vector<ThinkingChange> Controller::RecentThinkingChanges() const {
  std::lock_guard lock(mu_);
  return {thinking_changes_.begin(), thinking_changes_.end()};
}

bool Controller::StepMargin(const Pressure& p, ClassState* st) const {
  const AdmissionParams& ap = config_.admission;
  if (!p.has_signal) return false;  // no evidence either way: keep the scale
  double next = st->margin_scale;
  if (p.ratio > 1.0) {
    // At least margin_raise_factor per tick, more the further the P95 is over target (the
    // square root of the overshoot, at most +25 % per tick), so a large miss is corrected in a
    // few ticks while a marginal one creeps.
    const double step = std::clamp(std::sqrt(p.ratio), ap.margin_raise_factor,
                                   std::max(ap.margin_raise_factor, 1.25));
    next = std::min(ap.max_margin_scale, next * step);
  } else if (p.ratio < 0.8) {
    next = std::max(1.0, next / ap.margin_lower_factor);
  }
  if (next == st->margin_scale) return false;
  st->margin_scale = next;
  return true;
}

bool Controller::StepModel(int64_t now_us, const TrackerSnapshot& snapshot, ModelState* st,
                           TickResult* out) {
  const ControllerParams& cp = config_.controller;
  const BatchParams& bp = config_.batching;
  bool any = false;
  double worst = 0;
  for (const SloClass& configured : config_.classes) {
    const SloClass cls = Effective(configured);
    const Pressure p = PressureOfRow(cls, snapshot.Find(cls.name, st->model), cp.min_samples);
    if (!p.has_signal) continue;
    worst = any ? std::max(worst, p.ratio) : p.ratio;
    any = true;
  }
  if (!any || !Elapsed(st->adjusted_us, now_us, cp.batch_adjust_interval_ms)) return false;
  int32_t next = st->max_running;
  if (worst > cp.batch_high_ratio) {
    next = std::max(bp.floor, st->max_running / 2);
  } else if (worst < cp.batch_low_ratio) {
    next = static_cast<int32_t>(std::min<int64_t>(bp.cap, int64_t{st->max_running} * 2));
  }
  if (next == st->max_running) return false;
  out->batch_changes.push_back(BatchChange{now_us, st->model, st->max_running, next, worst});
  st->max_running = next;
  st->adjusted_us = now_us;
  return true;
}

TickResult Controller::Tick(int64_t now_us, const TrackerSnapshot& snapshot) {
  TickResult out;
  std::lock_guard lock(mu_);
  bool changed = false;
  const int64_t min_samples = config_.controller.min_samples;
  for (const SloClass& configured : config_.classes) {
    const SloClass cls = Effective(configured);
    for (const std::string& model : ladder_models_) {
      const SeriesSnapshot* row =
          model.empty() ? snapshot.FindClass(cls.name) : snapshot.Find(cls.name, model);
      const Pressure p = PressureOfRow(cls, row, min_samples);
      ClassState& st = classes_.find(Key{cls.name, model})->second;
      std::optional<Pressure> fresh;
      if (config_.ladder.raise_needs_fresh_samples && st.changed_us && row != nullptr &&
          row->since_change) {
        fresh = PressureOfStats(AtFloor(cls, row), *row->since_change, min_samples,
                                snapshot.has_in_flight ? &row->in_flight : nullptr);
      }
      // Idle: nothing in flight (on this model and the cascade members it routes to, for
      // this class, when the snapshot counts the requests in flight; else on any model), and
      // no sample since the previous tick (so the requests that just finished are judged
      // first, on their own samples). A model whose requests all go to a lighter member is
      // not idle while they run there: its ladder sent them.
      const bool nothing_in_flight =
          snapshot.has_in_flight
              ? InFlightDownstream(snapshot, cls.name, model) == 0
              : snapshot.live_requests.has_value() && *snapshot.live_requests == 0;
      const bool idle = nothing_in_flight &&
                        (row == nullptr ||
                         now_us - row->last_record_us >= config_.controller.tick_ms * 1000);
      changed |= StepClass(cls, model, now_us, p, fresh ? &*fresh : nullptr, idle, &st, &out);
      changed |= StepMargin(p, &st);
    }
  }
  for (ModelState& m : models_) changed |= StepModel(now_us, snapshot, &m, &out);
  if (changed) Publish(now_us);
  out.published = changed;
  return out;
}

int64_t Controller::InFlightDownstream(const TrackerSnapshot& snapshot,
                                       const std::string& slo_class,
                                       const std::string& model) const {
  if (model.empty()) {
    const SeriesSnapshot* row = snapshot.FindClass(slo_class);
    return row == nullptr ? 0 : row->in_flight.requests;
  }
  int64_t n = 0;
  // The model itself, then each lighter member its cascade routes to (a finite chain).
  std::string at = model;
  for (size_t hops = 0; hops <= config_.models.size(); ++hops) {
    if (const SeriesSnapshot* row = snapshot.Find(slo_class, at)) n += row->in_flight.requests;
    const ModelEntry* next = config_.NextInCascade(at);
    if (next == nullptr) break;
    at = next->name;
  }
  return n;
}

LatencyTracker::SinceBySeries Controller::LastTransitions() const {
  std::lock_guard lock(mu_);
  LatencyTracker::SinceBySeries out;
  for (const auto& [key, st] : classes_) {
    if (st.changed_us) out.emplace(key, *st.changed_us);
  }
  return out;
}

std::vector<LadderEvent> Controller::RecentEvents() const {
  std::lock_guard lock(mu_);
  return events_.Recent();
}

uint64_t Controller::EventsTotal() const {
  std::lock_guard lock(mu_);
  return events_.total();
}

std::vector<ClassStatus> Controller::ClassStatuses() const {
  std::lock_guard lock(mu_);
  std::vector<ClassStatus> out;
  for (const auto& [key, st] : classes_) {
    out.push_back(ClassStatus{key.first, key.second, st.level,
                              st.level_changed_us.value_or(started_us_), st.healthy_ticks, st.last,
                              st.margin_scale, st.idle_ticks, st.thinking_scale});
  }
  return out;
}

std::vector<TransitionCount> Controller::TransitionCounts() const {
  std::lock_guard lock(mu_);
  std::vector<TransitionCount> out;
  for (const auto& [key, n] : transitions_) {
    out.push_back(
        TransitionCount{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), n});
  }
  return out;
}

}  // namespace lifeline::slo
