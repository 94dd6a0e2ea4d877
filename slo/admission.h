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
//   service_ms        = step_left_ms + steps x fixed_ms
//                       + (prefill_tokens + steps x decoding) x per_token_ms
//   slot_wait         = when every running slot is taken (max_running) and the request is
//                       not among the first queued to get one: the decode steps until `need`
//                       = queued + 1 - free slots sequences finish (their tokens left taken
//                       as spread evenly over [min, 2 x mean - min]; each round of slots past
//                       the running set adds the queued requests' mean max_tokens, or the
//                       longest running one when unknown), then its own prefill; service_ms
//                       is the larger of the two (the queued prefill runs in the same steps)
//   predicted_ttft_ms = elapsed_ms + margin x margin_scale x correction x service_ms
//                       (margin: the 95th percentile of the model's measured / predicted
//                       ratios once 20 were checked, else admission.prediction_margin;
//                       correction: the model's PredictionAudit)
//                       (margin_scale: the controller's per-class correction, >= 1, raised
//                       while the class's TTFT P95 is over target; see AdmissionParams)
//   predicted_e2e_ms  = predicted_ttft_ms + (max_tokens - 1) x decode_ms_per_token
//
// A step's cost is fitted as fixed_ms + per_token_ms x step tokens over steps of several
// sizes (SpeedEstimator: one running average per power-of-two size, least squares over
// them), so a small first request, whose time is mostly the fixed part, is not extrapolated
// to long prompts as if every token cost what its few tokens did. Step tokens count every
// token of a step with prefill (decodes are rows of the same matrix products), so the decode
// tokens of mixed steps are not counted twice. step_left_ms is the estimated time left in the
// step being computed at arrival.
//
// Decide() applies, in order: model not ready (route, else 503); ladder level shed (route
// to a lighter member, else 429) --
// not on an idle model (nothing queued or running: a refusal frees nothing, so it is treated
// as the cascade level); level cascade on the first hop (route); the model's bounded queue
// (route, else 429); an
// explicit deadline_ms that the request could not meet even alone on an idle model (its
// elapsed time, or elapsed + its own prefill at the fitted speed, past the deadline: 400,
// not retryable); predicted TTFT over the TTFT budget (route, else 429 -- except a probe,
// below, and an idle model: with nothing queued or running, refusing helps nobody, so the
// request is routed to a lighter member when there is one and admitted otherwise);
// otherwise admit, with the ladder's caps: level >= truncate caps max_tokens
// (ladder.truncate_max_tokens, and what fits the e2e budget at the measured decode speed,
// never below ladder.truncate_min_tokens) and stops at the deadline; level >= trim_context
// trims optional context when the request allows it. Without a fit yet (fewer than two step
// sizes a factor 2 apart) there is no prediction, and only the queue bounds apply. A routed
// request is decided again against the next member's queue with cascade_hops + 1.
//
// Stale estimates: a model that admission routes everything away from gets no new
// measurements, so a pessimistic estimate (a slow cold first request) would stick. After
// admission.speed_stale_ms without a measurement the estimate is stale: a request predicted
// to miss is admitted anyway as a probe (probe_due; at most one per speed_stale_ms, claimed
// with SpeedEstimator::TryClaimProbe), and the next measurement rescales the whole fit by
// its ratio to the stale prediction instead of blending into one size's average.
//
// Ownership: SpeedEstimator owns atomics and its size classes (under a mutex); the rest are
// values. Thread-safety: SpeedEstimator has one writer of measurements (the engine thread),
// any number of readers, and
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
  // `stale_after_ms` <= 0: estimates never go stale (no probes, averages always blend).
  explicit SpeedEstimator(double ewma_alpha = 0.2, int64_t stale_after_ms = 5000)
      : alpha_(ewma_alpha), stale_after_us_(stale_after_ms * 1000) {}

  // A step with prefill: `tokens` step tokens (prefill chunks and the decodes riding along)
  // computed in `elapsed_ms`, at `now_us`. Non-positive inputs are ignored. It blends into
  // the average of its power-of-two size class (the first one of a class seeds it); the
  // first after the estimate went stale rescales every class by its ratio to the fit.
  void ObservePrefill(int64_t tokens, double elapsed_ms, int64_t now_us);
  // One decode step's time (the time per generated token of each sequence in it).
  void ObserveDecode(double ms_per_token, int64_t now_us);

  // A prefill step of n tokens costs fixed_ms + per_token_ms x n (least squares over the
  // size classes' averages; both >= 0). None until two classes whose average sizes are at
  // least a factor 2 apart have been measured.
  struct PrefillFit {
    double fixed_ms = 0;
    double per_token_ms = 0;
  };
  std::optional<PrefillFit> prefill_fit() const;
  std::optional<double> PrefillMs(int64_t tokens) const;   // the fit at `tokens`
  std::optional<double> prefill_tokens_per_s() const;      // marginal: 1000 / per_token_ms
  std::optional<double> decode_ms_per_token() const;

  // A prefill estimate exists and neither a measurement nor a probe came for
  // stale_after_ms.
  bool Stale(int64_t now_us) const;
  // Claims the probe of this stale period: true for exactly one caller until the next
  // measurement or stale_after_ms more.
  bool TryClaimProbe(int64_t now_us);

 private:
  static constexpr int kSizeClasses = 32;  // class k: step sizes in [2^k, 2^(k+1))
  struct SizeClass {
    double tokens = 0;  // running average of the step sizes seen
    double ms = 0;      // running average of their times
    bool seen = false;
  };
  std::optional<PrefillFit> FitLocked() const;
  void Update(std::atomic<double>* avg, std::atomic<int64_t>* last_us, double sample,
              int64_t now_us);
  double alpha_;
  int64_t stale_after_us_;
  mutable std::mutex mu_;                 // guards classes_
  SizeClass classes_[kSizeClasses];
  std::atomic<bool> has_prefill_{false};  // some class seen
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
  // Running slots: a queued request starts only when one frees (0: unknown, no slot wait).
  int32_t max_running = 0;
  int32_t running_sequences = 0;      // sequences holding a slot (prefilling or decoding)
  // Tokens the decoding sequences may still generate (their max_tokens left): summed, and
  // the fewest any of them has left.
  int64_t running_decode_tokens_left = 0;
  int64_t running_decode_min_left = 0;
  // The queued requests' max_tokens, summed (0: unknown): how long each holds a slot once it
  // has one, for the rounds of slots past the running set.
  int64_t queued_decode_tokens = 0;
  // Moving average of the time between consecutive steps with decodes: a running sequence's
  // time per token under the current load (0: unknown; the decode speed is used instead).
  double decode_interval_ms = 0;
  // Accepted requests not yet ended, counted exactly (the fields above are per-step
  // snapshots and may lag a step); < 0: unknown, idleness is judged from the fields above.
  int64_t open_requests = -1;
};

