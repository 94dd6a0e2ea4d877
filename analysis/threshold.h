// Threshold discovery: where does the abandonment rate jump with latency?
//
// Model (per scenario), with breakpoint tau:
//   logit p(t) = a_L + b1 v + b2 v^2   for t <  tau
//   logit p(t) = a_R + b1 v + b2 v^2   for t >= tau,   v = clamp((t - c) / s, -4, 4)
// i.e. a segmented logistic regression with a level shift (the jump, a_R - a_L) at tau and
// one smooth latency trend on both sides (c, s: the latencies' mean and standard deviation). tau is found by profile likelihood over bin edges (coarse grid, then every edge around
// the three best grid points). The no-break model is the trend alone over all sessions.
//
// Evidence for a break: the likelihood-ratio statistic LR = 2 (l_break - l_trend) has no
// chi-square reference distribution because tau does not exist under the null (the Davies
// problem), so its p-value is a parametric bootstrap: outcomes are redrawn from the fitted
// no-break trend at the observed latencies and the whole search is rerun on each replicate.
// A threshold is reported only when p < alpha.
//
// Interval: percentile bootstrap (2.5 %, 97.5 %) of tau over resampled sessions, or over
// resampled groups (users) when group ids are given, each replicate rerunning the search.
//
// Ownership: value types. Thread-safety: FindThreshold is a pure function (it runs its
// replicates on `threads` threads; results do not depend on the thread count). Failure:
// InvalidArgument for inputs too small to fit or with one outcome class.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/binned.h"
#include "base/status.h"

namespace lifeline::analysis {

struct ThresholdOptions {
  int bootstrap = 400;          // replicates for the interval
  int null_replicates = 299;    // parametric-bootstrap replicates for the p-value
  double alpha = 0.01;          // a threshold is claimed only when p_value < alpha
  uint64_t seed = 1;
  double resolution_ms = 1;     // bin width (coarsened for very wide latency ranges)
  double min_side_fraction = 0.01;  // each side of a breakpoint holds at least this share...
  int64_t min_side_sessions = 30;   // ...and this many sessions
  int64_t min_side_events = 5;      // and this many of each outcome
  // +1: look for a jump up (abandonment), -1: down (completion), 0: the direction of the
  // no-break trend (5th to 95th latency percentile).
  int direction = 0;
  int threads = 1;
};

struct ThresholdInput {
  std::string name;                  // scenario
  std::vector<double> latency_ms;
  std::vector<uint8_t> outcome;      // 1 = abandoned
  std::vector<int32_t> group;        // empty, or a group id in [0, groups) per session
  int32_t groups = 0;
};

struct ThresholdResult {
  std::string name;
  int64_t n = 0;
  int64_t events = 0;
  double rate = 0;                   // overall outcome rate
  bool found = false;                // p_value < alpha
  int direction = 1;                 // the searched direction of the jump
  std::optional<double> candidate_ms;  // best breakpoint, significant or not
  double lr = 0;                     // likelihood-ratio statistic at the candidate
  double p_value = 1;
  int null_replicates = 0;           // replicates run (the search may stop early)
  // Set when found:
  double threshold_ms = 0;
  double ci_lo_ms = 0, ci_hi_ms = 0;
  int bootstrap_replicates = 0;      // replicates with a valid breakpoint
  double rate_below = 0, rate_above = 0;  // observed rates of sessions below / at-or-above
  double relative_increase = 0;      // rate_above / rate_below - 1
  // The fits (for plots): the breakpoint model at the candidate and the no-break trend.
  JumpFit jump;
  JumpFit line;                      // a_right is its intercept
  double t_center_ms = 0, t_scale_ms = 1;
};

Result<ThresholdResult> FindThreshold(const ThresholdInput& in, const ThresholdOptions& o);

// {"scenarios":[{"name","n","threshold_ms","ci95_ms":[lo,hi],"rate_below","rate_above",
//  "relative_increase","p_value", ...}]}; threshold_ms, ci95_ms and the rates are null when
// no threshold was found. docs/analysis.md lists the extra fields.
nlohmann::json ThresholdJson(const std::vector<ThresholdResult>& results,
                             const ThresholdOptions& o);

// The P95 target written for a found threshold: the lower of the interval's low end and
// threshold x (1 - margin), rounded down to whole milliseconds, at least 1.
double TargetForThreshold(const ThresholdResult& r, double margin);

}  // namespace lifeline::analysis
