#include "slo/prediction_audit.h"

#include <algorithm>
#include <cmath>

namespace lifeline::slo {

namespace {

constexpr double kRatioBounds[] = {0.1, 0.25, 0.5, 0.67, 0.8, 0.9, 1.0,
                                   1.1, 1.25, 1.5, 2.0,  4.0, 10.0};

double NearestRank(std::vector<double> sorted_values, double q) {
  if (sorted_values.empty()) return 0;
  const auto n = static_cast<double>(sorted_values.size());
  const auto k = static_cast<size_t>(std::max(1.0, std::ceil(q * n)));
  return sorted_values[std::min(k, sorted_values.size()) - 1];
}

}  // namespace

std::span<const double> PredictionAudit::RatioBounds() { return kRatioBounds; }

void PredictionAudit::Observe(double raw_predicted_ms, double correction, double measured_ms,
                              int64_t now_us) {
  if (!(raw_predicted_ms > 0) || !(measured_ms > 0) || !(correction > 0) ||
      !std::isfinite(raw_predicted_ms) || !std::isfinite(measured_ms) ||
      !std::isfinite(correction)) {
    return;
  }
  const double raw_ratio = measured_ms / raw_predicted_ms;
  const double used_ratio = measured_ms / (raw_predicted_ms * correction);
  std::lock_guard lock(mu_);
  const double log_ratio = std::log(raw_ratio);
  // The first observation seeds the mean: the prior (1.0) is only a guess.
  log_mean_ = count_ == 0 ? log_ratio : log_mean_ + alpha_ * (log_ratio - log_mean_);
  ++count_;
  last_ratio_ = used_ratio;
  sum_ += used_ratio;
  if (recent_.size() < kRecent) {
    recent_.push_back(used_ratio);
  } else {
    recent_[recent_next_] = used_ratio;
    recent_next_ = (recent_next_ + 1) % kRecent;
  }
  if (buckets_.empty()) buckets_.assign(std::size(kRatioBounds) + 1, 0);
  const auto* it = std::lower_bound(std::begin(kRatioBounds), std::end(kRatioBounds), used_ratio);
  ++buckets_[static_cast<size_t>(it - std::begin(kRatioBounds))];
  if (recent_.size() >= kMinSpreadSamples) {
    std::vector<double> sorted = recent_;
    std::sort(sorted.begin(), sorted.end());
    spread_q95_.store(NearestRank(std::move(sorted), 0.95), std::memory_order_relaxed);
  }
  const double limit = std::log(max_correction_);
  correction_.store(std::exp(std::clamp(log_mean_, -limit, limit)), std::memory_order_relaxed);
  last_us_.store(now_us, std::memory_order_relaxed);
}

bool PredictionAudit::Stale(int64_t now_us) const {
  if (stale_after_us_ <= 0) return false;
  const int64_t last = std::max(last_us_.load(std::memory_order_relaxed),
                                probe_us_.load(std::memory_order_relaxed));
  return last > 0 && now_us - last >= stale_after_us_;
}

bool PredictionAudit::TryClaimProbe(int64_t now_us) {
  int64_t seen = probe_us_.load(std::memory_order_relaxed);
  for (;;) {
    if (!Stale(now_us)) return false;
    if (probe_us_.compare_exchange_weak(seen, now_us, std::memory_order_relaxed)) return true;
  }
}

PredictionAudit::Stats PredictionAudit::Snapshot() const {
  std::lock_guard lock(mu_);
  Stats s;
  s.count = count_;
  s.correction = correction_.load(std::memory_order_relaxed);
  s.last_ratio = last_ratio_;
  s.sum = sum_;
  s.buckets = buckets_.empty() ? std::vector<uint64_t>(std::size(kRatioBounds) + 1, 0) : buckets_;
  s.recent = recent_.size();
  if (!recent_.empty()) {
    std::vector<double> sorted = recent_;
    std::sort(sorted.begin(), sorted.end());
    s.p10 = NearestRank(sorted, 0.10);
    s.p50 = NearestRank(sorted, 0.50);
    s.p90 = NearestRank(sorted, 0.90);
    const auto within = std::count_if(sorted.begin(), sorted.end(),
                                      [](double r) { return r >= 0.8 && r <= 1.25; });
    s.within_25pct = static_cast<double>(within) / static_cast<double>(sorted.size());
  }
  return s;
}

}  // namespace lifeline::slo
