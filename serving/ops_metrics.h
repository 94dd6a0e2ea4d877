// Operations views of the engine's state, for the dashboard and for what other tools scrape:
//
//   - SLO attainment counts: per (class, model) and per class (models merged), for each of
//     the class's TTFT and end-to-end targets, how many requests were measured and how many
//     were at or under the target, from the cumulative latency histograms. The count is exact
//     when the target is one of the histogram's `le` bounds (every preset target is one);
//     otherwise it counts up to the largest bound below the target, and `le_ms` says which.
//     In /metrics as the counter lifeline_slo_within_target_total{class,model,metric}; the
//     denominator is the histogram's own _count.
//   - vLLM-compatible gauges that the Kubernetes Gateway API Inference Extension's endpoint
//     picker reads from model servers: vllm:num_requests_waiting, vllm:num_requests_running,
//     vllm:kv_cache_usage_perc and its older name vllm:gpu_cache_usage_perc, labelled
//     model_name (docs/scale-out.md).
//
// Ownership: values. Thread-safety: pure functions of snapshots. Failure: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serving/model_engine.h"
#include "slo/latency_tracker.h"
#include "slo/slo_config.h"
#include "slo/target_board.h"

namespace lifeline::serving {

struct AttainmentRow {
  std::string slo_class;
  std::string model;  // "" for the class with all models merged
  slo::Metric metric = slo::Metric::kTtft;
  double target_ms = 0;
  double le_ms = 0;     // the histogram bound counted up to (== target_ms when exact)
  uint64_t count = 0;   // requests measured
  uint64_t within = 0;  // of those, at or under le_ms
};

// Rows for every class with a TTFT or e2e target that has samples, by_class_model first,
// then the merged per-class rows.
// `targets`: the targets in force (autotune's moves), or null for the configured ones.
std::vector<AttainmentRow> AttainmentRows(const slo::SloConfig& config,
                                          const slo::TrackerSnapshot& snapshot,
                                          const slo::TargetBoard* targets = nullptr);
nlohmann::json AttainmentJson(const std::vector<AttainmentRow>& rows);
std::string AttainmentPrometheusText(const std::vector<AttainmentRow>& rows);

// One local engine's gauges as vLLM names them.
struct VllmGauges {
  std::string model;
  int64_t waiting = 0;
  int64_t running = 0;
  double kv_usage = 0;  // used / total KV blocks, [0, 1]
  int64_t kv_blocks_total = 0;  // the pool's blocks (vllm:cache_config_info's num_gpu_blocks)
};
VllmGauges VllmGaugesOf(const std::string& model, const EngineSnapshot& snapshot);
std::string VllmCompatPrometheusText(const std::vector<VllmGauges>& engines);

}  // namespace lifeline::serving
