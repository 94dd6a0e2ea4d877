// Live latency per (SLO class, model): for each of TTFT, time per output token, inter-token
// latency, queue time, end-to-end, time to first answer token and thinking time, a sliding window (WindowedHistogram: P50/P95/P99 for
// the controller and /v1/slo) and a cumulative PromHistogram (for /metrics).
//
// The engine thread records; the controller's timer and the metrics handler take snapshots.
//
// Requests still in flight are evidence too (docs/slo.md, "The queue as a sensor"): a request
// waiting for its first token for 2 s will have a TTFT of at least 2 s. A snapshot given the
// requests in flight (SnapshotOptions::in_flight) adds, per (class, model) and per class, their
// ages as lower bounds -- waiting requests' to TTFT, every one's to e2e -- into `censored`
// window stats, and counts them in `in_flight`, so a queue that produces no first token does
// not look idle, and a P95 cannot look healthy while requests age past their budget.
// RecordLowerBound puts the lower bound of a request that left without a token (dropped as
// late, docs/slo.md) into the window only: the controller sees it, the Prometheus histograms
// (served latencies) do not.
//
// Ownership: owns its series, created on first record. Thread-safety: every method may be
// called from any thread (one mutex; a record is a map lookup plus one bucket increment per
// value, a snapshot merges at most n_buckets histograms per series). Failure: none; past
// kMaxSeries distinct (class, model) pairs new pairs are dropped and counted.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "slo/histogram.h"

namespace lifeline::slo {

// kTtfa: time to the first answer token (a thinking model's answer starts after its
// thinking; for other requests it is the first text). kThink: how long a request that
// thought spent thinking (first token .. first answer token, or .. the end when no answer
// came); its window count is how many requests thought.
enum class Metric : uint8_t { kTtft = 0, kTpot, kItl, kQueue, kE2e, kTtfa, kThink };
inline constexpr int kMetricCount = 7;
inline constexpr std::array<Metric, kMetricCount> kAllMetrics = {
    Metric::kTtft, Metric::kTpot, Metric::kItl, Metric::kQueue, Metric::kE2e, Metric::kTtfa,
    Metric::kThink};
// "ttft", "tpot", "itl", "queue", "e2e", "ttfa", "think"
std::string_view MetricName(Metric m);

struct WindowStats {
  uint64_t count = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;
};

// The requests in flight on one (class, model), as a snapshot counts them.
struct InFlightStats {
  static constexpr size_t kTopAges = 8;
  int64_t requests = 0;  // accepted, not yet ended
  int64_t waiting = 0;   // of those, no first token yet
  // The oldest ages in ms, descending, at most kTopAges: of the waiting requests (lower
  // bounds of their TTFT) and of all of them (lower bounds of their e2e).
  std::vector<double> waiting_ages_ms;
  std::vector<double> ages_ms;
  // Thinking: first token out, no answer text yet; and the oldest ages of those without
  // answer text (waiting or thinking: lower bounds of their TTFA), descending.
  int64_t thinking = 0;
  std::vector<double> unanswered_ages_ms;
  // Admitted to think (a thinking model, a budget above 0) and not yet answering, whether
  // still waiting or thinking: the class thinks before any of its requests has begun to.
  int64_t to_think = 0;
};

// One request in flight, as the owner of the models sees it (serving/serving_hub.cpp).
struct InFlightRequest {
  std::string slo_class;
  std::string model;
  int64_t first_byte_us = 0;  // same clock as the snapshot's now_us
  bool first_token = false;   // its first token is out (its TTFT is already recorded)
  bool first_answer = false;  // its first answer text is out (a thinking model's comes later)
  bool thinks = false;        // admitted to think (a thinking model, a budget above 0)
};

struct SeriesSnapshot {
  std::string slo_class;
  std::string model;  // empty in TrackerSnapshot::by_class (all models merged)
  std::array<WindowStats, kMetricCount> window;
  std::array<PromHistogram, kMetricCount> total;  // cumulative since start
  // by_class rows of a snapshot asked for it (Snapshot's since_by_class): the window limited
  // to buckets that start at or after that class's last ladder transition.
  std::optional<std::array<WindowStats, kMetricCount>> since_change;
  int64_t last_record_us = 0;  // when the newest sample of any metric was recorded (0: never)
  // What a request of this series needs alone on the idle model, when the class's TTFT budget
  // is below it (RecordFloor; a moving average, 0 when none came within the window): the
  // controller then reads the class's pressure against what admission holds it to.
  double floor_ms = 0;
  // With SnapshotOptions::in_flight: the requests in flight, and the window with their ages
  // added as lower bounds (TTFT: the waiting ones; e2e: all; other metrics as the window).
  // since_change, when present, then holds those ages too (they are evidence of now).
  InFlightStats in_flight;
  std::optional<std::array<WindowStats, kMetricCount>> censored;

