// Latency statistics for the load generator: percentiles, summaries, goodput, the SLO knee of
// a load sweep and the early-stop rule that bounds a sweep step.
//
// Percentile definition (nearest rank): P_p of n samples is the smallest sample x such that at
// least p% of the samples are <= x, i.e. sorted[ceil(p * n / 100) - 1] with the rank clamped
// to [1, n]. It is always an observed value (no interpolation), so "P95 <= threshold" means
// "at least 95% of requests took <= threshold".
//
// Failed requests enter SLO statistics as +infinity: they never meet a threshold, and a step
// with more than 5% failures has an infinite SLO P95.
//
// Ownership: pure functions over caller-owned spans. Thread-safety: no shared state.
// Failure: empty input yields NaN statistics (count 0), never an error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lifeline::loadgen {

// Nearest-rank percentile of `values` (any order; copied and sorted). p in [0, 100]; p = 0
// gives the minimum. NaN for an empty span.
double Percentile(std::span<const double> values, double p);

// Same on already ascending data (no copy).
double PercentileSorted(std::span<const double> sorted, double p);

// 1-based nearest rank of percentile p among n samples: ceil(p * n / 100), clamped to [1, n].
int64_t NearestRank(int64_t n, double p);

struct LatencySummary {
  int64_t count = 0;
  double mean = 0;  // NaN when count == 0 (like every field below)
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// Mean and percentiles of finite values; non-finite ones are ignored (use SloPercentile for
// statistics where failures count).
LatencySummary Summarize(std::span<const double> values);

// How many values are <= threshold_ms (+inf never is).
int64_t CountMeetingSlo(std::span<const double> metric_ms, double threshold_ms);

// Requests per second that met the SLO over a window of `wall_s` seconds (0 when wall_s <= 0).
double GoodputRps(std::span<const double> metric_ms, double threshold_ms, double wall_s);

// Requests that met the SLO per second of the offered duration, minus one for every request
// the server refused (HTTP 429/503) or failed, floored at 0. Goodput alone rewards a server
// that sheds the requests it would serve late: refusing them costs it nothing. Here each
// refusal cancels one request served in time, so shedding only pays when it lets more than
// one other request meet the SLO. 0 when duration_s <= 0.
double SmoothGoodputRps(int64_t met, int64_t refused, int64_t failed, double duration_s);

// Below this many finished requests a nearest-rank P95 is the slowest request itself
// (NearestRank(n, 95) == n for every n < 20), so one outlier decides the verdict; from 20 on
// it is not. Reports flag verdicts on fewer requests as small samples.
inline constexpr int64_t kMinRequestsForP95 = 20;

// True when `finished` requests are too few for a P95 to mean more than the maximum.
bool SmallSampleForP95(int64_t finished);

// Early stop: with `planned` requests in a step, the nearest-rank percentile p ends above the
// threshold once more than planned - NearestRank(planned, p) requests are already "bad" (failed
// or slower than the threshold), whatever the rest do. planned <= 0 never decides.
bool PercentileDecidedAbove(int64_t bad, int64_t planned, double p);

// One step of a sweep for one target, in ascending load order.
struct SweepPoint {
  double load = 0;        // offered rate (req/s) or concurrency
  double slo_p95_ms = 0;  // nearest-rank P95 of the SLO metric, failures as +inf
  bool ran = true;        // false: skipped because an earlier step already failed
};

// The knee: the highest load whose step passed (P95 <= threshold) with every lower step also
// passing, i.e. the load just before the first failing (or skipped) step. nullopt when the
// lowest step already fails. Points must be sorted by load.
std::optional<double> FindKnee(std::span<const SweepPoint> points, double threshold_ms);

}  // namespace lifeline::loadgen
