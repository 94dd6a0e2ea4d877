// EngineLoop: the engine-loop half of a ModelEngine (serving/model_engine.h) -- its thread and
// everything only that thread touches: the KV context, the compute pool, the scheduler (and
// its draft model), the books of the accepted requests and their choices, the logits, the
// step's load, the SLO knobs applied at each step, the deadline stop and late requests,
// calibration and the idle speed refresh, and the model file's integrity checks.
//
//   One step (engine_loop_step.cpp): drain the inbox -> load the SLO knobs (batch limits,
//   batching window, class levels) -> stop started requests past their deadline at level >=
//   truncate -> end queued requests that can no longer meet their TTFT budget ->
//   Scheduler::Schedule -> LlamaModel::Eval over the plan's ragged batch (with the block
//   tables of the scheduler's prefix-cached block manager, the KV store's one free list) ->
//   sample / detokenize / stop-match per choice -> events to each request's sink ->
//   Scheduler::Update -> the step's load and counters published. Exactly one terminal event
//   per accepted request (engine_loop.cpp).
//
// The front (ModelEngine) talks to it only through EngineShared (engine_shared.h: the inbox,
// the queue counters, the load board, the failure flag, the heartbeat, the snapshot) and
// Start / Stop.
//
// Ownership: owns the thread, context, pool, scheduler and drafter; borrows the model and the
// options (the front's, which outlive it) and EngineShared (ditto).
// Thread-safety: Start, Stop and Started from the front's threads; the rest runs on the engine
// thread (before Start: on the thread that creates it).
// Failure: creation errors are Status values (KV budget too small, bad speculation options,
// a draft model that cannot speculate); a forward-pass failure fails the requests of that step
// with a 500 error event and the loop goes on; a model file that changed under the server
// (GgufFile::Integrity, after every forward pass and twice a second when idle) fails the model
// for good (FailModel: EngineShared::failed, every request ends with 503 model_failed).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/kernels/compute_pool.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"
#include "scheduler/scheduler.h"
#include "api/serving_api.h"
#include "serving/engine_shared.h"
#include "serving/kv_tier.h"
#include "serving/local_model.h"
#include "serving/model_drafter.h"
#include "serving/live_request.h"
#include "serving/model_engine_options.h"
#include "serving/request_timing.h"
#include "slo/controller.h"

namespace lifeline::serving {

class EngineLoop {
 public:

  // The KV context of a model, sized from options.kv_memory_bytes (and n_ctx, kv_type,
  // max_running, max_step_tokens). Created before the loop because the front's request limits
  // (n_ctx, the KV pool's capacity) come from it.
  struct Kv {
    std::unique_ptr<LlamaContext> ctx;
    int64_t n_ctx = 0;            // positions per sequence
    int32_t n_blocks = 0;         // the KV pool's blocks (the scheduler's BlockManager's)
    int64_t capacity_tokens = 0;  // n_blocks x kKvBlockTokens
    bool windowed = false;        // sliding-window layers keep their own storage (PlanKv)
  };
  // ResourceExhausted when the budget cannot hold one full context (or the window storage).
  static Result<Kv> CreateKv(const ModelConfig& config, const ModelEngineOptions& options);
  // The scheduler, pool and (with `draft_model`) the drafter over `kv`. InvalidArgument for
  // speculation options out of range, or a draft model where speculation is off.
  static Result<std::unique_ptr<EngineLoop>> Create(LlamaModel& model,
                                                    const ModelEngineOptions& options,
                                                    EngineShared& shared, Kv kv,
                                                    std::unique_ptr<LlamaModel> draft_model);
  ~EngineLoop();  // Stop()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Before Start(): the loop's copy of the SLO hooks (the front keeps its own).
  void AttachSlo(SloHooks hooks) { slo_ = std::move(hooks); }
  // Starts the engine thread; with options.calibrate, returns once the calibration steps ran
  // (admission then predicts from the first request on).
  void Start();
  // Sets EngineShared::stop and joins the thread, which first ends every live request with a
  // terminal error ("shutting_down"). Idempotent.
  void Stop();
  bool Started() const { return thread_.joinable(); }

 private:
  EngineLoop(LlamaModel& model, const ModelEngineOptions& options, EngineShared& shared, Kv kv);

