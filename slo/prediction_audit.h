// Holds admission's TTFT predictions to account, per model (docs/slo.md, "A predictor held to
// account"). Every admitted request's predicted service time -- its predicted TTFT minus the
// time already elapsed when admission decided, before the margin -- is compared with the one
// measured at its first token. The ratio measured / predicted:
//   - feeds a correction that admission multiplies its predictions by: the exponentially
//     weighted mean of log(measured / raw prediction), so a predictor that runs 10x high or
//     low is corrected within a few requests (alpha 0.4: after 4 requests at 10x the factor
//     is 8x) instead of persisting until the speed estimate goes stale;
//   - is kept as the error of the predictions as they were made (with the correction then in
//     force), in a ring of the latest ratios (quantiles for /v1/slo) and cumulative buckets
//     (the `lifeline_admission_prediction_ratio` histogram in /metrics).
// The 95th percentile of the recent ratios is the spread admission uses as its margin (the
// predictions are means; the budget is a P95).
// A model whose predictions have gone unchecked for `stale_after_ms` (everything was routed
// or shed on them) lets one request through as a probe (TryClaimProbe), so an estimate that
// sheds everything is checked again at most that long after.
//
// Ownership: value state under a mutex. Thread-safety: every method may be called from any
// thread. Failure: none; non-finite or non-positive inputs are ignored.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace lifeline::slo {

class PredictionAudit {
 public:
  // Ratio bucket bounds of the cumulative histogram (measured / predicted).
  static std::span<const double> RatioBounds();
  static constexpr size_t kRecent = 256;  // ratios kept for quantiles

  explicit PredictionAudit(double alpha = 0.4, double max_correction = 20.0,
                           int64_t stale_after_ms = 5000)
      : alpha_(alpha), max_correction_(max_correction), stale_after_us_(stale_after_ms * 1000) {}

  // One admitted request at its first token: `raw_predicted_ms` is the service time the
  // predictor gave (no margin, no correction), `correction` the factor in force when it was
  // admitted, `measured_ms` the time from the decision to the first token.
  void Observe(double raw_predicted_ms, double correction, double measured_ms, int64_t now_us);

  // The factor admission multiplies raw predictions by, in [1 / max_correction, max_correction].
  double correction() const { return correction_.load(std::memory_order_relaxed); }
  // The 95th percentile of the latest ratios measured / predicted-as-made (the spread around
  // the corrected prediction), once at least kMinSpreadSamples were checked; 0 before. A
  // request admitted when elapsed + raw x correction x spread fits its budget meets it with
  // about 95 % probability: admission's margin (AdmissionRequest::prediction_spread).
  static constexpr size_t kMinSpreadSamples = 20;
  double spread_q95() const { return spread_q95_.load(std::memory_order_relaxed); }

  // No observation for stale_after_ms (and at least one prediction is being made): claims the
  // probe of this stale period, true for one caller per period.
  bool TryClaimProbe(int64_t now_us);
  bool Stale(int64_t now_us) const;

  struct Stats {
    uint64_t count = 0;             // observations ever
    double correction = 1.0;
    double last_ratio = 0;          // measured / predicted-as-used of the newest
    // Over the latest kRecent ratios (measured / predicted as used): 0 when none.
    uint64_t recent = 0;
    double p10 = 0, p50 = 0, p90 = 0;
    double within_25pct = 0;        // share of them in [0.8, 1.25]
    std::vector<uint64_t> buckets;  // per RatioBounds() bucket (not cumulative), then +Inf
    double sum = 0;                 // of the ratios ever observed
  };
  Stats Snapshot() const;

 private:
  double alpha_;
  double max_correction_;
  int64_t stale_after_us_;
  std::atomic<double> correction_{1.0};
  std::atomic<double> spread_q95_{0.0};
  std::atomic<int64_t> last_us_{0};   // last observation (0: none yet)
  std::atomic<int64_t> probe_us_{0};  // last probe claimed
  mutable std::mutex mu_;
  double log_mean_ = 0;  // EWMA of log(measured / raw prediction)
  uint64_t count_ = 0;
  double last_ratio_ = 0;
  double sum_ = 0;
  std::vector<double> recent_;  // ring of the latest ratios
  size_t recent_next_ = 0;
  std::vector<uint64_t> buckets_;  // per RatioBounds() plus +Inf
};

}  // namespace lifeline::slo
