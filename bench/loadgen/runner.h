// Runs a benchmark: one step per offered load (a single load, or a --sweep), each step sending
// the same planned requests to every target, interleaved in time rather than one target after
// the other:
//
//   open loop (rate):  one arrival schedule per step (Poisson or gamma, seeded); target k sends
//                      request i at arrival_i + k / (rate * n_targets), so the targets alternate
//                      A, B, A, B and each one sees exactly the same arrival process.
//   closed loop:       each target keeps `concurrency` requests in flight; a finished request
//                      is replaced at once until the step's request count or duration is used.
//
// In a sweep a target's step stops early (in-flight requests cancelled, the rest not sent)
// once its SLO P95 is decided above the threshold: more than n - ceil(0.95 n) of its n planned
// requests already failed or exceeded the threshold (counting in-flight ones already past it).
// With no fixed n (closed loop by duration) the rule is "at least 20 done and more than half
// bad". A target that failed a step is skipped at higher loads. So a sweep's run time is
// bounded by the steps up to each target's cliff. With early_stop false, every step runs to
// the end for every target, failed or not.
//
// Ownership: RunLoad owns its event loop and returns every record by value. Thread-safety:
// runs on the calling thread; `progress` is called on it too. Failure: invalid options ->
// InvalidArgument naming the option; per-request failures are recorded, never returned.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "bench/loadgen/record.h"
#include "bench/loadgen/workload.h"

namespace lifeline::loadgen {

enum class LoadMode { kRate, kConcurrency };

struct RunOptions {
  std::vector<TargetSpec> targets;
  WorkloadSpec workload;
  LoadMode mode = LoadMode::kRate;
  std::vector<double> loads;   // ascending; one entry = a single run, several = a sweep
  double burstiness = 1;       // open loop only
  int64_t requests = 0;        // per target and step (0 = bounded by duration_s)
  double duration_s = 0;       // per step (0 = bounded by requests)
  uint64_t seed = 1;
  double timeout_s = 60;       // per request
  double threshold_ms = 387;
  SloMetric metric = SloMetric::kTtft;
  bool metric_from_flag = false;  // false: `metric` is DefaultSloMetric(workload)
  bool early_stop = true;      // sweeps only; false also keeps failed targets in later steps
  int64_t max_in_flight = 4096;  // beyond: recorded as "client_overload", not sent
  double cooldown_s = 0.5;     // pause between sweep steps
};

struct TargetStep {
  bool ran = false;            // false: skipped (failed a lower load)
  bool stopped_early = false;
  int64_t planned = -1;        // requests planned (-1: closed loop bounded by time)
  int64_t sent = 0;
  double wall_s = 0;           // step start .. this target's last response
};

struct StepData {
  double load = 0;
  double start_ms = 0;  // from the run start
  double end_ms = 0;
  std::vector<TargetStep> targets;  // one per target
};

struct RunData {
  std::vector<StepData> steps;
  std::vector<RequestRecord> records;  // every request of every step and target
  int64_t start_unix_ms = 0;           // wall clock at the run start (timeline origin)
  double total_s = 0;
};

struct Progress {
  int step = 0;
  int steps = 0;
  double load = 0;
  int64_t sent = 0;
  int64_t done = 0;
  int64_t errors = 0;
  int64_t in_flight = 0;
  double elapsed_s = 0;  // in this step
  double slo_p95_ms = 0; // over this step's finished requests (NaN before any)
};
using ProgressFn = std::function<void(const Progress&)>;

// The SLO metric when --slo-metric does not name one: TTFT when the requests stream, e2e when
// they do not. A non-streamed response shows its first token only with its last, so its
// "TTFT" is its end-to-end time; judging it as TTFT would name a metric that was not measured.
SloMetric DefaultSloMetric(const WorkloadSpec& w);

Status ValidateRunOptions(const RunOptions& o);

Result<RunData> RunLoad(const RunOptions& o, const ProgressFn& progress);

// Nearest-rank P95 of the SLO metric over one target's records of one step (failures as +inf).
double StepSloP95(const RunData& run, int step, int target, SloMetric metric);

}  // namespace lifeline::loadgen
