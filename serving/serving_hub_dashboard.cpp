// ServingHub's operations views: the engine part of GET /v1/dashboard and the extra
// /metrics families (attainment counters, vLLM-compatible gauges). serving/ops_metrics.h
// computes them; this file only gathers one snapshot of each source.
#include <chrono>
#include <map>
#include <mutex>

#include "serving/serving_hub.h"
#include "serving/ops_metrics.h"
#include "slo/slo_report.h"

namespace lifeline::serving {

std::optional<nlohmann::json> ServingHub::DashboardJson() const {
  using nlohmann::json;
  const int64_t now = NowUs();
  // The SLO object takes its own snapshot (with the requests in flight); the attainment rows
  // read the windows a moment later, which may differ by the samples recorded in between.
  const slo::TrackerSnapshot snap = tracker_.Snapshot(now);
  json out = json::object();
  out["slo"] = SloStatus();
  const auto knobs = controller_->knobs();
  json models = json::array();
  for (const auto& e : engines_) {
    const EngineSnapshot s = e->Snapshot();
    json m = {{"name", e->name()},
              {"remote", false},
              {"waiting", s.waiting},
              {"running", s.running},
              {"kv_blocks_total", s.kv_blocks_total},
              {"kv_blocks_used", s.kv_blocks_total - s.kv_blocks_free},
              {"prefix_lookup_tokens", s.prefix_lookup_tokens},
              {"prefix_hit_tokens", s.prefix_hit_tokens},
              {"prompt_tokens", s.prompt_tokens},
              {"generation_tokens", s.generation_tokens},
              {"preemptions", s.preemptions},
              {"steps", s.steps},
              {"max_queue_delay_ms", static_cast<double>(s.max_queue_delay_us) / 1000.0}};
    if (const slo::ModelKnobs* k = knobs->ForModel(e->name())) {
      m["max_running"] = k->max_running;
      m["max_step_tokens"] = k->max_step_tokens;
    }
    models.push_back(std::move(m));
  }
  for (const auto& r : remotes_) {
    const RemoteSnapshot s = r->Snapshot();
    models.push_back({{"name", r->name()},
                      {"remote", true},
                      {"in_flight", s.in_flight},
                      {"completed", s.completed},
                      {"errored", s.errored},
                      {"cancelled", s.cancelled}});
  }
  out["models"] = std::move(models);
  json outcomes = json::array();
  for (const slo::OutcomeCount& c : outcomes_.Snapshot()) {
    outcomes.push_back(
        {{"class", c.slo_class}, {"model", c.model}, {"outcome", c.outcome}, {"count", c.count}});
  }
  out["outcomes"] = std::move(outcomes);
  out["attainment"] = AttainmentJson(AttainmentRows(controller_->config(), snap, target_board_.get()));
  return out;
}

nlohmann::json ServingHub::StateJson() const {
  using nlohmann::json;
  std::map<std::string, int64_t> in_flight;  // by member name
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [handle, f] : owner_) {
      if (f->member != nullptr) ++in_flight[f->member->name];
    }
  }
  json out = {{"ready", Ready()}};
  if (const std::string why = NotReadyReason(); !why.empty()) out["not_ready_reason"] = why;
  json models = json::array();
  for (const auto& e : engines_) {
    const EngineSnapshot s = e->Snapshot();
    models.push_back({{"name", e->name()},
                      {"remote", false},
                      {"in_flight", in_flight[e->name()]},
                      {"queued", s.waiting},
                      {"running", s.running}});
  }
  for (const auto& r : remotes_) {
    models.push_back({{"name", r->name()}, {"remote", true}, {"in_flight", in_flight[r->name()]}});
  }
  out["models"] = std::move(models);
  // Only the ladders that moved: eight preset classes times each model at "normal" would
  // bury the ones that matter.
  json ladder = json::array();
  for (const slo::ClassLevel& c : controller_->knobs()->classes) {
    if (c.level == slo::Level::kNormal) continue;
    ladder.push_back({{"class", c.slo_class},
                      {"model", c.model},
                      {"level", std::string(slo::LevelName(c.level))}});
  }
  out["ladder"] = std::move(ladder);
  return out;
}

std::string ServingHub::OpsMetricsText(const std::vector<EngineSnapshot>& snaps,
                                          const slo::TrackerSnapshot& tracker) const {
  std::vector<VllmGauges> gauges;
  for (size_t i = 0; i < engines_.size() && i < snaps.size(); ++i) {
    gauges.push_back(VllmGaugesOf(engines_[i]->name(), snaps[i]));
  }
  return AttainmentPrometheusText(AttainmentRows(controller_->config(), tracker, target_board_.get())) +
         VllmCompatPrometheusText(gauges);
}

}  // namespace lifeline::serving