struct Prediction {
  std::optional<double> ttft_ms;  // needs the prefill fit
  std::optional<double> e2e_ms;   // needs the fit and the decode speed
  // The service time as the formulas give it, before correction and margin: what the
  // PredictionAudit compares with the measured time from the decision to the first token.
  std::optional<double> raw_service_ms;
};
// The formulas above. The service time is multiplied by `correction` (PredictionAudit) and
// `margin` (not elapsed_ms).
Prediction Predict(const SpeedEstimator& speeds, const QueueLoad& load, int64_t prompt_tokens,
                   int64_t max_tokens, double elapsed_ms, double margin = 1.0,
                   double correction = 1.0);

struct AdmissionRequest {
  RequestBudget budget;
  Level level = Level::kNormal;       // the (class, model) level (Knobs::LevelOf)
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
  // The floor rule applies (admission.cpp): a request whose budget it misses even alone is
  // judged against that floor. The server sets it for embeddings and reranking, whose class
  // targets a model may simply be too slow for; generation keeps the shed-early promise (a
  // long prompt that cannot make its budget is refused while the model is busy).
  bool floor_rule = false;
  double margin_scale = 1.0;          // the (class, model) closed-loop scale (Knobs::MarginScaleOf)
  double prediction_correction = 1.0; // the model's PredictionAudit::correction()
  // The model's PredictionAudit::spread_q95() (0: not yet measured): replaces the fixed
  // admission.prediction_margin, never below 1.
  double prediction_spread = 0;
};

// kShed: load (or a model not ready) that may pass; the client may retry after
// retry_after_s. kRefuse: the request cannot be served as asked (an unreachable
// deadline_ms), which a client must not retry unchanged. Which HTTP status each becomes is
// the server's choice (api/errors.h), not admission's.
enum class Action : uint8_t { kAdmit, kRoute, kShed, kRefuse };
// Why a request was shed: the class's or the queue's load, or the model not being ready.
enum class ShedCause : uint8_t { kNone, kLoad, kNotReady };
std::string_view ActionName(Action a);  // "admit", "route", "shed", "refuse"

struct AdmissionDecision {
  Action action = Action::kAdmit;
  ShedCause shed_cause = ShedCause::kNone;  // kShed only
  int32_t retry_after_s = 0;  // kShed: in [1, admission.max_retry_after_s]
  std::optional<int64_t> max_tokens_cap;  // kAdmit at level >= truncate, when below max_tokens
  bool stop_at_deadline = false;          // kAdmit at level >= truncate with an e2e budget
  bool trim_context = false;              // kAdmit at level >= trim_context, request allows
  std::string cap_reason;                 // with max_tokens_cap: what set the cap
  // kAdmit although predicted to miss: a probe of a stale estimate. The caller must win
  // SpeedEstimator::TryClaimProbe, else decide again with probe_due = false.
  bool probe = false;
  // The class budget is below what the request needs alone on an idle model (its floor): it
  // was judged against floor + budget instead (a refusal cannot help it meet the budget).
  bool below_floor = false;
  // With below_floor: what it needs alone as the measured correction expects it, without the
  // margin (what the tracker's floor averages: LatencyTracker::RecordFloor).
  std::optional<double> floor_ms;
  // With below_floor: the TTFT budget it was judged against (floor + the longer of the class
  // budget and the floor); a queued request's lateness is judged against it too.
  std::optional<double> floor_budget_ms;
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
  // The outcome name of a decision: "admitted", "routed", "shed_429", "shed_503" or
  // "refused_deadline".
  static std::string_view OutcomeOf(const AdmissionDecision& d);
  std::vector<OutcomeCount> Snapshot() const;  // sorted by (class, model, outcome)

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> counts_;
};

}  // namespace lifeline::slo
