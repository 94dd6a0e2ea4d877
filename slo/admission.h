// Predictive admission: on arrival, estimate the request's TTFT from the work ahead of it on
// the model and the measured step speed, and decide at once whether to admit it, route it to
// the next (lighter) cascade member, or shed it (429 / 503 with Retry-After) -- a request
// that cannot meet its deadline is answered now, not after it has missed.
//
//   prefill_tokens    = queued (not yet scheduled) prompt tokens + the remaining prefill
//                       tokens of running sequences (partly prefilled, or preempted and to be
//                       recomputed) + the request's own prompt
//   steps             = ceil(prefill_tokens / max(1, step_token_budget - decoding)) (1 when
//                       the budget is unknown): the prefill is chunked under the step token
//                       budget, and every one of those steps also carries one token of each
//                       decoding sequence
//   service_ms        = step_left_ms + (prefill_tokens + steps x decoding) x 1000 / step_tps
//   predicted_ttft_ms = elapsed_ms + prediction_margin x margin_scale x service_ms
//                       (margin_scale: the controller's per-class correction, >= 1, raised
//                       while the class's TTFT P95 is over target; see AdmissionParams)
//   predicted_e2e_ms  = predicted_ttft_ms + (max_tokens - 1) x decode_ms_per_token
//
// step_tps is measured on steps that carry prefill, counting all their tokens (decodes are
// rows of the same matrix products), so the decode tokens of mixed steps are not counted
// twice. step_left_ms is the estimated time left in the step being computed at arrival.
//
// Decide() applies, in order: model not ready (route, else 503); ladder level shed (429);
// level cascade on the first hop (route); the model's bounded queue (route, else 429);
// predicted TTFT over the TTFT budget (route, else 429 -- except a probe, below); otherwise
// admit, with the ladder's caps: level >= truncate caps max_tokens (ladder.truncate_max_tokens,
// and what fits the e2e budget at the measured decode speed) and stops at the deadline; level
// >= trim_context trims optional context when the request allows it. Without speed
// measurements yet there is no prediction, and only the queue bounds apply. A routed request
// is decided again against the next member's queue with cascade_hops + 1.
//
// Stale estimates: a model that admission routes everything away from gets no new
// measurements, so a pessimistic estimate (a slow cold first request) would stick. After
// admission.speed_stale_ms without a measurement the estimate is stale: a request predicted
// to miss is admitted anyway as a probe (probe_due; at most one per speed_stale_ms, claimed
// with SpeedEstimator::TryClaimProbe), and the next measurement replaces the stale average
// instead of blending into it.
//
// Ownership: SpeedEstimator owns atomics; the rest are values. Thread-safety: SpeedEstimator
// has one writer of measurements (the engine thread), any number of readers, and
// TryClaimProbe may race from any thread (one winner); Decide and Predict are pure;
// OutcomeCounters takes a mutex. Failure: none (decisions, not errors).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "slo/controller.h"
#include "slo/slo_config.h"

namespace lifeline::slo {

class SpeedEstimator {
 public:
  // `stale_after_ms` <= 0: estimates never go stale (no probes, EWMA always blends).
  explicit SpeedEstimator(double ewma_alpha = 0.2, int64_t stale_after_ms = 5000)
      : alpha_(ewma_alpha), stale_after_us_(stale_after_ms * 1000) {}

  // A step with prefill: `tokens` step tokens (prefill chunks and the decodes riding along)
  // computed in `elapsed_ms`, at `now_us`. Non-positive inputs are ignored. The first
  // observation, or the first after the estimate went stale, seeds the average.
  void ObservePrefill(int64_t tokens, double elapsed_ms, int64_t now_us);
  // One decode step's time (the time per generated token of each sequence in it).
  void ObserveDecode(double ms_per_token, int64_t now_us);

  std::optional<double> prefill_tokens_per_s() const;  // none before the first observation
  std::optional<double> decode_ms_per_token() const;

  // The prefill estimate exists and neither a measurement nor a probe came for
  // stale_after_ms.
  bool Stale(int64_t now_us) const;
  // Claims the probe of this stale period: true for exactly one caller until the next
  // measurement or stale_after_ms more.
  bool TryClaimProbe(int64_t now_us);

