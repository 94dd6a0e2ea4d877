#include "slo/latency_tracker.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

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
    case Metric::kTtfa: return "ttfa";
    case Metric::kThink: return "think";
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

LatencyTracker::Series::Series(WindowSpec spec) {
  for (WindowedHistogram& w : window) w = WindowedHistogram(spec);
}

void LatencyTracker::Series::Add(Metric m, int64_t now_us, double value_ms) {
  AddWindowOnly(m, now_us, value_ms);
  total[static_cast<size_t>(m)].Record(value_ms);
}

void LatencyTracker::Series::AddWindowOnly(Metric m, int64_t now_us, double value_ms) {
  window[static_cast<size_t>(m)].Record(now_us, value_ms);
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
  if (sample.ttfa_ms) s->Add(Metric::kTtfa, now_us, *sample.ttfa_ms);
  if (sample.think_ms) s->Add(Metric::kThink, now_us, *sample.think_ms);
  for (double gap : sample.itl_ms) s->Add(Metric::kItl, now_us, gap);
}

TrackerSnapshot LatencyTracker::Snapshot(int64_t now_us, const SinceByClass* since_by_class) const {
  SnapshotOptions options;
  options.since_by_class = since_by_class;
  return Snapshot(now_us, options);
}

TrackerSnapshot LatencyTracker::Snapshot(int64_t now_us, const SinceBySeries* since) const {
  SnapshotOptions options;
  options.since_by_series = since;
  return Snapshot(now_us, options);
}

void LatencyTracker::RecordFloor(std::string_view slo_class, std::string_view model,
                                 int64_t now_us, double floor_ms) {
  if (!(floor_ms > 0) || !std::isfinite(floor_ms)) return;
  std::lock_guard lock(mu_);
  Series* s = SeriesFor(slo_class, model);
  if (s == nullptr) return;
  constexpr double kAlpha = 0.2;
  s->floor_ms = s->has_floor ? s->floor_ms + kAlpha * (floor_ms - s->floor_ms) : floor_ms;
  s->floor_us = now_us;
  s->has_floor = true;
}

void LatencyTracker::RecordLowerBound(std::string_view slo_class, std::string_view model,
                                      Metric metric, int64_t now_us, double value_ms) {
  std::lock_guard lock(mu_);
  if (Series* s = SeriesFor(slo_class, model)) s->AddWindowOnly(metric, now_us, value_ms);
}

namespace {

// The ages of the requests in flight on one row, gathered before the stats are computed.
struct Ages {
  std::vector<double> waiting_ms;  // no first token yet: TTFT lower bounds
  std::vector<double> all_ms;      // every one: e2e lower bounds
  std::vector<double> unanswered_ms;  // no answer text yet (thinking or waiting): TTFA bounds
  int64_t to_think = 0;               // of those, admitted to think
};

InFlightStats StatsOfAges(Ages ages) {
  InFlightStats st;
  st.requests = static_cast<int64_t>(ages.all_ms.size());
  st.waiting = static_cast<int64_t>(ages.waiting_ms.size());
  auto top = [](std::vector<double> v) {
    const size_t k = std::min(v.size(), InFlightStats::kTopAges);
    std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end(),
                      std::greater<>());
    v.resize(k);
    return v;
  };
  st.thinking = std::max<int64_t>(0, static_cast<int64_t>(ages.unanswered_ms.size()) - st.waiting);
  st.to_think = ages.to_think;
  st.waiting_ages_ms = top(std::move(ages.waiting_ms));
  st.ages_ms = top(std::move(ages.all_ms));
  st.unanswered_ages_ms = top(std::move(ages.unanswered_ms));
  return st;
}

// The window stats with the in-flight ages added as lower bounds: TTFT gets the waiting
// requests' ages, TTFA those without answer text yet, e2e every request's; the other
// metrics are the window's.
std::array<WindowStats, kMetricCount> Censored(const std::array<LogHistogram, kMetricCount>& hist,
                                               const Ages& ages) {
  std::array<WindowStats, kMetricCount> out;
  for (size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const std::vector<double>* extra = m == Metric::kTtft   ? &ages.waiting_ms
                                       : m == Metric::kE2e  ? &ages.all_ms
                                       : m == Metric::kTtfa ? &ages.unanswered_ms
                                                            : nullptr;
    if (extra == nullptr || extra->empty()) {
      out[i] = StatsOf(hist[i]);
      continue;
    }
    LogHistogram h = hist[i];
    for (double v : *extra) h.Record(v);
    out[i] = StatsOf(h);
  }
  return out;
}

}  // namespace

