#include "serving/ops_metrics.h"

#include <algorithm>
#include <cmath>

#include "base/kv_block.h"
#include "base/prometheus.h"
#include "slo/histogram.h"

namespace lifeline::serving {

namespace {

// Bounds are written in seconds and targets in milliseconds: a bound "equals" a target when
// they agree to a relative 1e-9 (0.387 s vs 387 ms is not bit-exact after the division).
bool AtOrBelow(double bound_s, double target_ms) {
  const double target_s = target_ms / 1000.0;
  return bound_s <= target_s * (1.0 + 1e-9);
}

void AddRows(const slo::SloClass& c, const slo::SeriesSnapshot& s,
             std::vector<AttainmentRow>* out) {
  const std::pair<slo::Metric, std::optional<double>> targets[] = {
      {slo::Metric::kTtft, c.ttft_p95_ms}, {slo::Metric::kTtfa, c.ttfa_p95_ms},
      {slo::Metric::kE2e, c.e2e_p95_ms}};
  for (const auto& [metric, target] : targets) {
    if (!target || *target <= 0) continue;
    const slo::PromHistogram& h = s.total[static_cast<size_t>(metric)];
    if (h.count() == 0) continue;
    AttainmentRow row;
    row.slo_class = c.name;
    row.model = s.model;
    row.metric = metric;
    row.target_ms = *target;
    row.count = h.count();
    const auto& bounds = h.bounds_s();
    const auto& counts = h.bucket_counts();
    for (size_t i = 0; i < bounds.size() && AtOrBelow(bounds[i], *target); ++i) {
      row.within += counts[i];
      row.le_ms = bounds[i] * 1000.0;
    }
    out->push_back(std::move(row));
  }
}

std::string Escaped(const std::string& v) { return prom::Escape(v); }

}  // namespace

std::vector<AttainmentRow> AttainmentRows(const slo::SloConfig& config,
                                          const slo::TrackerSnapshot& snapshot,
                                          const slo::TargetBoard* targets) {
  std::vector<AttainmentRow> rows;
  auto add = [&](const slo::SeriesSnapshot& s) {
    const slo::SloClass* c = config.FindClass(s.slo_class);
    if (c == nullptr) return;
    AddRows(targets != nullptr ? targets->Apply(*c) : *c, s, &rows);
  };
  for (const slo::SeriesSnapshot& s : snapshot.by_class_model) add(s);
  for (const slo::SeriesSnapshot& s : snapshot.by_class) add(s);
  return rows;
}

nlohmann::json AttainmentJson(const std::vector<AttainmentRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const AttainmentRow& r : rows) {
    out.push_back({{"class", r.slo_class},
                   {"model", r.model.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.model)},
                   {"metric", slo::MetricName(r.metric)},
                   {"target_ms", r.target_ms},
                   {"le_ms", r.le_ms},
                   {"exact", std::abs(r.le_ms - r.target_ms) <= 1e-6 * r.target_ms},
                   {"count", r.count},
                   {"within", r.within}});
  }
  return out;
}

std::string AttainmentPrometheusText(const std::vector<AttainmentRow>& rows) {
  std::string out;
  prom::Family(&out, "lifeline_slo_within_target_total", "counter",
                        "Requests whose TTFT or e2e latency was at or under the class's P95 "
                        "target (divide by the latency histogram's _count for attainment).");
  for (const AttainmentRow& r : rows) {
    if (r.model.empty()) continue;  // per model only: sum by (class) merges them
    const std::string labels = "class=\"" + Escaped(r.slo_class) + "\",model=\"" +
                               Escaped(r.model) + "\",metric=\"" +
                               std::string(slo::MetricName(r.metric)) + "\"";
    prom::Sample(&out, "lifeline_slo_within_target_total", labels,
                          static_cast<double>(r.within));
  }
  return out;
}

VllmGauges VllmGaugesOf(const std::string& model, const EngineSnapshot& s) {
  VllmGauges g;
  g.model = model;
  g.waiting = s.waiting;
  g.running = s.running;
  g.kv_blocks_total = s.kv_blocks_total;
  if (s.kv_blocks_total > 0) {
    const int32_t used = std::clamp(s.kv_blocks_total - s.kv_blocks_free, 0, s.kv_blocks_total);
    g.kv_usage = static_cast<double>(used) / static_cast<double>(s.kv_blocks_total);
  }
  return g;
}

std::string VllmCompatPrometheusText(const std::vector<VllmGauges>& engines) {
  std::string out;
  auto family = [&](const char* name, const char* help, auto value) {
    prom::Family(&out, name, "gauge", help);
    for (const VllmGauges& g : engines) {
      prom::Sample(&out, name, "model_name=\"" + Escaped(g.model) + "\"", value(g));
    }
  };
  family("vllm:num_requests_waiting",
         "Alias of lifeline_queue_depth for vLLM-compatible routers (requests waiting).",
         [](const VllmGauges& g) { return static_cast<double>(g.waiting); });
  family("vllm:num_requests_running",
         "Alias of lifeline_running_sequences for vLLM-compatible routers.",
         [](const VllmGauges& g) { return static_cast<double>(g.running); });
  family("vllm:kv_cache_usage_perc",
         "KV cache blocks in use / total (1 = full), for vLLM-compatible routers.",
         [](const VllmGauges& g) { return g.kv_usage; });
  family("vllm:gpu_cache_usage_perc",
         "Older vLLM name of vllm:kv_cache_usage_perc (same value; CPU memory here).",
         [](const VllmGauges& g) { return g.kv_usage; });
  // The cache's shape, as vLLM publishes it in its info gauge's labels: the Inference
  // Extension's prefix-cache scorer (autoTune) sizes its per-server prefix index from
  // block_size and num_gpu_blocks (docs/scale-out.md). Blocks live in CPU memory here.
  prom::Family(&out, "vllm:cache_config_info", "gauge",
               "Information of the KV cache (block_size in tokens, num_gpu_blocks: the KV pool's "
               "blocks, in CPU memory here); value 1.");
  for (const VllmGauges& g : engines) {
    prom::Sample(&out, "vllm:cache_config_info",
                 "model_name=\"" + Escaped(g.model) + "\",block_size=\"" +
                     std::to_string(kKvBlockTokens) + "\",num_gpu_blocks=\"" +
                     std::to_string(g.kv_blocks_total) + "\"",
                 1.0);
  }
  return out;
}

}  // namespace lifeline::serving
