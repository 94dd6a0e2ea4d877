#include "slo/slo_report.h"

#include <algorithm>
#include <map>

#include "base/prometheus.h"

namespace lifeline::slo {

namespace {

using nlohmann::json;

json OptMs(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json StatsJson(const WindowStats& w) {
  return json{{"count", w.count}, {"p50_ms", w.p50_ms}, {"p95_ms", w.p95_ms},
              {"p99_ms", w.p99_ms}, {"mean_ms", w.mean_ms}};
}

json SeriesJson(const SeriesSnapshot& s) {
  json out = json::object();
  for (Metric m : kAllMetrics) out[std::string(MetricName(m))] = StatsJson(s[m]);
  return out;
}

json PressureJson(const Pressure& p) {
  if (!p.has_signal) return nullptr;
  return json{{"ratio", p.ratio}, {"metric", MetricName(p.metric)}, {"p95_ms", p.p95_ms},
              {"target_ms", p.target_ms}, {"samples", p.samples}};
}

json InFlightJson(const InFlightStats& f) {
  return json{{"requests", f.requests},
              {"waiting", f.waiting},
              {"oldest_waiting_ms", f.waiting_ages_ms.empty() ? json(nullptr)
                                                              : json(f.waiting_ages_ms.front())},
              {"oldest_ms", f.ages_ms.empty() ? json(nullptr) : json(f.ages_ms.front())}};
}

// One (class, model) ladder.
json LadderJson(const ClassStatus& st, const TrackerSnapshot& snap, int64_t now_us) {
  json j = {{"model", st.model},
            {"level", static_cast<int>(st.level)},
            {"level_name", LevelName(st.level)},
            {"level_age_ms", static_cast<double>(now_us - st.level_since_us) / 1000.0},
            {"healthy_ticks", st.healthy_ticks},
            {"idle_ticks", st.idle_ticks},
            {"admission_margin_scale", st.margin_scale},
            {"thinking_scale", st.thinking_scale},
            {"pressure", PressureJson(st.last)}};
  const SeriesSnapshot* row =
      st.model.empty() ? snap.FindClass(st.slo_class) : snap.Find(st.slo_class, st.model);
  j["in_flight"] = row != nullptr && snap.has_in_flight ? InFlightJson(row->in_flight)
                                                        : json(nullptr);
  return j;
}

// The class as a whole shows its most degraded ladder (level, age, pressure, margin); each
// (class, model) ladder is in `ladders`.
json ClassJson(const SloClass& c, const std::vector<const ClassStatus*>& ladders,
               const TrackerSnapshot& snap, int64_t now_us) {
  json j = {{"name", c.name},
            {"priority", c.priority},
            {"max_level", c.max_level},
            {"targets",
             {{"ttft_p95_ms", OptMs(c.ttft_p95_ms)},
              {"ttfa_p95_ms", OptMs(c.ttfa_p95_ms)},
              {"e2e_p95_ms", OptMs(c.e2e_p95_ms)},
              {"tpot_p95_ms", OptMs(c.tpot_p95_ms)}}}};
  const ClassStatus* worst = nullptr;
  double margin = 1.0;
  for (const ClassStatus* st : ladders) {
    if (worst == nullptr || st->level > worst->level ||
        (st->level == worst->level && st->last.has_signal &&
         (!worst->last.has_signal || st->last.ratio > worst->last.ratio))) {
      worst = st;
    }
    margin = std::max(margin, st->margin_scale);
  }
  const Level level = worst ? worst->level : Level::kNormal;
  j["level"] = static_cast<int>(level);
  j["level_name"] = LevelName(level);
  j["level_age_ms"] = worst ? static_cast<double>(now_us - worst->level_since_us) / 1000.0 : 0.0;
  j["healthy_ticks"] = worst ? worst->healthy_ticks : 0;
  j["admission_margin_scale"] = margin;
  j["pressure"] = worst ? PressureJson(worst->last) : json(nullptr);
  json ladder_rows = json::array();
  for (const ClassStatus* st : ladders) ladder_rows.push_back(LadderJson(*st, snap, now_us));
  j["ladders"] = std::move(ladder_rows);
  const SeriesSnapshot* all = snap.FindClass(c.name);
  // A class whose requests are in flight but none has produced a sample has no live stats.
  const bool has_samples =
      all != nullptr && std::any_of(all->window.begin(), all->window.end(),
                                    [](const WindowStats& w) { return w.count > 0; });
  j["live"] = has_samples ? SeriesJson(*all) : json(nullptr);
  json by_model = json::object();
  for (const SeriesSnapshot& s : snap.by_class_model) {
    if (s.slo_class == c.name) by_model[s.model] = SeriesJson(s);
  }
  j["by_model"] = std::move(by_model);
  return j;
}

json ModelsJson(const SloConfig& config, const Knobs& knobs) {
  json out = json::array();
  auto add = [&](const std::string& name, const ModelEntry* e) {
    json m = {{"name", name}, {"remote", e != nullptr && e->remote()}};
    if (e != nullptr && e->remote()) {
      m["url"] = e->url;
      m["remote_model"] = e->remote_model;
    }
    m["cascade"] = e != nullptr && e->in_cascade;
    const ModelEntry* next = config.NextInCascade(name);
    m["next_in_cascade"] = next ? json(next->name) : json(nullptr);
    if (const ModelKnobs* k = knobs.ForModel(name)) {
      m["max_running"] = k->max_running;
      m["max_step_tokens"] = k->max_step_tokens;
    }
    out.push_back(std::move(m));
  };
  for (const ModelEntry& e : config.models) add(e.name, &e);
  for (const ModelKnobs& k : knobs.models) {
    if (config.FindModel(k.model) == nullptr) add(k.model, nullptr);
  }
  return out;
}

json EventJson(const LadderEvent& e, int64_t now_us) {
  return json{{"at_ms", static_cast<double>(e.at_us) / 1000.0},
              {"age_ms", static_cast<double>(now_us - e.at_us) / 1000.0},
              {"class", e.slo_class},
              {"model", e.model.empty() ? json(nullptr) : json(e.model)},
              {"from", LevelName(e.from)},
              {"to", LevelName(e.to)},
              {"from_level", static_cast<int>(e.from)},
              {"to_level", static_cast<int>(e.to)},
              {"reason", e.reason},
              {"metric", e.target_ms > 0 ? json(MetricName(e.metric)) : json(nullptr)},
              {"p95_ms", e.target_ms > 0 ? json(e.p95_ms) : json(nullptr)},
              {"target_ms", e.target_ms > 0 ? json(e.target_ms) : json(nullptr)}};
}

using prom::Labels;

void AppendWindowGauges(std::string* out, const TrackerSnapshot& snap) {
  struct Q {
    const char* name;
    double WindowStats::*field;
    const char* help;
  };
  const Q quantiles[] = {
      {"lifeline_slo_window_p50_seconds", &WindowStats::p50_ms, "Windowed P50 latency by class."},
      {"lifeline_slo_window_p95_seconds", &WindowStats::p95_ms, "Windowed P95 latency by class."},
      {"lifeline_slo_window_p99_seconds", &WindowStats::p99_ms, "Windowed P99 latency by class."},
  };
  for (const Q& q : quantiles) {
    prom::Family(out, q.name, "gauge", q.help);
    for (const SeriesSnapshot& s : snap.by_class) {
      for (Metric m : kAllMetrics) {
        if (s[m].count == 0) continue;
        prom::Sample(out, q.name, Labels({{"class", s.slo_class}, {"metric", MetricName(m)}}),
                         s[m].*q.field / 1000.0);
      }
    }
  }
  prom::Family(out, "lifeline_slo_window_samples", "gauge",
                   "Samples in the sliding window by class and metric.");
  for (const SeriesSnapshot& s : snap.by_class) {
    for (Metric m : kAllMetrics) {
      prom::Sample(out, "lifeline_slo_window_samples",
                       Labels({{"class", s.slo_class}, {"metric", MetricName(m)}}),
                       static_cast<double>(s[m].count));
    }
  }
}

}  // namespace

nlohmann::json PredictionAuditJson(const PredictionAudit::Stats& st) {
  const bool any = st.recent > 0;
  return json{{"checked", st.count},
              {"correction", st.correction},
              {"last_ratio", st.count > 0 ? json(st.last_ratio) : json(nullptr)},
              {"recent", st.recent},
              {"ratio_p10", any ? json(st.p10) : json(nullptr)},
              {"ratio_p50", any ? json(st.p50) : json(nullptr)},
              {"ratio_p90", any ? json(st.p90) : json(nullptr)},
              {"within_25pct", any ? json(st.within_25pct) : json(nullptr)}};
}

std::string PredictionAuditPrometheusText(const std::vector<ModelAudit>& audits) {
  std::string out;
  const std::span<const double> bounds = PredictionAudit::RatioBounds();
  prom::Family(&out, "lifeline_admission_prediction_ratio", "histogram",
               "Measured / predicted time from admission to the first token, by model "
               "(1 = exact; predictions as made, with the correction then in force).");
  for (const ModelAudit& a : audits) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += i < a.stats.buckets.size() ? a.stats.buckets[i] : 0;
      const std::string le = i < bounds.size() ? prom::Number(bounds[i]) : "+Inf";
      prom::Sample(&out, "lifeline_admission_prediction_ratio_bucket",
                   Labels({{"model", a.model}, {"le", le}}), static_cast<double>(cumulative));
    }
    prom::Sample(&out, "lifeline_admission_prediction_ratio_sum", Labels({{"model", a.model}}),
                 a.stats.sum);
    prom::Sample(&out, "lifeline_admission_prediction_ratio_count", Labels({{"model", a.model}}),
                 static_cast<double>(a.stats.count));
  }
  prom::Family(&out, "lifeline_admission_prediction_correction", "gauge",
               "Factor admission multiplies its TTFT predictions by, learned from measured "
               "first tokens, by model.");
  for (const ModelAudit& a : audits) {
    prom::Sample(&out, "lifeline_admission_prediction_correction", Labels({{"model", a.model}}),
                 a.stats.correction);
  }
  return out;
}

