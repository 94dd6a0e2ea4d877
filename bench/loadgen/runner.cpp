#include "bench/loadgen/runner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "bench/loadgen/stats.h"

namespace lifeline::loadgen {

namespace {

constexpr auto kTickInterval = std::chrono::milliseconds(200);
constexpr double kSloPercentile = 95;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One step: all active targets at one load.
class StepRunner {
 public:
  StepRunner(const RunOptions& o, int step, std::vector<bool> active, Clock::time_point run_start,
             RunData* out, const ProgressFn& progress)
      : o_(o), step_(step), load_(o.loads[static_cast<size_t>(step)]), run_start_(run_start),
        out_(out), progress_(progress), ts_(o.targets.size()) {
    for (size_t k = 0; k < ts_.size(); ++k) ts_[k].active = active[k];
  }

  StepData Run() {
    step_start_ = Clock::now() + std::chrono::milliseconds(20);
    first_record_ = out_->records.size();
    int n_active = 0;
    for (const TState& t : ts_) n_active += t.active ? 1 : 0;
    if (o_.mode == LoadMode::kRate) {
      ArrivalSpec spec;
      spec.rate_rps = load_;
      spec.burstiness = o_.burstiness;
      spec.max_requests = o_.requests;
      spec.duration_s = o_.duration_s;
      arrivals_ = ArrivalTimes(spec, MixSeed(o_.seed, static_cast<uint64_t>(step_), 0xa441));
    }
    int rank = 0;
    for (size_t k = 0; k < ts_.size(); ++k) {
      TState& t = ts_[k];
      if (!t.active) continue;
      if (o_.mode == LoadMode::kRate) {
        t.planned = static_cast<int64_t>(arrivals_.size());
        t.offset_s = rank / (load_ * n_active);
        ScheduleNextArrival(static_cast<int>(k));
      } else {
        t.planned = o_.requests > 0 ? o_.requests : -1;
        const int64_t c = static_cast<int64_t>(std::llround(load_));
        loop_.At(step_start_, [this, k, c] {
          launching_ = true;  // a synchronous failure must not end the step mid-launch
          for (int64_t w = 0; w < c && MayLaunchClosed(ts_[k]); ++w) LaunchClosed(static_cast<int>(k));
          launching_ = false;
          if (!WorkLeft()) loop_.Stop();
        });
      }
      ++rank;
    }
    loop_.At(step_start_ + kTickInterval, [this] { Tick(); });
    loop_.Run();

    StepData d;
    d.load = load_;
    d.start_ms = MsBetween(run_start_, step_start_);
    d.end_ms = MsBetween(run_start_, Clock::now());
    for (const TState& t : ts_) {
      TargetStep s;
      s.ran = t.active;
      s.stopped_early = t.stopped;
      s.planned = t.planned;
      s.sent = t.sent;
      s.wall_s = t.done > 0 ? MsBetween(step_start_, t.last_done) / 1000.0 : 0;
      d.targets.push_back(s);
    }
    return d;
  }

 private:
  struct TState {
    bool active = false;
    bool stopped = false;
    int64_t planned = -1;
    double offset_s = 0;
    size_t next_arrival = 0;    // next arrival to put on a timer
    size_t arrivals_fired = 0;  // arrivals whose timer has run
    int64_t next_index = 0;
    int64_t sent = 0;
    int64_t done = 0;
    int64_t bad = 0;
    int64_t errors = 0;
    int64_t pending_turns = 0;  // conversations: next turns waiting out their think time
    std::map<HttpLoop::Handle, Clock::time_point> in_flight;
    Clock::time_point last_done;
  };

  void ScheduleNextArrival(int k) {
    TState& t = ts_[static_cast<size_t>(k)];
    if (t.stopped || t.next_arrival >= arrivals_.size()) return;
    const size_t i = t.next_arrival++;
    const double at_s = arrivals_[i] + t.offset_s;
    loop_.At(step_start_ + Seconds(at_s), [this, k, i, at_s] {
      ++ts_[static_cast<size_t>(k)].arrivals_fired;
      if (ts_[static_cast<size_t>(k)].stopped) return;
      Launch(k, static_cast<int64_t>(i), at_s);
      ScheduleNextArrival(k);
    });
  }

