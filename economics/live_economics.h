// Latency economics, live: the server learns each SLO class's cliff from its own traffic and
// from the outcomes the application posts (docs/economics.md).
//
// Every finished request enters a bounded window (the last `window_requests`, FIFO): its id,
// session, class, the wait its user saw (TTFT, or for a request that got no token, how long
// its client waited) and whether its client hung up. Requests answered in full or left by
// their client are the samples of a fit (refusals, errors and shutdowns say nothing of a
// user's patience, as in `analyze threshold` on a request log); every request can be joined
// by an outcome. POST /v1/outcomes joins events by request id or by session (the session's
// latest request): `abandoned` / `completed` override the disconnect signal (the application
// knows), `clicked` / `converted` are counted per latency bin.
//
// On a schedule (`refit_interval_ms`, on a thread of its own at low priority) RefitNow copies
// each class's samples within the horizon and runs the same breakpoint search as `analyze
// threshold` (analysis/threshold.h: segmented logistic regression, parametric-bootstrap
// p-value, bootstrap interval) on them, outside the lock. GET /v1/economics returns the
// latest estimate per class with its interval, sample counts, binned rates and the class's
// latency target beside it.
//
// Ownership: owns its window and estimates; the refit thread is joined by the destructor.
// Thread-safety: EconomicsApi methods from any thread (one mutex; a refit holds it only to
// copy the samples and to publish). Time comes from `now_ms` (tests inject a fake clock and
// call RefitNow themselves). Failure: none; a fit that cannot run says why in its class.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/outcomes.h"
#include "slo/autotune.h"

namespace lifeline::economics {

struct EconomicsOptions {
  int64_t window_requests = 50'000;   // finished requests kept for joins and fits
  int64_t horizon_ms = 3'600'000;     // samples that ended longer ago are left out of a fit
  int64_t refit_interval_ms = 300'000;  // 0 = no refit thread (RefitNow only)
  int64_t min_samples = 400;          // per class before a fit is tried
  int bootstrap = 200;                // interval replicates
  int null_replicates = 199;          // p-value replicates
  double alpha = 0.01;
  int bins = 20;                      // equal-count latency bins in the JSON
  std::function<int64_t()> now_ms;    // unix ms; default the system clock
  // The class's latency target in force (its TTFT P95, else its e2e P95), shown beside the cliff.
  std::function<std::optional<double>(const std::string& slo_class)> target_ms;
  // After each refit, on the refit thread: every class's estimate (the autotuner's input).
  std::function<void(const std::vector<slo::CliffEstimate>&, int64_t now_unix_ms)> on_refit;
  // Embedded as "autotune" in the JSON (the autotuner's targets and moves); null when unset.
  std::function<nlohmann::json()> autotune_json;
};

class LiveEconomics final : public api::EconomicsApi {
 public:
  explicit LiveEconomics(EconomicsOptions options);
  ~LiveEconomics() override;
  LiveEconomics(const LiveEconomics&) = delete;
  LiveEconomics& operator=(const LiveEconomics&) = delete;

  // Starts the refit thread (when refit_interval_ms > 0).
  void Start();
  // One refit of every class, on the calling thread.
  void RefitNow();

  void OnFinished(const api::RequestLogEntry& entry) override;
  api::OutcomesResult PostOutcomes(const std::vector<api::OutcomeEvent>& events) override;
  nlohmann::json EconomicsJson() const override;
  std::string MetricsText() const override;

 private:
  struct Request {
    std::string id, session, slo_class;
    double wait_ms = 0;
    int64_t end_ms = 0;
    bool sample = false;        // completed, or its client left
    bool disconnected = false;
    int8_t posted = -1;         // -1: no abandoned / completed posted; 1 abandoned; 0 completed
    bool clicked = false, converted = false;
  };
  struct Bin {
    double lo_ms = 0, hi_ms = 0;
    int64_t n = 0, abandoned = 0, clicked = 0, converted = 0;
  };
  struct Estimate {
    int64_t samples = 0, abandoned = 0;
    std::string status;  // found | no_cliff | too_few_samples | one_outcome
    std::optional<double> cliff_ms, ci_lo_ms, ci_hi_ms;
    double p_value = 1, rate_below = 0, rate_above = 0;
    int64_t fitted_unix_ms = 0;
    std::vector<Bin> bins;
  };

  void Run();
  int64_t Now() const;
  void Evict();  // under mu_: the window's bound

  const EconomicsOptions options_;
  mutable std::mutex mu_;
  std::deque<Request> window_;
  uint64_t first_seq_ = 0;  // sequence number of window_.front()
  std::unordered_map<std::string, uint64_t> by_id_;
  std::unordered_map<std::string, uint64_t> by_session_;  // the session's latest request
  std::map<std::string, Estimate> estimates_;  // by class
  int64_t joined_[api::kOutcomeTypes] = {};
  int64_t unknown_[api::kOutcomeTypes] = {};
  int64_t refits_ = 0;
  int64_t last_refit_unix_ms_ = 0;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lifeline::economics