  // Level >= truncate: ends started choices whose deadline has passed, as "length".
  void StopAtDeadlines(int64_t now_us);
  // Queued (never scheduled) choices that can no longer meet their TTFT budget: ended with
  // 429 slo_late, or marked late and kept (SubmitSlo::serve_late).
  void ActOnLate(Clock::time_point now);
  Clock::time_point SloNow() const { return slo_.clock ? slo_.clock() : Clock::now(); }
  // A choice the scheduler finished as completed: its last text, then kChoiceDone (several
  // choices) and, when it was the last one open, the request's terminal kDone.
  void Complete(LiveChoice& live, const Request& r);
  static nlohmann::json ChoiceLifeline(const LiveChoice& live, const Request& r);
  // Ends the whole request with `error` (once); its other choices are cancelled.
  void FailGroup(LiveChoice& live, api::GenerationEvent error);
  // Queue and sequence bookkeeping of a choice that leaves the engine (idempotent).
  void Retire(LiveChoice& live);
  // Hands a choice to the scheduler; false (and the request failed) when it refuses.
  bool Enqueue(std::unique_ptr<LiveChoice> live);
  // Choices waiting for their prompt's first choice to fill the prefix cache.
  void ReleaseDeferred(RequestGroup& group, int32_t prompt_index);
  void Loop();
  // Times prefill steps of several sizes and one decode step into slo_.speeds (before the
  // first request; engine thread).
  void Calibrate();
  // Idle, with a stale speed estimate (and options.calibrate): one timed prefill step on
  // scratch KV blocks, so the estimate follows the machine's current co-load.
  void MaybeRefreshSpeed();
  // Speculation's cost model (Scheduler::SetSpecCost): the time of a decode pass of 1 ..
  // spec_step_tokens tokens, timed at start (with speculation on); then each decode-only step
  // the engine runs goes to Scheduler::ObserveSpecCost.
  void CalibrateSpeculation();
  void ObserveSpecCost(const StepPlan& plan, double eval_ms);
  void ApplyKnobs();
  // Latency samples: TTFT and queue time at the request's first token (so the controller
  // sees them about one TTFT after arrival, not one end-to-end time), the rest at the end.
  // Each sample is recorded once per request.
  void RecordFirstToken(LiveChoice& live);
  void RecordFinished(const LiveChoice& live);
  // After the plan is built: publishes the step's load (running prefill / decode counts, the
  // slot cap, the decode interval, the step budget and the estimated end of the step about to
  // be evaluated from `eval_start`) as one value on EngineShared::load.
  void PublishStepLoad(const StepPlan& plan, Clock::time_point eval_start);
  // Nothing runs: the running counts and the step estimate go to zero (published).
  void PublishIdleLoad();
  void DrainInbox();
  bool Step();
  // Step's parts: terminal events of cancelled / expired / preempted choices; the ragged
  // batch through each choice's block table; sampling and events per choice; the
  // scheduler's verdicts.
  void ApplyPlanEnds(const StepPlan& plan);
  void BuildBatch(const StepPlan& plan, std::vector<BatchToken>* batch, std::vector<SeqKv>* kv,
                  std::vector<LiveChoice*>* entry_live);
  StepResult FinishEmbedding(const StepEntry& e, LiveChoice& live, const Status& eval_status,
                             Clock::time_point t_step0, Clock::time_point t_eval0,
                             Clock::time_point t_eval1);
  std::vector<StepResult> ProcessOutputs(const StepPlan& plan, const std::vector<LiveChoice*>& entry_live,
                                         const Status& eval_status, Clock::time_point t_step0,
                                         Clock::time_point t_eval0, Clock::time_point t_eval1);
  void ApplyFinished(std::vector<Request> finished);
  void ObserveDecodeInterval(const StepPlan& plan, Clock::time_point t_step0);
  void ObserveSpeeds(const StepPlan& plan, size_t batch_tokens, Clock::time_point t_eval0,
                     Clock::time_point t_eval1);
  void PublishSnapshot();
  // Every request ends with one 503-class error event (ErrorKind::kUnavailable) of `code`.
  void FailAll(const std::string& code, const std::string& message);
  // The model's file changed under it: log, fail everything, refuse from now on.
  void FailModel(const Status& why);
  // GgufFile::Integrity, at most every 500 ms unless `now` (after a forward pass).
  bool CheckFile(bool now);

  // Borrowed from the front, which outlives the loop.
  const ModelEngineOptions& options_;
  LlamaModel& model_;
  EngineShared& shared_;
  SloHooks slo_;  // set before Start, then read-only

  const int64_t n_ctx_;
  const int64_t capacity_tokens_;  // whole KV pool, positions
  std::unique_ptr<LlamaContext> ctx_;
  std::unique_ptr<ComputePool> pool_;
  std::unique_ptr<Scheduler> scheduler_;  // after pool_: its drafter runs on the pool
  std::unique_ptr<HostKvTier> kv_tier_;   // the scheduler's tier below the pool; may be null
  ModelDrafter* drafter_ = nullptr;  // the scheduler's drafter when it is a draft model
  double step_draft_ms_ = 0;         // the draft model's time in this step's scheduling
  std::unordered_map<RequestId, std::unique_ptr<LiveChoice>> live_;           // by scheduler id
  std::unordered_map<api::RequestHandle, std::shared_ptr<RequestGroup>> groups_;
  std::vector<float> hidden_;  // [max_step_tokens, n_embd]: embedding choices' rows (lazily)
  std::vector<float> logits_;  // [max_running + spec_step_tokens, n_vocab]: rows that sample
  // Prompts whose first choice sampled this step: their waiting choices start after Update.
  std::vector<std::pair<std::shared_ptr<RequestGroup>, int32_t>> release_;

  std::promise<void> calibrated_;    // set by the engine thread after Calibrate()
  Clock::time_point file_checked_{};  // last Integrity() check
  // The step's load, built here and published once per step on EngineShared::load.
  StepLoad step_load_;
  Clock::time_point last_decode_step_{};
  uint64_t knobs_version_ = 0;  // last applied Knobs::version
  std::shared_ptr<const slo::Knobs> knobs_now_;  // loaded at step start
  int64_t window_wait_us_ = 0;  // the last plan's batching-window hold
  // EngineSnapshot counters kept here and copied out by PublishSnapshot.
  int64_t deadline_stops_ = 0;
  int64_t late_shed_ = 0;         // requests ended as late
  int64_t late_served_ = 0;       // requests served although late
  int64_t speed_refreshes_ = 0;   // idle speed refreshes
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int32_t spec_tokens_ = 0;       // drafted tokens per decode in effect (0: off)
  std::thread thread_;
};

}  // namespace lifeline::serving