  bool MayLaunchClosed(const TState& t) const {
    if (t.stopped) return false;
    if (o_.requests > 0 && t.next_index >= o_.requests) return false;
    if (o_.duration_s > 0 && Clock::now() >= step_start_ + Seconds(o_.duration_s)) return false;
    return true;
  }

  void LaunchClosed(int k) {
    TState& t = ts_[static_cast<size_t>(k)];
    const int64_t index = t.next_index++;
    Launch(k, index, MsBetween(step_start_, Clock::now()) / 1000.0);
  }

  void Launch(int k, int64_t index, double planned_s) {
    TState& t = ts_[static_cast<size_t>(k)];
    const TargetSpec& target = o_.targets[static_cast<size_t>(k)];
    const PlannedRequest pr = PlanRequest(o_.workload, o_.seed, step_, index);
    RequestRecord rec;
    rec.step = step_;
    rec.target = k;
    rec.index = index;
    rec.scheduled_ms = planned_s * 1000.0;
    rec.prompt_words = pr.prompt_words;
    rec.max_tokens = pr.max_tokens;
    rec.inputs = static_cast<int64_t>(pr.inputs.size());
    const Clock::time_point now = Clock::now();
    rec.start_ms = MsBetween(run_start_, now);
    rec.send_lag_ms = MsBetween(step_start_ + Seconds(planned_s), now);
    ++t.sent;
    if (static_cast<int64_t>(loop_.in_flight()) >= o_.max_in_flight) {
      rec.x.start = now;
      rec.x.e2e_ms = 0;
      rec.x.error = "client_overload";
      rec.x.error_detail = "more than " + std::to_string(o_.max_in_flight) +
                           " requests in flight; not sent";
      return OnDone(k, 0, std::move(rec));
    }
    auto handle = std::make_shared<HttpLoop::Handle>(0);
    *handle = loop_.Send(RequestSpec(o_.workload, target, pr, o_.timeout_s),
                         [this, k, handle, rec = std::move(rec)](HttpExchange x) mutable {
                           rec.x = std::move(x);
                           OnDone(k, *handle, std::move(rec));
                         });
    t.in_flight[*handle] = now;
  }

  // Conversations: the same user's next turn, after its think time (request i + N).
  void NextTurn(int k, int64_t index_done) {
    TState& t = ts_[static_cast<size_t>(k)];
    const int64_t next = index_done + o_.workload.conversations;
    if (o_.requests > 0 && next >= o_.requests) return;
    const Clock::time_point at =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(o_.workload.think_time_ms * 1000));
    if (o_.duration_s > 0 && at >= step_start_ + Seconds(o_.duration_s)) return;
    ++t.pending_turns;
    loop_.At(at, [this, k, next] {
      TState& ts = ts_[static_cast<size_t>(k)];
      --ts.pending_turns;
      if (!ts.stopped) Launch(k, next, MsBetween(step_start_, Clock::now()) / 1000.0);
      if (!launching_ && !WorkLeft()) loop_.Stop();
    });
  }

  void OnDone(int k, HttpLoop::Handle h, RequestRecord rec) {
    const int64_t index_done = rec.index;
    TState& t = ts_[static_cast<size_t>(k)];
    t.in_flight.erase(h);
    DeriveRecord(&rec);
    const bool cancelled_by_stop = t.stopped && rec.x.error == "cancelled";
    if (!cancelled_by_stop) {
      ++t.done;
      t.last_done = Clock::now();
      if (!rec.ok()) ++t.errors;
      if (!(rec.SloValue(o_.metric) <= o_.threshold_ms)) ++t.bad;
    }
    out_->records.push_back(std::move(rec));
    if (!t.stopped) {
      CheckEarlyStop(k);
      if (o_.workload.conversations > 0 && o_.mode == LoadMode::kConcurrency) {
        NextTurn(k, index_done);
      } else if (o_.mode == LoadMode::kConcurrency && MayLaunchClosed(t)) {
        LaunchClosed(k);
      }
    }
    // The step ends with its last response, not at the next progress tick.
    if (!launching_ && !WorkLeft()) loop_.Stop();
  }

