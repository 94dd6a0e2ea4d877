// Predictive admission: on arrival, estimate the request's TTFT from the prefill work queued
// ahead of it and the measured prefill speed, and decide at once whether to admit it, route
// it to the next (lighter) cascade member, or shed it (429 / 503 with Retry-After) -- a
// request that cannot meet its deadline is answered now, not after it has missed.
//
//   predicted_ttft_ms = elapsed_ms + (prefill_tokens_ahead + prompt_tokens) * 1000 / prefill_tps
//   predicted_e2e_ms  = predicted_ttft_ms + (max_tokens - 1) * decode_ms_per_token
//
// Decide() applies, in order: model not ready (route, else 503); ladder level shed (429);
// level cascade on the first hop (route); the model's bounded queue (route, else 429);
// predicted TTFT over the TTFT budget (route, else 429); otherwise admit, with the ladder's
// caps: level >= truncate caps max_tokens (ladder.truncate_max_tokens, and what fits the
// e2e budget at the measured decode speed) and stops at the deadline; level >= trim_context
// trims optional context when the request allows it. Without speed measurements yet there is
// no prediction, and only the queue bounds apply. A routed request is decided again against
// the next member's queue with cascade_hops + 1.
//
// Ownership: SpeedEstimator owns two atomics; the rest are values. Thread-safety:
// SpeedEstimator has one writer (the engine thread) and any number of readers; Decide and
// Predict are pure; OutcomeCounters takes a mutex. Failure: none (decisions, not errors).
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
  explicit SpeedEstimator(double ewma_alpha = 0.2) : alpha_(ewma_alpha) {}

  // A step's prefill share: `tokens` prompt tokens computed in `elapsed_ms`. Non-positive
  // inputs are ignored. The first observation seeds the average.
  void ObservePrefill(int64_t tokens, double elapsed_ms);
  // One decode step's time per generated token.
  void ObserveDecode(double ms_per_token);

  std::optional<double> prefill_tokens_per_s() const;  // none before the first observation
  std::optional<double> decode_ms_per_token() const;

 private:
  static void Update(std::atomic<double>* avg, double sample, double alpha);
  double alpha_;
  std::atomic<double> prefill_tps_{0};  // 0: no measurement yet
  std::atomic<double> decode_ms_{0};
};

struct Prediction {
  std::optional<double> ttft_ms;  // needs the prefill speed
  std::optional<double> e2e_ms;   // needs both speeds
};
Prediction Predict(const SpeedEstimator& speeds, int64_t prefill_tokens_ahead,
                   int64_t prompt_tokens, int64_t max_tokens, double elapsed_ms);

struct QueueLoad {
  int32_t queued_requests = 0;        // waiting on the model, ahead of this request
  int64_t queued_prefill_tokens = 0;  // prompt tokens still to prefill ahead of it
};

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
