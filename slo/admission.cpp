#include "slo/admission.h"

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

void SpeedEstimator::Update(std::atomic<double>* avg, double sample, double alpha) {
  // One writer: a plain load/store pair is enough; readers see either value.
  const double old = avg->load(std::memory_order_relaxed);
  avg->store(old == 0 ? sample : alpha * sample + (1 - alpha) * old, std::memory_order_relaxed);
}

void SpeedEstimator::ObservePrefill(int64_t tokens, double elapsed_ms) {
  if (tokens <= 0 || !(elapsed_ms > 0) || !std::isfinite(elapsed_ms)) return;
  Update(&prefill_tps_, static_cast<double>(tokens) * 1000.0 / elapsed_ms, alpha_);
}

void SpeedEstimator::ObserveDecode(double ms_per_token) {
  if (!(ms_per_token > 0) || !std::isfinite(ms_per_token)) return;
  Update(&decode_ms_, ms_per_token, alpha_);
}

std::optional<double> SpeedEstimator::prefill_tokens_per_s() const {
  const double v = prefill_tps_.load(std::memory_order_relaxed);
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> SpeedEstimator::decode_ms_per_token() const {
  const double v = decode_ms_.load(std::memory_order_relaxed);
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

Prediction Predict(const SpeedEstimator& speeds, int64_t prefill_tokens_ahead,
                   int64_t prompt_tokens, int64_t max_tokens, double elapsed_ms) {
  Prediction p;
  const auto tps = speeds.prefill_tokens_per_s();
  if (!tps) return p;
  const double tokens = static_cast<double>(std::max<int64_t>(0, prefill_tokens_ahead) +
                                            std::max<int64_t>(0, prompt_tokens));
  p.ttft_ms = elapsed_ms + tokens * 1000.0 / *tps;
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
  d.predicted = Predict(speeds, r.load.queued_prefill_tokens, r.prompt_tokens, r.max_tokens,
                        r.elapsed_ms);
  if (c.admission.predictive && d.predicted.ttft_ms &&
      *d.predicted.ttft_ms > r.budget.ttft_budget_ms) {
    const double late_ms = *d.predicted.ttft_ms - r.budget.ttft_budget_ms;
    AdmissionDecision out = RouteOrShed(
        r, ClampRetry(c, late_ms / 1000.0),
        Fmt("predicted ttft %.1f ms > budget %.1f ms (%lld prefill tokens ahead at %.0f tokens/s)",
            *d.predicted.ttft_ms, r.budget.ttft_budget_ms,
            static_cast<long long>(r.load.queued_prefill_tokens), *tps));
    out.predicted = d.predicted;
    return out;
  }
  d.reason = d.predicted.ttft_ms ? Fmt("predicted ttft %.1f ms within budget %.1f ms",
                                       *d.predicted.ttft_ms, r.budget.ttft_budget_ms)
                                 : std::string("no speed measurements yet");
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