std::string_view HistogramFamily(Metric m) {
  switch (m) {
    case Metric::kTtft: return "lifeline_ttft_seconds";
    case Metric::kTpot: return "lifeline_time_per_output_token_seconds";
    case Metric::kItl: return "lifeline_inter_token_latency_seconds";
    case Metric::kQueue: return "lifeline_queue_time_seconds";
    case Metric::kE2e: return "lifeline_e2e_latency_seconds";
    case Metric::kTtfa: return "lifeline_ttfa_seconds";
    case Metric::kThink: return "lifeline_thinking_seconds";
  }
  return "lifeline_unknown_seconds";
}

nlohmann::json SloStatusJson(const Controller& controller, const TrackerSnapshot& snapshot,
                             int64_t now_us, size_t max_events) {
  const SloConfig& config = controller.config();
  const std::vector<ClassStatus> statuses = controller.ClassStatuses();
  const std::shared_ptr<const Knobs> knobs = controller.knobs();
  json j = {{"object", "slo.status"},
            {"now_ms", static_cast<double>(now_us) / 1000.0},
            {"window_s", static_cast<double>(config.window.bucket_us) *
                             config.window.n_buckets / 1e6},
            {"default_class", config.default_class},
            {"knobs_version", knobs->version}};
  json classes = json::array();
  for (const SloClass& configured : config.classes) {
    const SloClass c = controller.Effective(configured);
    std::vector<const ClassStatus*> ladders;
    for (const ClassStatus& s : statuses) {
      if (s.slo_class == c.name) ladders.push_back(&s);
    }
    json cj = ClassJson(c, ladders, snapshot, now_us);
    // Where each target came from: the config, or autotune's move (docs/economics.md).
    cj["target_sources"] = {{"ttft_p95_ms", TtftTargetSource(controller.target_board(), c.name)}};
    cj["configured_targets"] = {{"ttft_p95_ms", OptMs(configured.ttft_p95_ms)}};
    classes.push_back(std::move(cj));
  }
  j["classes"] = std::move(classes);
  json roles = json::object();
  for (const auto& [name, m] : config.roles) roles[name] = m;
  j["roles"] = std::move(roles);
  j["models"] = ModelsJson(config, *knobs);
  j["batching"] = {{"floor", config.batching.floor},
                   {"cap", config.batching.cap},
                   {"preferred_batch_sizes", config.batching.preferred_batch_sizes},
                   {"max_queue_delay_ms", config.batching.max_queue_delay_ms}};
  const std::vector<LadderEvent> events = controller.RecentEvents();
  const size_t first = events.size() > max_events ? events.size() - max_events : 0;
  json ev = json::array();
  for (size_t i = first; i < events.size(); ++i) ev.push_back(EventJson(events[i], now_us));
  j["events_total"] = controller.EventsTotal();
  j["events"] = std::move(ev);
  // The thinking rung's moves (docs/reasoning.md), newest last.
  const std::vector<ThinkingChange> thinking = controller.RecentThinkingChanges();
  const size_t first_thinking = thinking.size() > max_events ? thinking.size() - max_events : 0;
  json th = json::array();
  for (size_t i = first_thinking; i < thinking.size(); ++i) {
    const ThinkingChange& t = thinking[i];
    th.push_back({{"age_ms", static_cast<double>(now_us - t.at_us) / 1000.0},
                  {"class", t.slo_class},
                  {"model", t.model},
                  {"from", t.from},
                  {"to", t.to},
                  {"reason", t.reason}});
  }
  j["thinking_changes"] = std::move(th);
  return j;
}

