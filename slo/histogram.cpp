#include "slo/histogram.h"

#include "base/prometheus.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "base/check.h"

namespace lifeline::slo {

namespace {

const double kLogGrowth = std::log(LogHistogram::kGrowth);

double Sanitize(double value_ms) {
  // NaN and negatives (a clock read out of order) count as 0 rather than poisoning sums.
  return (std::isnan(value_ms) || value_ms < 0) ? 0.0 : value_ms;
}

}  // namespace

int32_t LogHistogram::RegularBuckets() {
  static const int32_t n =
      static_cast<int32_t>(std::ceil(std::log(kMaxMs / kMinMs) / kLogGrowth));
  return n;
}

int32_t LogHistogram::BucketOf(double value_ms) {
  if (value_ms < kMinMs) return 0;
  const int32_t n = RegularBuckets();
  if (value_ms >= kMaxMs) return n + 1;
  const auto i = static_cast<int32_t>(std::floor(std::log(value_ms / kMinMs) / kLogGrowth));
  return 1 + std::clamp(i, 0, n - 1);
}

double LogHistogram::Midpoint(int32_t bucket) {
  // Bucket b (1-based) spans [kMinMs g^(b-1), kMinMs g^b); its geometric midpoint is at
  // exponent b - 0.5, which halves the worst-case relative error of either edge.
  return kMinMs * std::exp((static_cast<double>(bucket) - 0.5) * kLogGrowth);
}

void LogHistogram::Record(double value_ms) {
  value_ms = Sanitize(value_ms);
  if (counts_.empty()) counts_.assign(static_cast<size_t>(RegularBuckets()) + 2, 0);
  ++counts_[static_cast<size_t>(BucketOf(value_ms))];
  ++count_;
  sum_ms_ += value_ms;
  min_ms_ = std::min(min_ms_, value_ms);
  max_ms_ = std::max(max_ms_, value_ms);
}

void LogHistogram::Merge(const LogHistogram& other) {
  if (other.count_ == 0) return;
  if (counts_.empty()) counts_.assign(other.counts_.size(), 0);
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ms_ += other.sum_ms_;
  min_ms_ = std::min(min_ms_, other.min_ms_);
  max_ms_ = std::max(max_ms_, other.max_ms_);
}

void LogHistogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ms_ = 0;
  min_ms_ = std::numeric_limits<double>::infinity();
  max_ms_ = 0;
}

double LogHistogram::Quantile(double q) const {
  if (count_ == 0) return 0.0;
  if (!(q > 0)) return min_ms_;
  if (q >= 1) return max_ms_;
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  const auto last = static_cast<int32_t>(counts_.size()) - 1;
  for (int32_t b = 0; b <= last; ++b) {
    seen += counts_[static_cast<size_t>(b)];
    if (seen < rank) continue;
    if (b == 0) return min_ms_;     // below 1 us: no finer information than the min
    if (b == last) return max_ms_;  // above 1 h
    return std::clamp(Midpoint(b), min_ms_, max_ms_);
  }
  return max_ms_;
}

WindowedHistogram::WindowedHistogram(WindowSpec spec) : spec_(spec) {
  LL_CHECK(spec_.bucket_us > 0 && spec_.n_buckets > 0);
  slots_.resize(static_cast<size_t>(spec_.n_buckets));
}

int64_t WindowedHistogram::EpochOf(int64_t t_us) const {
  int64_t e = t_us / spec_.bucket_us;
  if (t_us % spec_.bucket_us < 0) --e;  // floor for negative clocks
  return e;
}

bool WindowedHistogram::Live(int64_t slot_epoch, int64_t now_epoch) const {
  return slot_epoch <= now_epoch && slot_epoch > now_epoch - spec_.n_buckets;
}