  // In-flight requests that can no longer meet the SLO.
  int64_t CertainlyLateInFlight(const TState& t) const {
    const Clock::time_point now = Clock::now();
    int64_t n = 0;
    for (const auto& [h, started] : t.in_flight) {
      if (MsBetween(started, now) <= o_.threshold_ms) continue;
      // Past the threshold and the metric's event not seen yet: it can only come later.
      const bool pending = o_.metric == SloMetric::kE2e    ? true
                           : o_.metric == SloMetric::kTtfa ? loop_.AnswerEvents(h) == 0
                                                           : loop_.ContentEvents(h) == 0;
      if (pending) ++n;
    }
    return n;
  }

  void CheckEarlyStop(int k) {
    if (!o_.early_stop || o_.loads.size() < 2) return;
    TState& t = ts_[static_cast<size_t>(k)];
    if (t.stopped) return;
    bool decided = false;
    if (t.planned > 0) {
      decided = PercentileDecidedAbove(t.bad + CertainlyLateInFlight(t), t.planned, kSloPercentile);
    } else {
      decided = t.done >= 20 && 2 * t.bad > t.done;
    }
    if (!decided) return;
    t.stopped = true;
    std::vector<HttpLoop::Handle> handles;
    for (const auto& [h, started] : t.in_flight) handles.push_back(h);
    for (HttpLoop::Handle h : handles) loop_.Cancel(h);
  }

  // Requests in flight, or arrivals still to send (closed-loop workers only continue from a
  // completion, so nothing in flight means nothing more will be sent).
  bool WorkLeft() const {
    for (const TState& t : ts_) {
      if (!t.active) continue;
      if (!t.in_flight.empty() || t.pending_turns > 0) return true;
      if (o_.mode == LoadMode::kRate && !t.stopped && t.arrivals_fired < arrivals_.size()) return true;
    }
    return false;
  }

  void Tick() {
    bool work_left = false;
    Progress p;
    p.step = step_;
    p.steps = static_cast<int>(o_.loads.size());
    p.load = load_;
    p.elapsed_s = MsBetween(step_start_, Clock::now()) / 1000.0;
    for (size_t k = 0; k < ts_.size(); ++k) {
      TState& t = ts_[k];
      if (!t.active) continue;
      CheckEarlyStop(static_cast<int>(k));
      p.sent += t.sent;
      p.done += t.done;
      p.errors += t.errors;
      p.in_flight += static_cast<int64_t>(t.in_flight.size());
    }
    work_left = WorkLeft();
    if (progress_) {
      std::vector<double> slo;
      for (size_t i = first_record_; i < out_->records.size(); ++i) {
        slo.push_back(out_->records[i].SloValue(o_.metric));
      }
      p.slo_p95_ms = Percentile(slo, kSloPercentile);
      progress_(p);
    }
    if (work_left) loop_.At(Clock::now() + kTickInterval, [this] { Tick(); });
  }

  const RunOptions& o_;
  int step_;
  double load_;
  Clock::time_point run_start_;
  Clock::time_point step_start_;
  RunData* out_;
  const ProgressFn& progress_;
  std::vector<TState> ts_;
  std::vector<double> arrivals_;
  size_t first_record_ = 0;
  bool launching_ = false;
  HttpLoop loop_;
};

}  // namespace

SloMetric DefaultSloMetric(const WorkloadSpec& w) {
  return RequestsStream(w) ? SloMetric::kTtft : SloMetric::kE2e;
}