TrackerSnapshot LatencyTracker::Snapshot(int64_t now_us, const SnapshotOptions& options) const {
  TrackerSnapshot snap;
  snap.at_us = now_us;
  snap.has_in_flight = options.has_in_flight;
  // The in-flight ages by (class, model) and by class.
  std::map<std::pair<std::string, std::string>, Ages, std::less<>> ages_by_series;
  std::map<std::string, Ages, std::less<>> ages_by_class;
  for (const InFlightRequest& r : options.in_flight) {
    const double age_ms = std::max(0.0, static_cast<double>(now_us - r.first_byte_us) / 1000.0);
    Ages& a = ages_by_series[{r.slo_class, r.model}];
    Ages& c = ages_by_class[r.slo_class];
    a.all_ms.push_back(age_ms);
    c.all_ms.push_back(age_ms);
    if (!r.first_token) {
      a.waiting_ms.push_back(age_ms);
      c.waiting_ms.push_back(age_ms);
    }
    if (!r.first_answer) {
      a.unanswered_ms.push_back(age_ms);
      c.unanswered_ms.push_back(age_ms);
      if (r.thinks) {
        ++a.to_think;
        ++c.to_think;
      }
    }
  }
  const Ages no_ages;
  auto ages_of_series = [&](const std::string& cls, const std::string& model) -> const Ages& {
    auto it = ages_by_series.find(std::make_pair(cls, model));
    return it == ages_by_series.end() ? no_ages : it->second;
  };
  auto since_of = [&](const std::string& cls, const std::string* model) -> std::optional<int64_t> {
    if (model == nullptr) {
      // The class-wide row: since_by_class, or a class-wide ladder's (class, "") entry.
      if (options.since_by_class != nullptr) {
        if (auto it = options.since_by_class->find(cls); it != options.since_by_class->end()) {
          return it->second;
        }
      }
      if (options.since_by_series == nullptr) return std::nullopt;
      auto it = options.since_by_series->find(std::make_pair(cls, std::string()));
      if (it == options.since_by_series->end()) return std::nullopt;
      return it->second;
    }
    if (options.since_by_series == nullptr) return std::nullopt;
    auto it = options.since_by_series->find(std::make_pair(cls, *model));
    if (it == options.since_by_series->end()) return std::nullopt;
    return it->second;
  };
  // Fills a row's since_change, in_flight and censored from its histograms and ages.
  auto finish_row = [&](SeriesSnapshot* row, const std::array<LogHistogram, kMetricCount>& hist,
                        const std::array<LogHistogram, kMetricCount>* since_hist,
                        const Ages& ages) {
    for (size_t i = 0; i < kMetricCount; ++i) row->window[i] = StatsOf(hist[i]);
    if (since_hist != nullptr) {
      // The requests in flight now are evidence of now, so they count as fresh.
      row->since_change = Censored(*since_hist, options.has_in_flight ? ages : Ages{});
    }
    if (options.has_in_flight) {
      row->in_flight = StatsOfAges(ages);
      row->censored = Censored(hist, ages);
    }
  };

  std::lock_guard lock(mu_);
  snap.dropped_series_records = dropped_;
  // A floor older than the window says nothing of now: the class may fit the model again.
  const int64_t window_us = spec_.bucket_us * spec_.n_buckets;
  auto floor_of = [&](const Series& s) {
    return s.has_floor && now_us - s.floor_us <= window_us ? s.floor_ms : 0.0;
  };
  std::set<std::string, std::less<>> classes;
  for (const auto& [cls, models] : series_) classes.insert(cls);
  for (const auto& [cls, ages] : ages_by_class) classes.insert(cls);
  for (const std::string& cls : classes) {
    SeriesSnapshot merged_row;
    merged_row.slo_class = cls;
    std::array<LogHistogram, kMetricCount> class_hist;
    const std::optional<int64_t> class_since = since_of(cls, nullptr);
    std::array<LogHistogram, kMetricCount> class_since_hist;
    // The class's models: those with series, and those with requests in flight only.
    std::set<std::string, std::less<>> model_names;
    auto cls_it = series_.find(cls);
    if (cls_it != series_.end()) {
      for (const auto& [model, series] : cls_it->second) model_names.insert(model);
    }
    for (const auto& [key, ages] : ages_by_series) {
      if (key.first == cls) model_names.insert(key.second);
    }
    for (const std::string& model : model_names) {
      const Series* series = nullptr;
      if (cls_it != series_.end()) {
        auto it = cls_it->second.find(model);
        if (it != cls_it->second.end()) series = it->second.get();
      }
      SeriesSnapshot row;
      row.slo_class = cls;
      row.model = model;
      std::array<LogHistogram, kMetricCount> hist;
      const std::optional<int64_t> since = since_of(cls, &model);
      std::array<LogHistogram, kMetricCount> since_hist;
      if (series != nullptr) {
        row.last_record_us = series->last_record_us;
        row.floor_ms = floor_of(*series);
        merged_row.floor_ms = std::max(merged_row.floor_ms, row.floor_ms);
        merged_row.last_record_us = std::max(merged_row.last_record_us, series->last_record_us);
        for (size_t i = 0; i < kMetricCount; ++i) {
          hist[i] = series->window[i].Merged(now_us);
          row.total[i] = series->total[i];
          class_hist[i].Merge(hist[i]);
          if (since) series->window[i].MergeInto(now_us, &since_hist[i], *since);
          if (class_since) series->window[i].MergeInto(now_us, &class_since_hist[i], *class_since);
          merged_row.total[i].Merge(series->total[i]);
        }
      }
      finish_row(&row, hist, since ? &since_hist : nullptr, ages_of_series(cls, model));
      snap.by_class_model.push_back(std::move(row));
    }
    auto class_ages = ages_by_class.find(cls);
    finish_row(&merged_row, class_hist, class_since ? &class_since_hist : nullptr,
               class_ages == ages_by_class.end() ? no_ages : class_ages->second);
    snap.by_class.push_back(std::move(merged_row));
  }
  return snap;
}

}  // namespace lifeline::slo
