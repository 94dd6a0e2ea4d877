// LocalModel: a locally served model as ServingHub sees it -- the front of an engine loop:
// prepare a request on the caller's thread, enqueue it or refuse it, cancel it, and read the
// load its loop publishes. ModelEngine is the real one (serving/model_engine.h: one model,
// one engine-loop thread); the service's tests script a fake one on a fake clock, so the
// control plane (admission, the ladder, the prediction audit, the queue sensor) is tested
// without depending on how fast a real model runs.
//
// Also the types both sides of that line share: a request's SLO context (SubmitSlo), the
// control-plane objects an engine borrows (SloHooks), a prepared request (PreparedSubmit) and
// the engine's counters (EngineSnapshot).
//
// Thread-safety: every method may be called from any thread, as ModelEngine documents.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/board.h"
#include "api/serving_api.h"
#include "serving/kv_tier_stats.h"
#include "slo/slo_config.h"
#include "slo/target_board.h"
#include "serving/request_timing.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"

namespace lifeline::serving {

struct EngineSnapshot {
  int64_t waiting = 0;
  int64_t running = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;  // free + evictable cached blocks
  int32_t kv_blocks_touched = 0;  // blocks ever used: the KV pool's resident part
  int64_t prefix_hit_tokens = 0;
  int64_t prefix_lookup_tokens = 0;
  int64_t prefix_restored_tokens = 0;  // of the hits, restored from the RAM tier
  int64_t preemptions = 0;
  KvTierStats ram_tier;                // the prefix cache's RAM tier (zeros when off)
  int64_t steps = 0;
  int64_t live_requests = 0;   // accepted and not yet terminated
  int64_t window_waits = 0;    // batching-window holds begun (SchedulerStats::window_waits)
  int64_t max_queue_delay_us = 0;  // the batching window applied now (0: off)
  int64_t context_trims = 0;   // requests whose chat context was trimmed (ladder level >= 2)
  int64_t deadline_stops = 0;  // requests stopped at their deadline (ladder level >= 1)
  int64_t late_shed = 0;       // queued requests ended as late (429 slo_late)
  int64_t late_served = 0;     // queued requests served although late (on_late = "serve")
  int64_t speed_refreshes = 0; // idle re-measurements of a stale speed estimate
  int64_t prompt_tokens = 0;      // prompt tokens of accepted requests (each prompt once)
  int64_t generation_tokens = 0;  // tokens generated, every choice
  int64_t spec_drafted = 0;       // speculation: drafted tokens verified
  int64_t spec_accepted = 0;      // of those, sampled by the model
};

// The SLO control plane's objects an engine uses, borrowed (they must outlive the engine):
// knobs read at step start, the tracker fed TTFT and queue time at a request's first token
// and the rest when it finishes, the speed estimator fed per step, the config
// (ladder.trim_to_tokens), outcome counters ("trimmed", "deadline_stop", "late_shed"). Any may
// be null.
struct SloHooks {
  const slo::KnobBoard* knobs = nullptr;
  slo::LatencyTracker* tracker = nullptr;
  slo::SpeedEstimator* speeds = nullptr;
  const slo::SloConfig* config = nullptr;
  slo::OutcomeCounters* outcomes = nullptr;
  // The clock the SLO decisions inside the engine read (a request's age when it is queued and
  // whether it is late); empty: the steady clock. A seam for tests, which move it forward.
  std::function<Clock::time_point()> clock;
  const slo::TargetBoard* targets = nullptr;  // the targets in force (autotune), or null
};

// A request's SLO context, resolved by the caller (ServingHub).
struct SubmitSlo {
  std::string slo_class;                 // label of the latency samples
  int32_t priority = 0;                  // scheduler priority (higher first)
  std::optional<int64_t> deadline_us;    // absolute, steady clock in us (EDF order / expiry)
  // From the first byte; sizes the context-trim budget and marks a queued request late
  // (below). Unset: resolved from the request's slo_class / user_role / deadline_ms against
  // SloHooks::config for the trim budget; never late.
  std::optional<double> ttft_budget_ms;
  // A request still queued when it can no longer have its first token within ttft_budget_ms
  // (its age plus its own prefill at the measured speed is past it) is late: false ends it at
  // once with 429 slo_late and Retry-After (counted as outcome "late_shed"); true serves it
  // and says so in timings.lifeline.late ("late_served").
  bool serve_late = false;
  // ttft_budget_ms is the request's own deadline_ms: a late request ends with the
  // documented 503 deadline_exceeded instead (its deadline cannot be met), not a 429.
  bool budget_is_deadline = false;
  // The class's thinking budgets, scaled by the ladder's thinking rung (ThinkingPolicy).
  slo::ThinkingPolicy thinking;
};

// What an engine loop publishes for admission once per step, as one consistent value
// (ModelEngine::Load adds the queue counters kept on the submitting side).
struct StepLoad {
  int64_t running_prefill_tokens = 0;      // started sequences' prefill (or recompute) left
  int32_t running_decodes = 0;             // sequences decoding: one token in every step
  int32_t running_sequences = 0;           // holding a running slot
  int64_t running_decode_tokens_left = 0;  // their max_tokens left, summed
  int64_t running_decode_min_left = 0;     // ... and the fewest of them
  int32_t max_running = 0;                 // the step's slot cap (knobs applied)
  double decode_interval_ms = 0;           // moving average between steps with decodes
  int64_t step_token_budget = 0;           // tokens per step
  int64_t step_end_estimate_us = 0;        // estimated end of the step in flight (0: none)
};

// Chat turns dropped at the ladder's trim_context level (docs/slo.md).
struct ContextTrim {
  int32_t turns = 0;
  int32_t messages = 0;
  int64_t tokens = 0;  // prompt tokens removed
};

// The engine's books of one accepted request (live_request.h); opaque here.
struct RequestGroup;

// A request prepared for its model (rendered, tokenized, trimmed, limits checked), nothing
// queued or counted yet; dropped unused (routed or refused) it costs nothing.
struct PreparedSubmit {
  int64_t prompt_tokens = 0;  // over all prompts
  // Of those, the ones the prefix cache holds now (an estimate, PrefixMirror): admission
  // prices only the rest, as the scheduler will compute only the rest.
  int64_t cached_prompt_tokens = 0;
  int64_t max_tokens = 0;     // the request's own (or the default), before any cap
  std::shared_ptr<RequestGroup> group;  // the engine's books (null in a fake)
  RequestTiming timing;
  ContextTrim trim;
  std::optional<int64_t> deadline_us;
  std::optional<SubmitSlo> slo;
  // The thinking budget was lowered: "slo" (the ladder's thinking rung), "class_max"; "" not.
  std::string thinking_shortened_by;
  // A thinking request (a chat request to a model with a reasoning format) and its budget
  // after the class and the rung (-1 unlimited). Admission may set thinking_budget_cap: the
  // thinking that fits the TTFA budget at the measured speed (EnqueuePrepared applies it).
  bool thinks = false;
  int64_t thinking_budget_tokens = -1;
  std::optional<int64_t> thinking_budget_cap;
};

class LocalModel {
 public:
  virtual ~LocalModel() = default;