Status ValidateRunOptions(const RunOptions& o) {
  if (o.targets.empty()) return InvalidArgument("--target: at least one target (or --serve) is needed");
  if (o.targets.size() > 16) {
    return InvalidArgument("--target: " + std::to_string(o.targets.size()) +
                           " targets; at most 16");
  }
  if (o.loads.empty()) return InvalidArgument("--rate / --concurrency / --sweep: no load given");
  if (o.requests <= 0 && !(o.duration_s > 0)) {
    return InvalidArgument("--requests or --duration: one of them must be set (> 0)");
  }
  if (o.requests > 10'000'000) return InvalidArgument("--requests: at most 10000000");
  if (o.duration_s > 86400) return InvalidArgument("--duration: at most 86400 s");
  for (double l : o.loads) {
    if (!(l > 0)) return InvalidArgument("load " + std::to_string(l) + ": must be > 0");
    if (o.mode == LoadMode::kConcurrency && (l != std::floor(l) || l > 10000)) {
      return InvalidArgument("--concurrency " + std::to_string(l) +
                             ": must be a whole number in [1, 10000]");
    }
  }
  if (!(o.burstiness > 0) || o.burstiness > 1000) {
    return InvalidArgument("--burstiness " + std::to_string(o.burstiness) +
                           ": must be in (0, 1000]");
  }
  if (!(o.timeout_s > 0)) return InvalidArgument("--timeout: must be > 0 s");
  if (!(o.threshold_ms > 0)) return InvalidArgument("--threshold-ms: must be > 0");
  if (o.max_in_flight < 1) return InvalidArgument("--max-in-flight: must be >= 1");
  LL_RETURN_IF_ERROR(ValidateWorkload(o.workload));
  const double closed_total = o.loads.back() * static_cast<double>(o.targets.size());
  if (o.mode == LoadMode::kConcurrency && closed_total > static_cast<double>(o.max_in_flight)) {
    return InvalidArgument("--max-in-flight " + std::to_string(o.max_in_flight) +
                           " is below concurrency x targets = " + std::to_string(closed_total));
  }
  return Status::Ok();
}

double StepSloP95(const RunData& run, int step, int target, SloMetric metric) {
  std::vector<double> v;
  for (const RequestRecord& r : run.records) {
    if (r.step == step && r.target == target) v.push_back(r.SloValue(metric));
  }
  return Percentile(v, kSloPercentile);
}

Result<RunData> RunLoad(const RunOptions& o, const ProgressFn& progress) {
  LL_RETURN_IF_ERROR(ValidateRunOptions(o));
  RunData run;
  run.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const Clock::time_point run_start = Clock::now();
  std::vector<bool> active(o.targets.size(), true);
  const bool sweep = o.loads.size() > 1;
  for (size_t s = 0; s < o.loads.size(); ++s) {
    bool any = false;
    for (bool a : active) any |= a;
    if (!any) {
      StepData skipped;
      skipped.load = o.loads[s];
      skipped.targets.resize(o.targets.size());
      run.steps.push_back(skipped);
      continue;
    }
    if (s > 0 && o.cooldown_s > 0) std::this_thread::sleep_for(Seconds(o.cooldown_s));
    StepRunner runner(o, static_cast<int>(s), active, run_start, &run, progress);
    run.steps.push_back(runner.Run());
    // Without early stop every step runs for every target: a benchmark that reports the
    // whole curve past the cliff (e.g. goodput with and without load shedding) needs them.
    if (!sweep || !o.early_stop) continue;
    for (size_t k = 0; k < o.targets.size(); ++k) {
      if (!active[k]) continue;
      const double p95 = StepSloP95(run, static_cast<int>(s), static_cast<int>(k), o.metric);
      if (run.steps.back().targets[k].stopped_early || !(p95 <= o.threshold_ms)) active[k] = false;
    }
  }
  run.total_s = MsBetween(run_start, Clock::now()) / 1000.0;
  return run;
}

}  // namespace lifeline::loadgen
