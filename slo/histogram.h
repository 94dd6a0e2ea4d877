// Latency histograms for the SLO control plane.
//
//   LogHistogram       log-bucketed counts from 1 us to 1 h; Quantile() within
//                      kRelativeError (< 1 %) of the exact order statistic. Mergeable.
//   WindowedHistogram  a sliding window of time buckets (default 12 x 2.5 s) of LogHistograms;
//                      Record(now, v), Quantile(now, q). Old buckets are recycled lazily.
//   PromHistogram      cumulative counts over fixed `le` bounds in seconds, for Prometheus
//                      exposition (counters never reset, unlike the window).
//
// Quantile definition (used by the tests' exact reference too): the nearest-rank order
// statistic x_(k) of the n recorded values, k = max(1, ceil(q * n)).
//
// Ownership: value types; each owns its counts. Thread-safety: none (the LatencyTracker
// wraps them in a mutex). Failure: none; values are clamped (NaN and negatives count as 0,
// below 1 us into an underflow bucket, above 1 h into an overflow bucket).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lifeline::slo {

class LogHistogram {
 public:
  static constexpr double kMinMs = 1e-3;   // 1 us: lower edge of the first regular bucket
  static constexpr double kMaxMs = 3.6e6;  // 1 h: values above count in the overflow bucket
  static constexpr double kGrowth = 1.02;  // upper/lower edge ratio of every regular bucket
  // A value inside [kMinMs, kMaxMs] is reported as its bucket's geometric midpoint, so the
  // relative error is at most sqrt(kGrowth) - 1 = 0.99505 %. Outside that range the estimate
  // is clamped to the observed min / max instead.
  static constexpr double kRelativeError = 0.00996;

  // Regular buckets; index 0 is the underflow bucket and kRegularBuckets + 1 the overflow.
  static int32_t RegularBuckets();

  void Record(double value_ms);
  void Merge(const LogHistogram& other);
  void Clear();

  // Nearest-rank estimate, q clamped to [0, 1]; 0 when empty. q = 0 and q = 1 return the
  // exact min and max.
  double Quantile(double q) const;

  uint64_t count() const { return count_; }
  double sum_ms() const { return sum_ms_; }
  double mean_ms() const { return count_ == 0 ? 0.0 : sum_ms_ / static_cast<double>(count_); }
  double min_ms() const { return count_ == 0 ? 0.0 : min_ms_; }
  double max_ms() const { return count_ == 0 ? 0.0 : max_ms_; }

 private:
  static int32_t BucketOf(double value_ms);
  static double Midpoint(int32_t bucket);

  std::vector<uint64_t> counts_;  // [RegularBuckets() + 2], allocated on first Record/Merge
  uint64_t count_ = 0;
  double sum_ms_ = 0;
  double min_ms_ = std::numeric_limits<double>::infinity();
  double max_ms_ = 0;
};

struct WindowSpec {
  int64_t bucket_us = 2'500'000;  // width of one time bucket
  int32_t n_buckets = 12;         // the window covers between (n-1) and n bucket widths
};

class WindowedHistogram {
 public:
  explicit WindowedHistogram(WindowSpec spec = {});

  // A value recorded at `now_us`. A value older than the window (the clock may lag slightly
  // between threads) is dropped.
  void Record(int64_t now_us, double value_ms);
  // Adds the buckets live at `now_us` (epochs e-n+1 .. e, e = floor(now / bucket)) to *out.
  // With since_us: only buckets that start at or after since_us (e.g. the last ladder
  // transition), so a decision can be judged on evidence newer than the previous one.
  void MergeInto(int64_t now_us, LogHistogram* out,
                 int64_t since_us = std::numeric_limits<int64_t>::min()) const;
  LogHistogram Merged(int64_t now_us,
                      int64_t since_us = std::numeric_limits<int64_t>::min()) const;
  double Quantile(int64_t now_us, double q) const { return Merged(now_us).Quantile(q); }
  uint64_t Count(int64_t now_us) const;

  const WindowSpec& spec() const { return spec_; }

 private:
  int64_t EpochOf(int64_t t_us) const;
  bool Live(int64_t slot_epoch, int64_t now_epoch) const;

  struct Slot {
    int64_t epoch = std::numeric_limits<int64_t>::min();
    LogHistogram hist;
  };
  WindowSpec spec_;
  std::vector<Slot> slots_;  // [n_buckets] slot of epoch e is e mod n_buckets
};

// Fixed `le` bounds (seconds) chosen to contain the preset SLO targets (0.085, 0.15, 0.22,
// 0.3, 0.35, 0.387 s) exactly, so "share of requests within target" is exact in PromQL.
std::span<const double> DefaultPromBoundsSeconds();

class PromHistogram {
 public:
  PromHistogram();  // DefaultPromBoundsSeconds()
  explicit PromHistogram(std::vector<double> bounds_s);  // ascending, finite

  void Record(double value_ms);
  void Merge(const PromHistogram& other);  // same bounds (checked)

  const std::vector<double>& bounds_s() const { return bounds_s_; }
  // Non-cumulative counts per bound, plus the +Inf bucket at the end.
  const std::vector<uint64_t>& bucket_counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum_s() const { return sum_s_; }

 private:
  std::vector<double> bounds_s_;
  std::vector<uint64_t> counts_;  // [bounds_s_.size() + 1]
  uint64_t count_ = 0;
  double sum_s_ = 0;
};

// The _bucket{le=...} (cumulative), _sum and _count lines of one labelled histogram series.
void AppendPromHistogram(std::string* out, std::string_view name, std::string_view labels,
                         const PromHistogram& h);

}  // namespace lifeline::slo