 private:
  void Update(std::atomic<double>* avg, std::atomic<int64_t>* last_us, double sample,
              int64_t now_us);
  double alpha_;
  int64_t stale_after_us_;
  std::atomic<double> prefill_tps_{0};  // 0: no measurement yet
  std::atomic<double> decode_ms_{0};
  std::atomic<int64_t> prefill_at_us_{0};  // last prefill measurement
  std::atomic<int64_t> decode_at_us_{0};
  std::atomic<int64_t> probe_at_us_{0};    // last probe claimed
};

// The work on a model ahead of a new request, as its engine publishes it.
struct QueueLoad {
  int32_t queued_requests = 0;        // waiting on the model, ahead of this request
  int64_t queued_prefill_tokens = 0;  // prompt tokens of those, none scheduled yet
  int64_t running_prefill_tokens = 0; // started sequences' prefill (or recompute) tokens left
  int32_t running_decodes = 0;        // sequences decoding: one token in every step
  double step_left_ms = 0;            // estimated time left in the step being computed
  int64_t step_token_budget = 0;      // tokens per step (0: unknown, no chunking)
};

struct Prediction {
  std::optional<double> ttft_ms;  // needs the prefill speed
  std::optional<double> e2e_ms;   // needs both speeds
};
// The formulas above. `margin` multiplies the service time (not elapsed_ms).
Prediction Predict(const SpeedEstimator& speeds, const QueueLoad& load, int64_t prompt_tokens,
                   int64_t max_tokens, double elapsed_ms, double margin = 1.0);

struct AdmissionRequest {
  RequestBudget budget;
  Level level = Level::kNormal;       // the class's level (Knobs::LevelOf)
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  double elapsed_ms = 0;              // since arrival (reading, parsing, tokenizing)
  QueueLoad load;                     // of the model it would run on
  int32_t max_queue_requests = 256;   // that model's bounds (ModelEntry)
  int64_t max_queue_tokens = 1 << 20;
  bool model_ready = true;
  bool has_next_model = false;        // SloConfig::NextInCascade(model) != nullptr
  int32_t cascade_hops = 0;           // times this request was already routed
  bool probe_due = false;             // the model's speed estimate is stale (Stale(now))
  double margin_scale = 1.0;          // the class's closed-loop scale (Knobs::MarginScaleOf)
};

enum class Action : uint8_t { kAdmit, kRoute, kShed };
std::string_view ActionName(Action a);  // "admit", "route", "shed"

struct AdmissionDecision {
  Action action = Action::kAdmit;
  int32_t http_status = 0;    // kShed: 429, or 503 when the model is not ready
  int32_t retry_after_s = 0;  // kShed: in [1, admission.max_retry_after_s]
  std::optional<int64_t> max_tokens_cap;  // kAdmit at level >= truncate, when below max_tokens
  bool stop_at_deadline = false;          // kAdmit at level >= truncate with an e2e budget
  bool trim_context = false;              // kAdmit at level >= trim_context, request allows
  // kAdmit although predicted to miss: a probe of a stale estimate. The caller must win
  // SpeedEstimator::TryClaimProbe, else decide again with probe_due = false.
  bool probe = false;
  Prediction predicted;
  std::string reason;  // why (for logs, the `lifeline` extension object and error bodies)
};

AdmissionDecision Decide(const SloConfig& config, const AdmissionRequest& request,
                         const SpeedEstimator& speeds);

// Counters of requests by (class, model, outcome) for /metrics, e.g. outcome "admitted",
// "routed", "shed_429", "shed_503", "truncated", "deadline".
struct OutcomeCount {
  std::string slo_class;
  std::string model;
  std::string outcome;
  uint64_t count = 0;
};

class OutcomeCounters {
 public:
  void Count(std::string_view slo_class, std::string_view model, std::string_view outcome);
  // The outcome name of a decision: "admitted", "routed", "shed_429" or "shed_503".
  static std::string_view OutcomeOf(const AdmissionDecision& d);
  std::vector<OutcomeCount> Snapshot() const;  // sorted by (class, model, outcome)

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> counts_;
};

}  // namespace lifeline::slo