  virtual const std::string& name() const = 0;
  // What /v1/models lists for it (id, context length, chat template, tool-call format;
  // created_unix_s is the caller's).
  virtual api::ModelInfo Info() const = 0;

  // Before Start().
  virtual void AttachSlo(SloHooks hooks) = 0;
  virtual void Start() = 0;
  // Ends every live request with a terminal error ("shutting_down").
  virtual void Stop() = 0;
  virtual bool Healthy() const = 0;
  // Non-empty once the model failed for good: why.
  virtual std::string Failure() const = 0;

  // The three steps of a request (ModelEngine documents them): Prepare on the caller's
  // thread, the caller's admission decision, then EnqueuePrepared with its max_tokens cap
  // (nullopt: accepted; events go to `sink`, exactly one terminal).
  virtual std::variant<PreparedSubmit, api::ApiError> Prepare(
      api::GenerationRequest request, const SubmitSlo* slo) = 0;
  virtual std::optional<api::ApiError> EnqueuePrepared(
      PreparedSubmit prepared, api::RequestHandle handle, api::GenerationSink sink,
      std::optional<int64_t> max_tokens_cap, std::string cap_reason) = 0;
  virtual void Cancel(api::RequestHandle handle) = 0;

  // The work ahead of a request arriving at `now_us`, for admission's prediction.
  virtual slo::QueueLoad Load(int64_t now_us) const = 0;
  // Accepted requests not yet ended.
  virtual int64_t OpenRequests() const = 0;
  virtual EngineSnapshot Snapshot() const = 0;

  // POST /apply-template, /tokenize, /detokenize.
  virtual std::variant<std::string, api::ApiError> ApplyTemplate(
      const api::GenerationRequest& req) const = 0;
  virtual std::variant<std::vector<int32_t>, api::ApiError> Tokenize(
      const api::TokenizeRequest& req) const = 0;
  virtual std::variant<std::string, api::ApiError> Detokenize(
      const api::DetokenizeRequest& req) const = 0;
};

}  // namespace lifeline::serving
