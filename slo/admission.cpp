#include "slo/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

namespace lifeline::slo {

namespace {

std::string Fmt(const char* fmt, auto... args) {
  char buf[384];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

int32_t ClampRetry(const SloConfig& c, double seconds) {
  const double s = std::ceil(std::isfinite(seconds) ? seconds : 1.0);
  return static_cast<int32_t>(std::clamp(s, 1.0, double(c.admission.max_retry_after_s)));
}

AdmissionDecision Shed(ShedCause cause, int32_t retry_after_s, std::string reason) {
  AdmissionDecision d;
  d.action = Action::kShed;
  d.shed_cause = cause;
  d.retry_after_s = retry_after_s;
  d.reason = std::move(reason);
  return d;
}

AdmissionDecision Route(std::string reason) {
  AdmissionDecision d;
  d.action = Action::kRoute;
  d.reason = std::move(reason);
  return d;
}

// Route down the cascade when there is a lighter member, else shed for load.
AdmissionDecision RouteOrShed(const AdmissionRequest& r, int32_t retry_after_s,
                              std::string reason) {
  if (r.has_next_model) return Route(std::move(reason));
  return Shed(ShedCause::kLoad, retry_after_s, std::move(reason));
}

// The caps of an admitted request at level >= truncate.
void ApplyTruncation(const SloConfig& c, const AdmissionRequest& r,
                     const SpeedEstimator& speeds, AdmissionDecision* d) {
  int64_t cap = c.ladder.truncate_max_tokens;
  std::string why = Fmt("ladder.truncate_max_tokens %lld", static_cast<long long>(cap));
  const auto decode_ms = speeds.decode_ms_per_token();
  if (r.budget.e2e_budget_ms) {
    d->stop_at_deadline = true;
    if (decode_ms && d->predicted.ttft_ms) {
      // The first token comes with the prefill; each further one costs decode_ms. Never
      // below the floor: a cut to a handful of tokens is no answer, and the deadline stop
      // still ends the request at its deadline (and says so).
      const double left_ms = *r.budget.e2e_budget_ms - *d->predicted.ttft_ms;
      const auto fit = 1 + static_cast<int64_t>(std::floor(std::max(0.0, left_ms) / *decode_ms));
      const int64_t floor_tokens =
          std::min(c.ladder.truncate_min_tokens, c.ladder.truncate_max_tokens);
      const int64_t by_budget = std::max(fit, floor_tokens);
      if (by_budget < cap) {
        cap = by_budget;
        why = fit >= floor_tokens
                  ? Fmt("what fits the e2e budget %.0f ms at %.2f ms/token",
                        *r.budget.e2e_budget_ms, *decode_ms)
                  : Fmt("the floor ladder.truncate_min_tokens %lld (the e2e budget %.0f ms "
                        "fits %lld)",
                        static_cast<long long>(floor_tokens), *r.budget.e2e_budget_ms,
                        static_cast<long long>(fit));
      }
    }
  }
  if (cap < r.max_tokens) {
    d->max_tokens_cap = cap;
    d->cap_reason = Fmt("class %s at ladder level truncate: max_tokens %lld capped to %lld (",
                        r.budget.slo_class.c_str(), static_cast<long long>(r.max_tokens),
                        static_cast<long long>(cap)) +
                    why + ")";
  }
}

// The predictions are means and the budget a P95. Once the model's predictions have been
// checked (PredictionAudit::spread_q95), the margin is their measured spread: the 95th
// percentile of measured / predicted, which already holds what the fixed margin and the
// controller's scale stood in for (step-time spread, threads sharing the cores). Before, the
// configured margin times the controller's closed-loop scale. (Both at once wound up: the
// scale, driven by a 30 s window, reached its cap of 4 while the spread was 1.5, and admission
// shed half of what the model could serve in budget.)
double MarginOf(const SloConfig& c, const AdmissionRequest& r) {
  if (r.prediction_spread > 0) return std::max(1.0, r.prediction_spread);
  return c.admission.prediction_margin * std::max(1.0, r.margin_scale);
}

// Nothing waits on the model and nothing runs there: the request would start at once.
bool Idle(const QueueLoad& l) {
  if (l.open_requests >= 0) return l.open_requests == 0;
  return l.queued_requests <= 0 && l.queued_prefill_tokens <= 0 &&
         l.running_prefill_tokens <= 0 && l.running_decodes <= 0;
}

}  // namespace

void SpeedEstimator::Update(std::atomic<double>* avg, std::atomic<int64_t>* last_us,
                            double sample, int64_t now_us) {
  // One writer: a plain load/store pair is enough; readers see either value. A measurement
  // after a stale gap replaces the average: the old value describes a machine state (a cold
  // first request, a burst of load) too long gone to blend with.
  const double old = avg->load(std::memory_order_relaxed);
  const int64_t prev_us = last_us->load(std::memory_order_relaxed);
  const bool stale = stale_after_us_ > 0 && now_us - prev_us >= stale_after_us_;
  avg->store(old == 0 || stale ? sample : alpha_ * sample + (1 - alpha_) * old,
             std::memory_order_relaxed);
  last_us->store(now_us, std::memory_order_relaxed);
}

void SpeedEstimator::ObservePrefill(int64_t tokens, double elapsed_ms, int64_t now_us) {
  if (tokens <= 0 || !(elapsed_ms > 0) || !std::isfinite(elapsed_ms)) return;
  const double x = static_cast<double>(tokens);
  int k = 0;
  while (k + 1 < kSizeClasses && (int64_t{1} << (k + 1)) <= tokens) ++k;
  {
    std::lock_guard lock(mu_);
    const int64_t prev_us = prefill_at_us_.load(std::memory_order_relaxed);
    const bool stale = has_prefill_.load(std::memory_order_relaxed) && stale_after_us_ > 0 &&
                       now_us - prev_us >= stale_after_us_;
    if (stale) {
      // The machine may be faster or slower now than when the fit was made: scale every
      // class by this measurement's ratio to the fit, keeping the fit's shape.
      if (const auto fit = FitLocked()) {
        const double predicted = fit->fixed_ms + fit->per_token_ms * x;
        if (predicted > 0) {
          const double ratio = elapsed_ms / predicted;
          for (SizeClass& c : classes_) c.ms *= ratio;
        }
      }
    }
    SizeClass& c = classes_[k];
    if (!c.seen || stale) {
      c.tokens = x;
      c.ms = elapsed_ms;
      c.seen = true;
    } else {
      c.tokens = alpha_ * x + (1 - alpha_) * c.tokens;
      c.ms = alpha_ * elapsed_ms + (1 - alpha_) * c.ms;
    }
    has_prefill_.store(true, std::memory_order_relaxed);
    prefill_at_us_.store(now_us, std::memory_order_relaxed);
  }
}

void SpeedEstimator::ObserveDecode(double ms_per_token, int64_t now_us) {
  if (!(ms_per_token > 0) || !std::isfinite(ms_per_token)) return;
  Update(&decode_ms_, &decode_at_us_, ms_per_token, now_us);
}

std::optional<SpeedEstimator::PrefillFit> SpeedEstimator::FitLocked() const {
  // Least squares of ms on tokens over the classes' averages, one point per class, so a
  // size seen often does not drown the others.
  double n = 0, sx = 0, sy = 0, lo = 0, hi = 0;
  for (const SizeClass& c : classes_) {
    if (!c.seen) continue;
    lo = n == 0 ? c.tokens : std::min(lo, c.tokens);
    hi = n == 0 ? c.tokens : std::max(hi, c.tokens);
    n += 1;
    sx += c.tokens;
    sy += c.ms;
  }
  if (n < 2 || hi < 2 * lo) return std::nullopt;  // one size alone says nothing of the slope
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, sx2 = 0, sxy0 = 0;
  for (const SizeClass& c : classes_) {
    if (!c.seen) continue;
    sxx += (c.tokens - mx) * (c.tokens - mx);
    sxy += (c.tokens - mx) * (c.ms - my);
    sx2 += c.tokens * c.tokens;
    sxy0 += c.tokens * c.ms;
  }
  PrefillFit f;
  f.per_token_ms = sxx > 0 ? sxy / sxx : 0;
  f.fixed_ms = my - f.per_token_ms * mx;
  if (f.per_token_ms <= 0) {
    // Longer steps measured no slower (noise): all fixed cost, but keep a small slope so a
    // huge prompt is never predicted free: the cheapest per-token rate seen, over 100.
    double min_rate = my / std::max(1.0, hi);
    for (const SizeClass& c : classes_) {
      if (c.seen) min_rate = std::min(min_rate, c.ms / c.tokens);
    }
    f.per_token_ms = min_rate / 100;
    f.fixed_ms = std::max(0.0, my - f.per_token_ms * mx);
  } else if (f.fixed_ms < 0) {
    // A negative fixed cost is noise too: the line through the origin.
    f.fixed_ms = 0;
    f.per_token_ms = sxy0 / sx2;
  }
  if (!(f.per_token_ms > 0) || !std::isfinite(f.per_token_ms) || !std::isfinite(f.fixed_ms)) {
    return std::nullopt;
  }
  return f;
}

std::optional<SpeedEstimator::PrefillFit> SpeedEstimator::prefill_fit() const {
  std::lock_guard lock(mu_);
  return FitLocked();
}

std::optional<double> SpeedEstimator::PrefillMs(int64_t tokens) const {
  const auto f = prefill_fit();
  if (!f) return std::nullopt;
  return f->fixed_ms + f->per_token_ms * static_cast<double>(std::max<int64_t>(0, tokens));
}

std::optional<double> SpeedEstimator::prefill_tokens_per_s() const {
  const auto f = prefill_fit();
  if (!f) return std::nullopt;
  return 1000.0 / f->per_token_ms;
}

std::optional<double> SpeedEstimator::decode_ms_per_token() const {
  const double v = decode_ms_.load(std::memory_order_relaxed);
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

bool SpeedEstimator::Stale(int64_t now_us) const {
  if (stale_after_us_ <= 0 || !has_prefill_.load(std::memory_order_relaxed)) return false;
  const int64_t last = std::max(prefill_at_us_.load(std::memory_order_relaxed),
                                probe_at_us_.load(std::memory_order_relaxed));
  return now_us - last >= stale_after_us_;
}

bool SpeedEstimator::TryClaimProbe(int64_t now_us) {
  int64_t seen = probe_at_us_.load(std::memory_order_relaxed);
  for (;;) {
    if (!Stale(now_us)) return false;
    // One winner: the others see the new probe time and Stale() false.
    if (probe_at_us_.compare_exchange_weak(seen, now_us, std::memory_order_relaxed)) return true;
  }
}

namespace {

// Time until the request holds a running slot and has prefilled its own prompt, when every
// slot is taken (see the header): without it, a queue of short prompts behind a full running
// set predicted a few steps while each admitted request waited for decodes to finish (at 30
// req/s, 32-token answers, 16 slots: admitted P95 TTFT 785 ms against a 387 ms budget).
// The decodes' tokens left are taken as spread evenly over [min, 2 x mean - min]: a burst
// that started together (min = mean) frees no slot before its shortest finishes, a spread
// one frees the first within a step or two. The need-th slot to free is the need-th of those
// evenly spaced values; past the running set (need > decodes) each further round of slots
// takes about the longest, as the new sequences start from their full length.
std::optional<double> SlotWaitMs(const SpeedEstimator& speeds,
                                 const SpeedEstimator::PrefillFit& fit, const QueueLoad& load,
                                 int64_t prompt_tokens) {
  if (load.max_running <= 0 || load.running_decodes <= 0 ||
      load.running_decode_tokens_left <= 0) {
    return std::nullopt;
  }
  const int64_t free_slots = std::max<int64_t>(0, load.max_running - load.running_sequences);
  const int64_t need = std::max<int64_t>(0, load.queued_requests) + 1 - free_slots;
  if (need <= 0) return std::nullopt;
  // A slot frees at the pace of the running decodes' steps: the measured interval between
  // them under this load, and never less than a decode step alone.
  std::optional<double> step_ms = speeds.decode_ms_per_token();
  if (load.decode_interval_ms > 0) {
    step_ms = std::max(step_ms.value_or(0.0), load.decode_interval_ms);
  }
  if (!step_ms) return std::nullopt;
  const int64_t n = load.running_decodes;
  const double mean = static_cast<double>(load.running_decode_tokens_left) / static_cast<double>(n);
  const double lo = std::clamp(static_cast<double>(load.running_decode_min_left), 0.0, mean);
  const double hi = 2.0 * mean - lo;
  const int64_t rounds = (need - 1) / n, index = (need - 1) % n;
  const double within =
      n > 1 ? lo + (hi - lo) * static_cast<double>(index) / static_cast<double>(n - 1) : lo;
  // A further round of slots frees when the requests queued ahead, started in the previous
  // round, have decoded: their own max_tokens (long answers hold a slot for long), not the
  // running ones' remainder, when the engine publishes them.
  double round_steps = hi;
  if (load.queued_decode_tokens > 0 && load.queued_requests > 0) {
    round_steps = static_cast<double>(load.queued_decode_tokens) /
                  static_cast<double>(load.queued_requests);
  }
  const double wait_steps = std::max(1.0, within + static_cast<double>(rounds) * round_steps);
  return std::max(0.0, load.step_left_ms) + wait_steps * *step_ms + fit.fixed_ms +
         static_cast<double>(std::max<int64_t>(0, prompt_tokens)) * fit.per_token_ms;
}

}  // namespace

Prediction Predict(const SpeedEstimator& speeds, const QueueLoad& load, int64_t prompt_tokens,
                   int64_t max_tokens, double elapsed_ms, double margin, double correction) {
  Prediction p;
  const auto fit = speeds.prefill_fit();
  if (!fit) return p;
  const int64_t prefill = std::max<int64_t>(0, load.queued_prefill_tokens) +
                          std::max<int64_t>(0, load.running_prefill_tokens) +
                          std::max<int64_t>(0, prompt_tokens);
  const int64_t decoding = std::max<int32_t>(0, load.running_decodes);
  // Decodes go first in every step; the prefill gets what is left of the token budget.
  int64_t steps = 1;
  if (load.step_token_budget > 0) {
    const int64_t per_step = std::max<int64_t>(1, load.step_token_budget - decoding);
    steps = std::max<int64_t>(1, (prefill + per_step - 1) / per_step);
  }
  const double tokens = static_cast<double>(prefill) + static_cast<double>(steps * decoding);
  double service_ms = std::max(0.0, load.step_left_ms) +
                      static_cast<double>(steps) * fit->fixed_ms + tokens * fit->per_token_ms;
  if (const std::optional<double> wait = SlotWaitMs(speeds, *fit, load, prompt_tokens)) {
    service_ms = std::max(service_ms, *wait);
  }
  p.raw_service_ms = service_ms;
  const double corrected = service_ms * (correction > 0 && std::isfinite(correction) ? correction : 1.0);
  p.ttft_ms = elapsed_ms + std::max(1.0, margin) * corrected;
  if (const auto dms = speeds.decode_ms_per_token()) {
    p.e2e_ms = *p.ttft_ms + static_cast<double>(std::max<int64_t>(0, max_tokens - 1)) * *dms;
  }
  return p;
}

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kAdmit: return "admit";
    case Action::kRoute: return "route";
    case Action::kShed: return "shed";
    case Action::kRefuse: return "refuse";
  }
  return "?";
}

// How a reason names the budget of a request judged against its floor (below_floor).
constexpr const char* kFloorBudgetNote =
    " (what the request needs alone, and as long again or the class's budget on top)";

AdmissionDecision Decide(const SloConfig& c, const AdmissionRequest& r,
                         const SpeedEstimator& speeds) {
  const char* cls = r.budget.slo_class.c_str();
  if (!r.model_ready) {
    if (r.has_next_model) return Route("model not ready");
    return Shed(ShedCause::kNotReady, c.admission.not_ready_retry_after_s, "model not ready");
  }
  // An idle model (nothing queued or running on it) is never shed: the shed level exists to
  // take load off it, and a refusal there frees nothing for anyone (the first request after a
  // burst meets an empty model whose ladder has not come down yet). It acts as the cascade
  // level: routed on the first hop, served in place by the last member.
  const bool idle = Idle(r.load);
  const Level level = idle ? std::min(r.level, Level::kCascade) : r.level;
  if (level >= Level::kShed) {
    // The ladder is per (class, model): this model takes no more, a lighter one may.
    return RouteOrShed(r, ClampRetry(c, c.ladder.min_dwell_ms / 1000.0),
                       Fmt("class %s at degradation level shed", cls));
  }
  if (level >= Level::kCascade && r.cascade_hops == 0 && r.has_next_model) {
    return Route(Fmt("class %s at degradation level cascade", cls));
  }
  const auto tps = speeds.prefill_tokens_per_s();
  if (r.load.queued_requests + int64_t{1} > r.max_queue_requests ||
      r.load.queued_prefill_tokens + r.prompt_tokens > r.max_queue_tokens) {
    const double drain_s =
        tps ? static_cast<double>(r.load.queued_prefill_tokens) / *tps : 1.0;
    return RouteOrShed(
        r, ClampRetry(c, drain_s),
        Fmt("queue full: %d requests, %lld prompt tokens queued (limits %d, %lld)",
            r.load.queued_requests, static_cast<long long>(r.load.queued_prefill_tokens),
            r.max_queue_requests, static_cast<long long>(r.max_queue_tokens)));
  }
  if (r.budget.deadline_ms) {
    // The client's own deadline, against the request alone on an idle model at the mean
    // fitted speed (no margin): if even that misses, no retry can help.
    const double deadline = *r.budget.deadline_ms;
    QueueLoad alone_load;
    alone_load.step_token_budget = r.load.step_token_budget;
    const Prediction alone =
        Predict(speeds, alone_load, r.prompt_tokens, r.max_tokens, r.elapsed_ms, 1.0);
    std::string why;
    if (r.elapsed_ms >= deadline) {
      why = Fmt("%.1f ms had passed when the request was ready to queue", r.elapsed_ms);
    } else if (alone.ttft_ms && *alone.ttft_ms > deadline) {
      const auto fit = speeds.prefill_fit();
      why = Fmt("its first token is estimated at %.1f ms even with nothing else queued "
                "(%.1f ms elapsed + prefill of %lld prompt tokens at %.2f ms + %.4f ms/token)",
                *alone.ttft_ms, r.elapsed_ms, static_cast<long long>(r.prompt_tokens),
                fit->fixed_ms, fit->per_token_ms);
    }
    if (!why.empty()) {
      AdmissionDecision out;
      out.action = Action::kRefuse;
      out.predicted = alone;
      out.reason = Fmt("deadline_ms %.0f cannot be met: ", deadline) + why;
      return out;
    }
  }
  AdmissionDecision d;
  d.predicted = Predict(speeds, r.load, r.prompt_tokens, r.max_tokens, r.elapsed_ms,
                        MarginOf(c, r), r.prediction_correction);
  // A budget the request misses even alone on an idle model (its own prefill, with the same
  // correction and margin) is one no refusal can help it meet, and no retry either: shedding
  // it only turns a slow answer into none (a 0.6B embedder on two cores needs about 230 ms for
  // a query; the search-embed class gives 50). On the last member (a lighter one may still
  // meet the budget: it is routed there as before) such a request is judged against that floor
  // plus the wait it may have behind other work: the class budget, or its own floor when that
  // is longer -- behind a step in flight it waits up to a step of its own size, so 50 ms beside
  // a 230 ms floor would refuse every request that arrives mid-step.
  double budget_ms = r.budget.ttft_budget_ms;
  if (r.floor_rule && c.admission.predictive && !idle && !r.has_next_model) {
    QueueLoad alone_load;
    alone_load.step_token_budget = r.load.step_token_budget;
    const Prediction alone = Predict(speeds, alone_load, r.prompt_tokens, r.max_tokens,
                                     r.elapsed_ms, MarginOf(c, r), r.prediction_correction);
    if (alone.ttft_ms && *alone.ttft_ms > budget_ms) {
      budget_ms = *alone.ttft_ms + std::max(r.budget.ttft_budget_ms, *alone.ttft_ms);
      d.below_floor = true;
      d.floor_budget_ms = budget_ms;
      d.floor_ms = Predict(speeds, alone_load, r.prompt_tokens, r.max_tokens, r.elapsed_ms, 1.0,
                           r.prediction_correction).ttft_ms;
    }
  }
  const bool late = c.admission.predictive && d.predicted.ttft_ms &&
                    *d.predicted.ttft_ms > budget_ms;
  if (late && idle && !r.has_next_model) {
    // Nothing is queued or running on the model: a refusal frees nothing for anyone, and a
    // retry would find the same idle model. Serve it (a lighter member, when there is one,
    // is tried below instead).
    d.reason = Fmt("model idle: admitted although predicted ttft %.1f ms > budget %.1f ms",
                   *d.predicted.ttft_ms, r.budget.ttft_budget_ms);
  } else if (late && idle) {
    AdmissionDecision out = Route(Fmt("predicted ttft %.1f ms > budget %.1f ms on an idle "
                                      "model: a lighter member may meet it",
                                      *d.predicted.ttft_ms, r.budget.ttft_budget_ms));
    out.predicted = d.predicted;
    return out;
  } else if (late && r.probe_due) {
    // The estimate behind "late" is stale: let this one through to measure the model again.
    d.probe = true;
    d.reason = Fmt("probe: stale speed estimate (predicted ttft %.1f ms > budget %.1f ms)",
                   *d.predicted.ttft_ms, r.budget.ttft_budget_ms);
  } else if (late) {
    const double late_ms = *d.predicted.ttft_ms - budget_ms;
    const auto fit = speeds.prefill_fit();
    AdmissionDecision out = RouteOrShed(
        r, ClampRetry(c, late_ms / 1000.0),
        Fmt("predicted ttft %.1f ms > budget %.1f ms%s (%d queued requests with %lld prompt "
            "tokens, %lld running prefill tokens, %d decoding with %lld tokens left, %d of "
            "%d running slots taken, %.0f ms left in the step; a step costs %.2f ms + "
            "%.4f ms/token; service x %.2f measured correction x %.2f margin)",
            *d.predicted.ttft_ms, budget_ms,
            d.below_floor ? kFloorBudgetNote : "",
            r.load.queued_requests,
            static_cast<long long>(r.load.queued_prefill_tokens),
            static_cast<long long>(r.load.running_prefill_tokens), r.load.running_decodes,
            static_cast<long long>(r.load.running_decode_tokens_left),
            r.load.running_sequences, r.load.max_running, r.load.step_left_ms, fit->fixed_ms,
            fit->per_token_ms, r.prediction_correction, MarginOf(c, r)));
    out.predicted = d.predicted;
    out.below_floor = d.below_floor;
    out.floor_ms = d.floor_ms;
    out.floor_budget_ms = d.floor_budget_ms;
    return out;
  } else {
    d.reason = d.predicted.ttft_ms ? Fmt("predicted ttft %.1f ms within budget %.1f ms%s",
                                         *d.predicted.ttft_ms, budget_ms,
                                         d.below_floor ? kFloorBudgetNote : "")
                                   : std::string("no speed fit yet");
  }
  if (level >= Level::kTruncate) ApplyTruncation(c, r, speeds, &d);
  d.trim_context = level >= Level::kTrimContext && r.budget.allow_context_trim;
  return d;
}

void OutcomeCounters::Count(std::string_view slo_class, std::string_view model,
                            std::string_view outcome) {
  std::lock_guard lock(mu_);
  ++counts_[{std::string(slo_class), std::string(model), std::string(outcome)}];
}

std::string_view OutcomeCounters::OutcomeOf(const AdmissionDecision& d) {
  switch (d.action) {
    case Action::kAdmit: return "admitted";
    case Action::kRoute: return "routed";
    // The labels name the status each becomes (api/errors.h), as documented in docs/slo.md.
    case Action::kShed: return d.shed_cause == ShedCause::kNotReady ? "shed_503" : "shed_429";
    case Action::kRefuse: return "refused_deadline";
  }
  return "?";
}

std::vector<OutcomeCount> OutcomeCounters::Snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<OutcomeCount> out;
  for (const auto& [k, n] : counts_) {
    out.push_back(OutcomeCount{std::get<0>(k), std::get<1>(k), std::get<2>(k), n});
  }
  return out;
}

}  // namespace lifeline::slo