void WindowedHistogram::Record(int64_t now_us, double value_ms) {
  const int64_t e = EpochOf(now_us);
  int64_t idx = e % spec_.n_buckets;
  if (idx < 0) idx += spec_.n_buckets;
  Slot& s = slots_[static_cast<size_t>(idx)];
  if (s.epoch == e) {
    s.hist.Record(value_ms);
  } else if (s.epoch < e) {
    // The slot holds an epoch n or more buckets old: recycle it for this one.
    s.hist.Clear();
    s.epoch = e;
    s.hist.Record(value_ms);
  }
  // s.epoch > e: the value is older than the window already seen; drop it.
}

void WindowedHistogram::MergeInto(int64_t now_us, LogHistogram* out, int64_t since_us) const {
  const int64_t e = EpochOf(now_us);
  // The first epoch whose bucket starts at or after since_us (ceil(since / bucket)).
  const int64_t first =
      since_us == std::numeric_limits<int64_t>::min()
          ? std::numeric_limits<int64_t>::min()
          : EpochOf(since_us) + (since_us - EpochOf(since_us) * spec_.bucket_us > 0 ? 1 : 0);
  for (const Slot& s : slots_) {
    if (Live(s.epoch, e) && s.epoch >= first) out->Merge(s.hist);
  }
}

LogHistogram WindowedHistogram::Merged(int64_t now_us, int64_t since_us) const {
  LogHistogram h;
  MergeInto(now_us, &h, since_us);
  return h;
}

uint64_t WindowedHistogram::Count(int64_t now_us) const {
  const int64_t e = EpochOf(now_us);
  uint64_t n = 0;
  for (const Slot& s : slots_) {
    if (Live(s.epoch, e)) n += s.hist.count();
  }
  return n;
}

std::span<const double> DefaultPromBoundsSeconds() {
  static constexpr std::array<double, 22> kBounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.085, 0.1, 0.15, 0.2,  0.22,
      0.25,  0.3,    0.35,  0.387, 0.5,  0.75, 1.0,   2.5, 5.0,  10.0, 30.0};
  return kBounds;
}

PromHistogram::PromHistogram()
    : PromHistogram(std::vector<double>(DefaultPromBoundsSeconds().begin(),
                                        DefaultPromBoundsSeconds().end())) {}

PromHistogram::PromHistogram(std::vector<double> bounds_s) : bounds_s_(std::move(bounds_s)) {
  LL_CHECK(std::is_sorted(bounds_s_.begin(), bounds_s_.end()));
  counts_.assign(bounds_s_.size() + 1, 0);
}

void PromHistogram::Record(double value_ms) {
  const double v_s = Sanitize(value_ms) / 1000.0;
  // `le` is inclusive: the first bound >= v.
  const auto it = std::lower_bound(bounds_s_.begin(), bounds_s_.end(), v_s);
  ++counts_[static_cast<size_t>(it - bounds_s_.begin())];
  ++count_;
  sum_s_ += v_s;
}

void PromHistogram::Merge(const PromHistogram& other) {
  LL_CHECK(other.bounds_s_ == bounds_s_);
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_s_ += other.sum_s_;
}

void AppendPromHistogram(std::string* out, std::string_view name, std::string_view labels,
                         const PromHistogram& h) {
  const std::string bucket = std::string(name) + "_bucket";
  const std::string prefix = labels.empty() ? std::string() : std::string(labels) + ",";
  uint64_t cumulative = 0;
  const auto& counts = h.bucket_counts();
  for (size_t i = 0; i < h.bounds_s().size(); ++i) {
    cumulative += counts[i];
    prom::Sample(out, bucket, prefix + "le=\"" + prom::Number(h.bounds_s()[i]) + "\"",
                     static_cast<double>(cumulative));
  }
  prom::Sample(out, bucket, prefix + "le=\"+Inf\"", static_cast<double>(h.count()));
  prom::Sample(out, std::string(name) + "_sum", labels, h.sum_s());
  prom::Sample(out, std::string(name) + "_count", labels, static_cast<double>(h.count()));
}

}  // namespace lifeline::slo
