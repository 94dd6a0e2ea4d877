#include "slo/latency_tracker.h"

#include <algorithm>

namespace lifeline::slo {

namespace {

WindowStats StatsOf(const LogHistogram& h) {
  WindowStats s;
  s.count = h.count();
  s.p50_ms = h.Quantile(0.50);
  s.p95_ms = h.Quantile(0.95);
  s.p99_ms = h.Quantile(0.99);
  s.mean_ms = h.mean_ms();
  return s;
}

}  // namespace

std::string_view MetricName(Metric m) {
  switch (m) {
    case Metric::kTtft: return "ttft";
    case Metric::kTpot: return "tpot";
    case Metric::kItl: return "itl";
    case Metric::kQueue: return "queue";
    case Metric::kE2e: return "e2e";
  }
  return "?";
}

const SeriesSnapshot* TrackerSnapshot::Find(std::string_view slo_class,
                                            std::string_view model) const {
  for (const SeriesSnapshot& s : by_class_model) {
    if (s.slo_class == slo_class && s.model == model) return &s;
  }
  return nullptr;
}

const SeriesSnapshot* TrackerSnapshot::FindClass(std::string_view slo_class) const {
  for (const SeriesSnapshot& s : by_class) {
    if (s.slo_class == slo_class) return &s;
  }
  return nullptr;
}

LatencyTracker::Series::Series(WindowSpec spec)
    : window{WindowedHistogram(spec), WindowedHistogram(spec), WindowedHistogram(spec),
             WindowedHistogram(spec), WindowedHistogram(spec)} {}

void LatencyTracker::Series::Add(Metric m, int64_t now_us, double value_ms) {
  const auto i = static_cast<size_t>(m);
  window[i].Record(now_us, value_ms);
  total[i].Record(value_ms);
  last_record_us = std::max(last_record_us, now_us);
}

LatencyTracker::LatencyTracker(WindowSpec spec) : spec_(spec) {}

LatencyTracker::Series* LatencyTracker::SeriesFor(std::string_view slo_class,
                                                  std::string_view model) {
  auto cls = series_.find(slo_class);
  if (cls != series_.end()) {
    auto it = cls->second.find(model);
    if (it != cls->second.end()) return it->second.get();
  }
  if (n_series_ >= kMaxSeries) {
    ++dropped_;
    return nullptr;
  }
  if (cls == series_.end()) cls = series_.emplace(std::string(slo_class), decltype(cls->second)()).first;
  auto& slot = cls->second[std::string(model)];
  slot = std::make_unique<Series>(spec_);
  ++n_series_;
  return slot.get();
}

void LatencyTracker::Record(std::string_view slo_class, std::string_view model, Metric metric,
                            int64_t now_us, double value_ms) {
  std::lock_guard lock(mu_);
  if (Series* s = SeriesFor(slo_class, model)) s->Add(metric, now_us, value_ms);
}

void LatencyTracker::RecordRequest(std::string_view slo_class, std::string_view model,
                                   int64_t now_us, const RequestSample& sample) {
  std::lock_guard lock(mu_);
  Series* s = SeriesFor(slo_class, model);
  if (s == nullptr) return;
  if (sample.ttft_ms) s->Add(Metric::kTtft, now_us, *sample.ttft_ms);
  if (sample.tpot_ms) s->Add(Metric::kTpot, now_us, *sample.tpot_ms);
  if (sample.queue_ms) s->Add(Metric::kQueue, now_us, *sample.queue_ms);
  if (sample.e2e_ms) s->Add(Metric::kE2e, now_us, *sample.e2e_ms);
  for (double gap : sample.itl_ms) s->Add(Metric::kItl, now_us, gap);
}

TrackerSnapshot LatencyTracker::Snapshot(int64_t now_us, const SinceByClass* since_by_class) const {
  TrackerSnapshot snap;
  snap.at_us = now_us;
  std::lock_guard lock(mu_);
  snap.dropped_series_records = dropped_;
  for (const auto& [cls, models] : series_) {
    SeriesSnapshot merged_row;
    merged_row.slo_class = cls;
    std::array<LogHistogram, kMetricCount> class_hist;
    std::optional<int64_t> since;
    if (since_by_class != nullptr) {
      if (auto it = since_by_class->find(cls); it != since_by_class->end()) since = it->second;
    }
    std::array<LogHistogram, kMetricCount> since_hist;
    for (const auto& [model, series] : models) {
      SeriesSnapshot row;
      row.slo_class = cls;
      row.model = model;
      row.last_record_us = series->last_record_us;
      merged_row.last_record_us = std::max(merged_row.last_record_us, series->last_record_us);
      for (size_t i = 0; i < kMetricCount; ++i) {
        LogHistogram h = series->window[i].Merged(now_us);
        row.window[i] = StatsOf(h);
        row.total[i] = series->total[i];
        class_hist[i].Merge(h);
        if (since) series->window[i].MergeInto(now_us, &since_hist[i], *since);
        merged_row.total[i].Merge(series->total[i]);
      }
      snap.by_class_model.push_back(std::move(row));
    }
    for (size_t i = 0; i < kMetricCount; ++i) merged_row.window[i] = StatsOf(class_hist[i]);
    if (since) {
      merged_row.since_change.emplace();
      for (size_t i = 0; i < kMetricCount; ++i) (*merged_row.since_change)[i] = StatsOf(since_hist[i]);
    }
    snap.by_class.push_back(std::move(merged_row));
  }
  return snap;
}

}  // namespace lifeline::slo
