#include "slo/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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

AdmissionDecision Shed(int32_t status, int32_t retry_after_s, std::string reason) {
  AdmissionDecision d;
  d.action = Action::kShed;
  d.http_status = status;
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

// Route down the cascade when there is a lighter member, else shed with 429.
AdmissionDecision RouteOrShed(const AdmissionRequest& r, int32_t retry_after_s,
                              std::string reason) {
  if (r.has_next_model) return Route(std::move(reason));
  return Shed(429, retry_after_s, std::move(reason));
}

// The caps of an admitted request at level >= truncate.
void ApplyTruncation(const SloConfig& c, const AdmissionRequest& r,
                     const SpeedEstimator& speeds, AdmissionDecision* d) {
  int64_t cap = c.ladder.truncate_max_tokens;
  const auto decode_ms = speeds.decode_ms_per_token();
  if (r.budget.e2e_budget_ms) {
    d->stop_at_deadline = true;
    if (decode_ms && d->predicted.ttft_ms) {
      // The first token comes with the prefill; each further one costs decode_ms.
      const double left_ms = *r.budget.e2e_budget_ms - *d->predicted.ttft_ms;
      const auto fit = 1 + static_cast<int64_t>(std::floor(std::max(0.0, left_ms) / *decode_ms));
      cap = std::min(cap, fit);
    }
  }
  if (cap < r.max_tokens) d->max_tokens_cap = cap;
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
  Update(&prefill_tps_, &prefill_at_us_, static_cast<double>(tokens) * 1000.0 / elapsed_ms,
         now_us);
}

void SpeedEstimator::ObserveDecode(double ms_per_token, int64_t now_us) {
  if (!(ms_per_token > 0) || !std::isfinite(ms_per_token)) return;
  Update(&decode_ms_, &decode_at_us_, ms_per_token, now_us);
}

std::optional<double> SpeedEstimator::prefill_tokens_per_s() const {
  const double v = prefill_tps_.load(std::memory_order_relaxed);
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> SpeedEstimator::decode_ms_per_token() const {
  const double v = decode_ms_.load(std::memory_order_relaxed);
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

bool SpeedEstimator::Stale(int64_t now_us) const {
  if (stale_after_us_ <= 0 || !prefill_tokens_per_s()) return false;
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

Prediction Predict(const SpeedEstimator& speeds, const QueueLoad& load, int64_t prompt_tokens,
                   int64_t max_tokens, double elapsed_ms, double margin) {
  Prediction p;
  const auto tps = speeds.prefill_tokens_per_s();
  if (!tps) return p;
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
  const double service_ms = std::max(0.0, load.step_left_ms) + tokens * 1000.0 / *tps;
  p.ttft_ms = elapsed_ms + std::max(1.0, margin) * service_ms;
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
  }
  return "?";
}

AdmissionDecision Decide(const SloConfig& c, const AdmissionRequest& r,
                         const SpeedEstimator& speeds) {
  const char* cls = r.budget.slo_class.c_str();
  if (!r.model_ready) {
    if (r.has_next_model) return Route("model not ready");
    return Shed(503, c.admission.not_ready_retry_after_s, "model not ready");
  }
  if (r.level >= Level::kShed) {
    return Shed(429, ClampRetry(c, c.ladder.min_dwell_ms / 1000.0),
                Fmt("class %s at degradation level shed", cls));
  }
  if (r.level >= Level::kCascade && r.cascade_hops == 0 && r.has_next_model) {
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
  AdmissionDecision d;
  d.predicted = Predict(speeds, r.load, r.prompt_tokens, r.max_tokens, r.elapsed_ms,
                        c.admission.prediction_margin * std::max(1.0, r.margin_scale));
  const bool late = c.admission.predictive && d.predicted.ttft_ms &&
                    *d.predicted.ttft_ms > r.budget.ttft_budget_ms;
  if (late && r.probe_due) {
    // The estimate behind "late" is stale: let this one through to measure the model again.
    d.probe = true;
    d.reason = Fmt("probe: stale speed estimate (predicted ttft %.1f ms > budget %.1f ms)",
                   *d.predicted.ttft_ms, r.budget.ttft_budget_ms);
  } else if (late) {
    const double late_ms = *d.predicted.ttft_ms - r.budget.ttft_budget_ms;
    AdmissionDecision out = RouteOrShed(
        r, ClampRetry(c, late_ms / 1000.0),
        Fmt("predicted ttft %.1f ms > budget %.1f ms (%lld queued + %lld running prefill "
            "tokens, %d decoding, %.0f ms left in the step, at %.0f tokens/s)",
            *d.predicted.ttft_ms, r.budget.ttft_budget_ms,
            static_cast<long long>(r.load.queued_prefill_tokens),
            static_cast<long long>(r.load.running_prefill_tokens), r.load.running_decodes,
            r.load.step_left_ms, *tps));
    out.predicted = d.predicted;
    return out;
  } else {
    d.reason = d.predicted.ttft_ms ? Fmt("predicted ttft %.1f ms within budget %.1f ms",
                                         *d.predicted.ttft_ms, r.budget.ttft_budget_ms)
                                   : std::string("no speed measurements yet");
  }
  if (r.level >= Level::kTruncate) ApplyTruncation(c, r, speeds, &d);
  d.trim_context = r.level >= Level::kTrimContext && r.budget.allow_context_trim;
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
    case Action::kShed: return d.http_status == 503 ? "shed_503" : "shed_429";
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
