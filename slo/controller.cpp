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

Pressure PressureOf(const SloClass& cls, const SeriesSnapshot* series, int64_t min_samples) {
  if (series == nullptr) return Pressure{};
  return PressureOfStats(cls, series->window, min_samples);
}

Pressure PressureOfStats(const SloClass& cls, const std::array<WindowStats, kMetricCount>& window,
                         int64_t min_samples) {
  Pressure p;
  for (const WindowStats& w : window) p.window_samples = std::max(p.window_samples, w.count);
  const std::pair<Metric, std::optional<double>> targets[] = {
      {Metric::kTtft, cls.ttft_p95_ms}, {Metric::kE2e, cls.e2e_p95_ms},
      {Metric::kTpot, cls.tpot_p95_ms}};
  for (const auto& [metric, target] : targets) {
    if (!target) continue;
    const WindowStats& w = window[static_cast<size_t>(metric)];
    if (w.count < static_cast<uint64_t>(min_samples)) continue;
    const double ratio = w.p95_ms / *target;
    if (!p.has_signal || ratio > p.ratio) {
      p.has_signal = true;
      p.ratio = ratio;
      p.metric = metric;
      p.p95_ms = w.p95_ms;
      p.target_ms = *target;
      p.samples = w.count;
    }
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

Level Knobs::LevelOf(std::string_view slo_class) const {
  for (const ClassLevel& c : classes) {
    if (c.slo_class == slo_class) return c.level;
  }
  return Level::kNormal;
}

double Knobs::MarginScaleOf(std::string_view slo_class) const {
  for (const ClassLevel& c : classes) {
    if (c.slo_class == slo_class) return c.margin_scale;
  }
  return 1.0;
}

Controller::Controller(SloConfig config, std::vector<std::string> local_models, int64_t now_us)
    : config_(std::move(config)),
      started_us_(now_us),
      events_(static_cast<size_t>(config_.ladder.event_log_size)) {
  for (const SloClass& c : config_.classes) classes_.emplace(c.name, ClassState{});
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
  for (const auto& [name, st] : classes_) {
    k->classes.push_back(ClassLevel{name, st.level, st.margin_scale});
  }
  k->preferred_batch_sizes = config_.batching.preferred_batch_sizes;
  k->max_queue_delay_us = static_cast<int64_t>(config_.batching.max_queue_delay_ms * 1000.0);
  board_.Publish(std::move(k));
}

void Controller::Transition(const SloClass& cls, int64_t now_us, Level to, std::string reason,
                            const Pressure& p, ClassState* st, TickResult* out) {
  LadderEvent e;
  e.at_us = now_us;
  e.slo_class = cls.name;
  e.from = st->level;
  e.to = to;
  e.reason = std::move(reason);
  if (p.has_signal) {
    e.metric = p.metric;
    e.p95_ms = p.p95_ms;
    e.target_ms = p.target_ms;
  }
  ++transitions_[{cls.name, e.from, e.to}];
  events_.Push(e);
  out->events.push_back(std::move(e));
  st->level = to;
  st->changed_us = now_us;
  st->healthy_ticks = 0;
}

bool Controller::StepClass(const SloClass& cls, int64_t now_us, const Pressure& p,
                           const Pressure* fresh, bool idle, ClassState* st,
                           TickResult* out) {
  const LadderParams& lp = config_.ladder;
  st->last = p;
  const auto level = static_cast<int32_t>(st->level);
  if (level > 0 && idle) {
    // Nothing runs or waits anywhere: whatever the window remembers, no request is being
    // degraded for anyone's benefit. An idle tick is a healthy tick.
    return Recover(cls, now_us, Pressure{}, /*since_transition=*/false, st, out,
                   "no request in flight (idle)");
  }
  if (p.has_signal && p.ratio > lp.enter_ratio) {
    // Overloaded by the whole window. Since the last transition, though, the class may have
    // been idle (no sample at all) or healthy: the window then only remembers the burst
    // that raised the level, and holding the level for the window's length (30 s by
    // default) would keep truncating the answers of an idle server. Judge the level on its
    // own samples: recover as from a healthy tick (below).
    const bool fresh_ok = level > 0 && fresh != nullptr &&
                          (fresh->window_samples == 0 ||
                           (fresh->has_signal && fresh->ratio < lp.recover_ratio));
    if (!fresh_ok) {
      st->healthy_ticks = 0;
      if (level >= cls.max_level || !Elapsed(st->changed_us, now_us, lp.raise_interval_ms)) {
        return false;
      }
      // Not (yet) overloaded by what came after the last transition: hold until the
      // previous level has been judged on its own samples.
      if (fresh != nullptr && !(fresh->has_signal && fresh->ratio > lp.enter_ratio)) {
        return false;
      }
      Transition(cls, now_us, static_cast<Level>(level + 1),
                 Fmt("%s p95 %.1f ms > %.2f x target %.1f ms", MetricName(p.metric).data(),
                     p.p95_ms, lp.enter_ratio, p.target_ms),
                 p, st, out);
      return true;
    }
    return Recover(cls, now_us, *fresh, /*since_transition=*/true, st, out);
  }
  if (p.has_signal && p.ratio >= lp.recover_ratio) {
    const bool fresh_ok = level > 0 && fresh != nullptr &&
                          (fresh->window_samples == 0 ||
                           (fresh->has_signal && fresh->ratio < lp.recover_ratio));
    if (fresh_ok) return Recover(cls, now_us, *fresh, /*since_transition=*/true, st, out);
    st->healthy_ticks = 0;  // inside the hysteresis band: hold
    return false;
  }
  if (!p.has_signal && p.window_samples > 0) {
    // Traffic, but too few samples to judge: hold. Counting it healthy made the level fall
    // and rise again under sustained overload whenever samples came in slowly.
    return false;
  }
  return Recover(cls, now_us, p, /*since_transition=*/false, st, out);
}

bool Controller::Recover(const SloClass& cls, int64_t now_us, const Pressure& p,
                         bool since_transition, ClassState* st, TickResult* out,
                         const char* idle_reason) {
  const LadderParams& lp = config_.ladder;
  const auto level = static_cast<int32_t>(st->level);
  ++st->healthy_ticks;
  const int64_t dwell_ms = lp.min_dwell_ms;
  if (level == 0 || st->healthy_ticks < lp.recover_ticks ||
      now_us - st->changed_us.value_or(started_us_) < dwell_ms * 1000) {
    return false;
  }
  const int32_t ticks = st->healthy_ticks;
  const char* where = since_transition ? " since the last transition" : "";
  std::string reason =
      idle_reason != nullptr ? Fmt("%s for %d ticks", idle_reason, ticks)
      : p.has_signal
          ? Fmt("%s p95 %.1f ms < %.2f x target %.1f ms%s for %d ticks",
                MetricName(p.metric).data(), p.p95_ms, lp.recover_ratio, p.target_ms, where,
                ticks)
          : Fmt("no samples %s (idle) for %d ticks",
                since_transition ? "since the last transition" : "in the window", ticks);
  Transition(cls, now_us, static_cast<Level>(level - 1), std::move(reason), p, st, out);
  return true;
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
  for (const SloClass& cls : config_.classes) {
    const Pressure p = PressureOf(cls, snapshot.Find(cls.name, st->model), cp.min_samples);
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
  for (const SloClass& cls : config_.classes) {
    const SeriesSnapshot* series = snapshot.FindClass(cls.name);
    const Pressure p = PressureOf(cls, series, config_.controller.min_samples);
    ClassState& st = classes_.find(cls.name)->second;
    std::optional<Pressure> fresh;
    if (config_.ladder.raise_needs_fresh_samples && st.changed_us && series != nullptr &&
        series->since_change) {
      fresh = PressureOfStats(cls, *series->since_change, config_.controller.min_samples);
    }
    // Idle: nothing in flight anywhere, and no sample of this class since the previous tick
    // (so the requests that just finished are judged first, on their own samples).
    const bool idle = snapshot.live_requests.has_value() && *snapshot.live_requests == 0 &&
                      (series == nullptr ||
                       now_us - series->last_record_us >= config_.controller.tick_ms * 1000);
    changed |= StepClass(cls, now_us, p, fresh ? &*fresh : nullptr, idle, &st, &out);
    changed |= StepMargin(p, &st);
  }
  for (ModelState& m : models_) changed |= StepModel(now_us, snapshot, &m, &out);
  if (changed) Publish(now_us);
  out.published = changed;
  return out;
}

std::map<std::string, int64_t, std::less<>> Controller::LastTransitions() const {
  std::lock_guard lock(mu_);
  std::map<std::string, int64_t, std::less<>> out;
  for (const auto& [name, st] : classes_) {
    if (st.changed_us) out.emplace(name, *st.changed_us);
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
  for (const auto& [name, st] : classes_) {
    out.push_back(
        ClassStatus{name, st.level, st.changed_us.value_or(started_us_), st.healthy_ticks, st.last,
                    st.margin_scale});
  }
  return out;
}

std::vector<TransitionCount> Controller::TransitionCounts() const {
  std::lock_guard lock(mu_);
  std::vector<TransitionCount> out;
  for (const auto& [key, n] : transitions_) {
    out.push_back(TransitionCount{std::get<0>(key), std::get<1>(key), std::get<2>(key), n});
  }
  return out;
}

}  // namespace lifeline::slo
