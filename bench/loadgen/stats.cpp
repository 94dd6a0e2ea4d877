#include "bench/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lifeline::loadgen {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

int64_t NearestRank(int64_t n, double p) {
  if (n <= 0) return 0;
  // p * n is exact for integer-valued p and realistic n; the small epsilon keeps a product
  // such as 95 * 20 / 100 = 19 from rounding up to 20 if the division is inexact.
  const double exact = p * static_cast<double>(n) / 100.0;
  int64_t rank = static_cast<int64_t>(std::ceil(exact - 1e-9));
  return std::clamp<int64_t>(rank, 1, n);
}

double PercentileSorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return kNaN;
  const int64_t rank = NearestRank(static_cast<int64_t>(sorted.size()), p);
  return sorted[static_cast<size_t>(rank - 1)];
}

double Percentile(std::span<const double> values, double p) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return PercentileSorted(sorted, p);
}

LatencySummary Summarize(std::span<const double> values) {
  std::vector<double> v;
  v.reserve(values.size());
  for (double x : values) {
    if (std::isfinite(x)) v.push_back(x);
  }
  LatencySummary s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) {
    s.mean = s.p50 = s.p90 = s.p95 = s.p99 = s.max = kNaN;
    return s;
  }
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = PercentileSorted(v, 50);
  s.p90 = PercentileSorted(v, 90);
  s.p95 = PercentileSorted(v, 95);
  s.p99 = PercentileSorted(v, 99);
  s.max = v.back();
  return s;
}

int64_t CountMeetingSlo(std::span<const double> metric_ms, double threshold_ms) {
  int64_t n = 0;
  for (double x : metric_ms) n += (x <= threshold_ms) ? 1 : 0;  // NaN and +inf compare false
  return n;
}

double GoodputRps(std::span<const double> metric_ms, double threshold_ms, double wall_s) {
  if (!(wall_s > 0)) return 0;
  return static_cast<double>(CountMeetingSlo(metric_ms, threshold_ms)) / wall_s;
}

double SmoothGoodputRps(int64_t met, int64_t refused, int64_t failed, double duration_s) {
  if (!(duration_s > 0)) return 0;
  const int64_t net = std::max<int64_t>(0, met - refused - failed);
  return static_cast<double>(net) / duration_s;
}

bool SmallSampleForP95(int64_t finished) { return finished < kMinRequestsForP95; }

bool PercentileDecidedAbove(int64_t bad, int64_t planned, double p) {
  if (planned <= 0) return false;
  return bad > planned - NearestRank(planned, p);
}

std::optional<double> FindKnee(std::span<const SweepPoint> points, double threshold_ms) {
  std::optional<double> knee;
  for (const SweepPoint& pt : points) {
    if (!pt.ran || !(pt.slo_p95_ms <= threshold_ms)) break;
    knee = pt.load;
  }
  return knee;
}

}  // namespace lifeline::loadgen