  const WindowStats& operator[](Metric m) const { return window[static_cast<size_t>(m)]; }
};

struct TrackerSnapshot {
  int64_t at_us = 0;
  std::vector<SeriesSnapshot> by_class_model;  // sorted by (class, model)
  std::vector<SeriesSnapshot> by_class;        // sorted by class; models merged
  uint64_t dropped_series_records = 0;         // records refused over kMaxSeries
  // Requests in flight on every model when the snapshot was taken; the owner of the models
  // fills it in (the tracker does not know). None: unknown. 0 lets the controller treat a
  // class with no sample for a tick as idle (Controller::Tick).
  std::optional<int64_t> live_requests;
  // The snapshot was given the requests in flight (SnapshotOptions::has_in_flight): every
  // row's in_flight and censored are filled in, and a (class, model) with requests in flight
  // has a row even before its first sample.
  bool has_in_flight = false;

  const SeriesSnapshot* Find(std::string_view slo_class, std::string_view model) const;
  const SeriesSnapshot* FindClass(std::string_view slo_class) const;
};

// The samples of one finished request (absent: not measured, e.g. no token produced).
struct RequestSample {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;  // (e2e - ttft) / (output tokens - 1)
  std::optional<double> queue_ms;
  std::optional<double> e2e_ms;
  std::optional<double> ttfa_ms;
  std::optional<double> think_ms;  // requests that thought only
  std::span<const double> itl_ms;  // [output tokens - 1] gaps between streamed tokens
};

class LatencyTracker {
 public:
  static constexpr size_t kMaxSeries = 4096;

  explicit LatencyTracker(WindowSpec spec = {});

  void Record(std::string_view slo_class, std::string_view model, Metric metric, int64_t now_us,
              double value_ms);
  // All of one request's samples under one lock.
  void RecordRequest(std::string_view slo_class, std::string_view model, int64_t now_us,
                     const RequestSample& sample);

  // since_by_class (class -> time of its last ladder transition), when given, also fills
  // SeriesSnapshot::since_change of those classes' by_class rows.
  using SinceByClass = std::map<std::string, int64_t, std::less<>>;
  TrackerSnapshot Snapshot(int64_t now_us, const SinceByClass* since_by_class = nullptr) const;
  // (class, model) -> time of that pair's last ladder transition.
  using SinceBySeries = std::map<std::pair<std::string, std::string>, int64_t, std::less<>>;
  struct SnapshotOptions {
    const SinceByClass* since_by_class = nullptr;    // fills by_class rows' since_change
    // Fills by_class_model rows' since_change; a (class, "") entry the by_class row's.
    const SinceBySeries* since_by_series = nullptr;
    bool has_in_flight = false;                      // in_flight below is the whole set
    std::span<const InFlightRequest> in_flight;
  };
  TrackerSnapshot Snapshot(int64_t now_us, const SnapshotOptions& options) const;
  TrackerSnapshot Snapshot(int64_t now_us, const SinceBySeries* since) const;

  // A request admitted below its floor (admission's below_floor): what it needs alone, in ms.
  void RecordFloor(std::string_view slo_class, std::string_view model, int64_t now_us,
                   double floor_ms);

  // A lower bound of one metric of a request that ended without producing it (a request
  // dropped as late: its TTFT would have been at least this), into the window only.
  void RecordLowerBound(std::string_view slo_class, std::string_view model, Metric metric,
                        int64_t now_us, double value_ms);

  const WindowSpec& spec() const { return spec_; }

 private:
  struct Series {
    explicit Series(WindowSpec spec);
    std::array<WindowedHistogram, kMetricCount> window;
    std::array<PromHistogram, kMetricCount> total;
    int64_t last_record_us = 0;  // time of the newest sample (0: none)
    double floor_ms = 0;         // moving average of RecordFloor's values
    int64_t floor_us = 0;        // the last one's time
    bool has_floor = false;
    void Add(Metric m, int64_t now_us, double value_ms);
    void AddWindowOnly(Metric m, int64_t now_us, double value_ms);
  };
  Series* SeriesFor(std::string_view slo_class, std::string_view model);  // under mu_

  WindowSpec spec_;
  mutable std::mutex mu_;
  // class -> model -> series; transparent comparators so the hot path looks up by view.
  std::map<std::string, std::map<std::string, std::unique_ptr<Series>, std::less<>>,
           std::less<>>
      series_;
  size_t n_series_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace lifeline::slo