std::string SloPrometheusText(const Controller& controller, const TrackerSnapshot& snapshot,
                              const OutcomeCounters* outcomes) {
  const SloConfig& config = controller.config();
  std::string out;
  for (Metric m : kAllMetrics) {
    const std::string family(HistogramFamily(m));
    prom::Family(&out, family, "histogram",
                     "Latency (" + std::string(MetricName(m)) + ") by SLO class and model.");
    for (const SeriesSnapshot& s : snapshot.by_class_model) {
      AppendPromHistogram(&out, family, Labels({{"class", s.slo_class}, {"model", s.model}}),
                          s.total[static_cast<size_t>(m)]);
    }
  }
  prom::Family(&out, "lifeline_slo_target_seconds", "gauge", "P95 target by class and metric.");
  for (const SloClass& configured : config.classes) {
    const SloClass c = controller.Effective(configured);
    const std::pair<Metric, std::optional<double>> targets[] = {
        {Metric::kTtft, c.ttft_p95_ms}, {Metric::kTtfa, c.ttfa_p95_ms},
        {Metric::kE2e, c.e2e_p95_ms}, {Metric::kTpot, c.tpot_p95_ms}};
    for (const auto& [m, t] : targets) {
      if (t) {
        prom::Sample(&out, "lifeline_slo_target_seconds",
                         Labels({{"class", c.name}, {"metric", MetricName(m)}}), *t / 1000.0);
      }
    }
  }
  AppendWindowGauges(&out, snapshot);
  const std::vector<ClassStatus> statuses = controller.ClassStatuses();
  prom::Family(&out, "lifeline_slo_degradation_level", "gauge",
                   "Degradation ladder level by class, the highest over its models "
                   "(0 normal .. 4 shed).");
  {
    std::map<std::string, Level> by_class;
    for (const ClassStatus& s : statuses) {
      Level& l = by_class[s.slo_class];
      l = std::max(l, s.level);
    }
    for (const auto& [cls, level] : by_class) {
      prom::Sample(&out, "lifeline_slo_degradation_level", Labels({{"class", cls}}),
                   static_cast<double>(level));
    }
  }
  prom::Family(&out, "lifeline_slo_model_degradation_level", "gauge",
               "Degradation ladder level by class and model (0 normal .. 4 shed).");
  for (const ClassStatus& s : statuses) {
    if (s.model.empty()) continue;
    prom::Sample(&out, "lifeline_slo_model_degradation_level",
                 Labels({{"class", s.slo_class}, {"model", s.model}}), static_cast<double>(s.level));
  }
  prom::Family(&out, "lifeline_slo_ladder_transitions_total", "counter",
                   "Degradation ladder transitions by class (and model).");
  for (const TransitionCount& t : controller.TransitionCounts()) {
    prom::Sample(&out, "lifeline_slo_ladder_transitions_total",
                 t.model.empty()
                     ? Labels({{"class", t.slo_class}, {"from", LevelName(t.from)},
                               {"to", LevelName(t.to)}})
                     : Labels({{"class", t.slo_class}, {"model", t.model},
                               {"from", LevelName(t.from)}, {"to", LevelName(t.to)}}),
                 static_cast<double>(t.count));
  }
  prom::Family(&out, "lifeline_slo_thinking_scale", "gauge",
               "The thinking rung: thinking budgets are multiplied by this, by class and model "
               "(1: not shortened).");
  for (const ClassStatus& s : statuses) {
    prom::Sample(&out, "lifeline_slo_thinking_scale",
                 s.model.empty() ? Labels({{"class", s.slo_class}})
                                 : Labels({{"class", s.slo_class}, {"model", s.model}}),
                 s.thinking_scale);
  }
  prom::Family(&out, "lifeline_slo_thinking_changes_total", "counter",
               "Moves of the thinking rung: shortened (down) or restored (up).");
  prom::Sample(&out, "lifeline_slo_thinking_changes_total", Labels({{"direction", "down"}}),
               static_cast<double>(controller.ThinkingCuts()));
  prom::Sample(&out, "lifeline_slo_thinking_changes_total", Labels({{"direction", "up"}}),
               static_cast<double>(controller.ThinkingRestores()));
  const std::shared_ptr<const Knobs> knobs = controller.knobs();
  prom::Family(&out, "lifeline_batch_max_running", "gauge",
                   "Adaptive limit of running sequences per step, by model.");
  for (const ModelKnobs& k : knobs->models) {
    prom::Sample(&out, "lifeline_batch_max_running", Labels({{"model", k.model}}),
                     k.max_running);
  }
  prom::Family(&out, "lifeline_batch_max_step_tokens", "gauge",
                   "Adaptive token budget per step, by model.");
  for (const ModelKnobs& k : knobs->models) {
    prom::Sample(&out, "lifeline_batch_max_step_tokens", Labels({{"model", k.model}}),
                     static_cast<double>(k.max_step_tokens));
  }
  if (outcomes != nullptr) {
    prom::Family(&out, "lifeline_slo_requests_total", "counter",
                     "Requests by SLO class, model and admission outcome.");
    for (const OutcomeCount& o : outcomes->Snapshot()) {
      prom::Sample(&out, "lifeline_slo_requests_total",
                       Labels({{"class", o.slo_class}, {"model", o.model}, {"outcome", o.outcome}}),
                       static_cast<double>(o.count));
    }
  }
  return out;
}

}  // namespace lifeline::slo
