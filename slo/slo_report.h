// What the SLO control plane shows: the JSON body of GET /v1/slo (classes, targets, live
// window percentiles, ladder level and recent transitions, batch knobs, cascade) and the
// Prometheus text for /metrics (latency histograms by class and model, targets, windowed
// percentiles, degradation levels, batch limits, outcome and transition counters).
// docs/slo.md lists every field and metric.
//
// Ownership: builds fresh values; borrows its inputs for the call. Thread-safety: safe from any
// thread (reads the controller through its locked accessors). Failure: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"
#include "slo/prediction_audit.h"

namespace lifeline::slo {

// `now_us` on the same clock as the tracker and controller; event times are reported as
// `age_ms` before now and as `at_ms` on that clock. At most `max_events` recent events.
nlohmann::json SloStatusJson(const Controller& controller, const TrackerSnapshot& snapshot,
                             int64_t now_us, size_t max_events = 64);

// Prometheus text exposition format 0.0.4. `outcomes` may be null.
std::string SloPrometheusText(const Controller& controller, const TrackerSnapshot& snapshot,
                              const OutcomeCounters* outcomes);

// Each local model's admission predictions against what happened (PredictionAudit).
struct ModelAudit {
  std::string model;
  PredictionAudit::Stats stats;
};
// The `prediction` object of a model in /v1/slo: {"checked", "correction", "last_ratio",
// "recent", "ratio_p10", "ratio_p50", "ratio_p90", "within_25pct"}.
nlohmann::json PredictionAuditJson(const PredictionAudit::Stats& stats);
// lifeline_admission_prediction_ratio (histogram of measured / predicted TTFT service time)
// and lifeline_admission_prediction_correction (gauge), by model.
std::string PredictionAuditPrometheusText(const std::vector<ModelAudit>& audits);

// The metric family of each latency histogram, e.g. "lifeline_ttft_seconds".
std::string_view HistogramFamily(Metric m);

}  // namespace lifeline::slo
