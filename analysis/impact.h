// Impact of a measured latency distribution: given a `lifeline bench` report (every request's
// TTFT / e2e, per target and step) and the fitted curves (`analyze decay --json`, optionally
// `analyze threshold --json`), the expected abandonment, CTR, CVR and joint conversion of each
// configuration, and their change against a baseline:
//   - another report (--baseline-report: its first target and step), else
//   - the threshold (every request exactly at the fitted threshold, abandonment at the rate
//     below it), else
//   - the first target at the same step (when the report has several targets), else
//   - zero latency.
// Expectations average the curves over the requests: abandonment = mean p_abandon(t), CTR =
// mean CTR(t), joint = mean CTR(t) CVR(t), CVR per click = joint / CTR. A failed request
// (error other than "cancelled") counts as abandoned with no click: the user got nothing.
//
// Ownership: value types. Thread-safety: pure functions. Failure: InvalidArgument naming the
// file and JSON field ("fit.json: cvr.b: expected a number").
#pragma once

#include "analysis/csv.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::analysis {

inline constexpr size_t kMaxReportRequests = 10'000'000;

struct DecayCurves {
  double c0 = 0, a = 0, v0 = 0, b = 0, g = 0;
  bool cvr_per_click = true;
};

struct AbandonCurve {
  std::string scenario;
  std::optional<double> threshold_ms;  // none: the scenario had no threshold
  double rate_below = 0, rate_above = 0;  // equal when there is no threshold
};

struct ImpactModels {
  std::optional<DecayCurves> decay;
  std::optional<AbandonCurve> abandon;
};

// `source` names the file in messages.
Result<DecayCurves> DecayCurvesFromJson(const nlohmann::json& fit, std::string_view source);
// The scenario named `scenario`; empty: `preferred` when present (the report's SLO class),
// else the only scenario, else an error listing them.
Result<AbandonCurve> AbandonCurveFromJson(const nlohmann::json& t, std::string_view source,
                                          std::string_view scenario, std::string_view preferred);

struct Expectation {
  int64_t requests = 0, failed = 0;
  double abandonment = NAN, ctr = NAN, cvr = NAN, joint = NAN;  // NaN: no curve for it
};

struct LatencySet {
  std::string label;  // "lifeline @ 4 req/s" style
  int target = 0, step = 0;
  double load = 0;
  std::vector<double> latency_ms;  // successful requests
  int64_t failed = 0;
};

Expectation Expect(const ImpactModels& m, const std::vector<double>& latency_ms, int64_t failed);

struct ImpactRow {
  LatencySet set;
  Expectation value;
  Expectation baseline;
  std::optional<Expectation> first_target;  // target 0 at the same step (several targets)
};

struct ImpactReport {
  std::string metric;    // "ttft", "ttfa" or "e2e"
  std::string baseline;  // what the baseline is, in words
  std::vector<ImpactRow> rows;
};

struct ImpactOptions {
  std::string metric;                              // empty: the report's slo_metric
  const nlohmann::json* baseline_report = nullptr;  // optional
};

Result<ImpactReport> ComputeImpact(const nlohmann::json& report, std::string_view source,
                                   const ImpactModels& m, const ImpactOptions& o);

// A request log of `serve --request-log` (csv.h: ParseJsonLines) in the shape ComputeImpact
// reads: one target per SLO class (labelled "class NAME"), one step; completed requests and
// those whose client hung up with their TTFT / TTFA / e2e (a request that got no token: the
// time its client waited, as wait_ms), refusals and errors as failed; shutdowns left out.
Result<nlohmann::json> ReportFromRequestLog(const CsvTable& log);

nlohmann::json ImpactJson(const ImpactReport& r);
// "## Latency economics" section: a table and one sentence per row.
std::string ImpactMarkdown(const ImpactReport& r);

}  // namespace lifeline::analysis
