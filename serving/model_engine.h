// ModelEngine: one loaded model served by one engine-loop thread.
//
//   HTTP thread: Prepare() renders the chat template, tokenizes, trims, checks the context,
//   sampler and stop limits; the caller decides admission on the prepared size;
//   EnqueuePrepared() applies the decision's max_tokens cap, checks the queue bound and
//   pushes the request into the inbox -- every refusal is answered on this thread, before
//   anything is queued (Submit() is both steps without admission). Cancel() pushes a cancel
//   message.
//   Engine thread: drain inbox -> load the SLO knobs (batch limits, batching window, class
//   levels) -> stop started requests past their deadline at level >= truncate ->
//   Scheduler::Schedule -> LlamaModel::Eval over the plan's ragged batch (with the block
//   tables of the scheduler's prefix-cached block manager, the KV store's one free list)
//   -> sample / detokenize / stop-match per sequence -> events to each request's sink ->
//   Scheduler::Update. Exactly
//   one terminal event per accepted request. At level >= trim_context, Prepare drops old chat
//   turns of requests that allow it before the prompt is counted (docs/slo.md).
//
// Ownership: owns the model, tokenizer, KV context, compute pool, scheduler and thread.
// Thread-safety: Submit, Cancel, Healthy, Snapshot and MetricsText may be called from any
// thread; everything else runs on the engine thread.
// Failure: construction errors are Status values (KV budget too small, bad options); request
// refusals are server::ApiError values (400 / 429); a forward-pass failure fails the
// requests of that step with a 500 error event, and the loop goes on. A model file that
// changes under the server (truncated: a guarded read fault; rewritten in place: its size or
// mtime moved; GgufFile::Integrity, checked after every forward pass and twice a second
// when idle) fails the model for good: the step's outputs are dropped, every request ends
// with one 503 model_failed event, Submit refuses, Healthy() turns false and a line naming
// the file goes to stderr. Restarting the server loads the new file.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>

#include "base/status.h"
#include "engine/kernels/compute_pool.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/scheduler.h"
#include "server/engine_api.h"
#include "serving/chat_setup.h"
#include "serving/local_model.h"
#include "serving/model_drafter.h"
#include "serving/model_engine_options.h"
#include "serving/request_prep.h"
#include "serving/request_timing.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"

namespace lifeline::serving {

class ModelEngine final : public LocalModel {
 public:
  struct Live;                 // one choice's engine-thread state (model_engine_live.h)
  using Group = RequestGroup;  // one accepted request: its choices, sink and usage (ditto)

  // With a draft model, speculation (options.spec_tokens > 0) drafts with it instead of
  // prompt lookup; InvalidArgument when its vocabulary differs from the target's.
  static Result<std::unique_ptr<ModelEngine>> Create(std::unique_ptr<LlamaModel> model,
                                                     std::unique_ptr<Tokenizer> tokenizer,
                                                     const ModelEngineOptions& options,
                                                     DraftModelSpec draft = {});
  ~ModelEngine() override;  // Stop()
  ModelEngine(const ModelEngine&) = delete;
  ModelEngine& operator=(const ModelEngine&) = delete;

  // Starts the engine thread; with options.calibrate, returns once the calibration steps
  // ran (admission then predicts from the first request on).
  void Start() override;
  // Ends every live request with a terminal error ("shutting_down") and joins the thread.
  void Stop() override;

  // A request goes in three steps, on the caller's thread: Prepare (render, tokenize, trim
  // at the ladder's level, check the context, the KV pool and the choices), then the caller's
  // admission decision on the prepared size (EngineService: slo::Decide -> admit, route to
  // the next cascade member, or refuse), then EnqueuePrepared with the decision's
  // max_tokens cap. Nothing is queued or counted before EnqueuePrepared; a Prepared dropped
  // unused (routed or refused) costs nothing.
  using Trim = ContextTrim;
  using Prepared = PreparedSubmit;  // prompt_tokens / max_tokens set by Prepare
  std::variant<Prepared, server::ApiError> Prepare(server::GenerationRequest request,
                                                   const SubmitSlo* slo = nullptr) override;
  // Queues a prepared request (nullopt: the engine will deliver events to `sink`), with
  // max_tokens lowered to `max_tokens_cap` (the ladder's truncation, reported with
  // `cap_reason`), or refuses it: the model's queue is full (429) or the server is stopping.
  std::optional<server::ApiError> EnqueuePrepared(Prepared prepared, server::RequestHandle handle,
                                                  server::GenerationSink sink,
                                                  std::optional<int64_t> max_tokens_cap = {},
                                                  std::string cap_reason = {}) override;
  // Prepare + EnqueuePrepared without an admission decision (tests, single-model use).
  std::optional<server::ApiError> Submit(server::RequestHandle handle,
                                         server::GenerationRequest request,
                                         server::GenerationSink sink,
                                         const SubmitSlo* slo = nullptr);
  // Before Start().
  void AttachSlo(SloHooks hooks) override { slo_ = std::move(hooks); }
  // Prompt tokens accepted and not yet scheduled (for admission's queue estimate).
  int64_t QueuedPromptTokens() const { return queued_prompt_tokens_.load(); }
  int64_t QueuedRequests() const { return accepted_not_started_.load(); }
  // Accepted requests not yet ended (queued or running).
  int64_t OpenRequests() const override { return open_requests_.load(); }
  // The work ahead of a request arriving at `now_us` (steady clock, us), for admission's
  // TTFT prediction: the queue above, plus what the engine thread publishes at each step
  // (running prefill left, decoding sequences, the step token budget, the estimated end of
  // the step in flight). A handful of relaxed atomic loads; the fields may come from
  // adjacent steps, which is fine for an estimate.
  slo::QueueLoad Load(int64_t now_us) const override;
  void Cancel(server::RequestHandle handle) override;

  bool Healthy() const override;
  // Non-empty once the model failed (its file changed under it): why, naming the file.
  std::string Failure() const override;
  EngineSnapshot Snapshot() const override;
  const std::string& name() const override { return options_.name; }
  server::ModelInfo Info() const override;
  int64_t n_ctx() const { return n_ctx_; }
  const LlamaModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const chat::ChatTemplate& chat_template() const { return *chat_template_; }
  // How the template writes tool calls (detected from its source at load).
  toolcall::ToolCallFormat tool_call_format() const { return prep_.tool_format; }
  // Non-empty when the GGUF had no chat template and the chatml preset is used, or when the
  // template failed its dry run (a warning for the start-up log).
  const std::string& chat_template_note() const { return chat_template_note_; }
  // POST /apply-template: the rendered chat prompt of `req`, or the error a chat request
  // with this body would get.
  std::variant<std::string, server::ApiError> ApplyTemplate(
      const server::GenerationRequest& req) const override;
  // POST /tokenize: the ids a completion prompt of this text gets with add_special (BOS per
  // the vocab, no EOS) -- the same Encode call.
  std::variant<std::vector<int32_t>, server::ApiError> Tokenize(
      const server::TokenizeRequest& req) const override;
  // POST /detokenize: SentencePiece's decoding, so Detokenize(Tokenize(x)) == x: control
  // tokens (BOS) add nothing, and an SPM vocab's dummy-prefix space before the first piece is
  // dropped. 400 naming tokens[i] and the vocabulary size for an id outside it.
  std::variant<std::string, server::ApiError> Detokenize(
      const server::DetokenizeRequest& req) const override;

 private:
  struct Message {  // inbox entry
    server::RequestHandle handle = 0;
    std::shared_ptr<Group> group;             // null for a cancel
    std::vector<std::unique_ptr<Live>> lives; // the choices to schedule now
  };

  ModelEngine(std::unique_ptr<LlamaModel> model, std::unique_ptr<Tokenizer> tokenizer,
              const ModelEngineOptions& options);
  // Level >= trim_context: drops the oldest turns between the system message(s) and the last
  // user turn until the prompt fits `budget_tokens` (or only system + last turn are left).
  // Returns false (and leaves *prompt) when there is nothing to drop.
  bool TrimContext(const server::GenerationRequest& req, int64_t budget_tokens,
                   std::vector<int32_t>* prompt, Trim* trim) const;
  // The context-trim budget of a request (docs/slo.md): ladder.trim_to_tokens, lowered to
  // what the TTFT budget leaves at the measured prefill speed behind the queued prompts.
  int64_t TrimBudgetTokens(const SubmitSlo& slo, const server::GenerationRequest& req) const;
  // Level >= truncate: ends started choices whose deadline has passed, as "length".
  void StopAtDeadlines(int64_t now_us);
  // Queued (never scheduled) choices that can no longer meet their TTFT budget: ended with
  // 429 slo_late, or marked late and kept (SubmitSlo::serve_late).
  void ActOnLate(Clock::time_point now);
  Clock::time_point SloNow() const { return slo_.clock ? slo_.clock() : Clock::now(); }
  // A choice the scheduler finished as completed: its last text, then kChoiceDone (several
  // choices) and, when it was the last one open, the request's terminal kDone.
  void Complete(Live& live, const Request& r);
  static nlohmann::json ChoiceLifeline(const Live& live, const Request& r);
  // Ends the whole request with `error` (once); its other choices are cancelled.
  void FailGroup(Live& live, server::GenerationEvent error);
  // Queue and sequence bookkeeping of a choice that leaves the engine (idempotent).
  void Retire(Live& live);
  // Hands a choice to the scheduler; false (and the request failed) when it refuses.
  bool Enqueue(std::unique_ptr<Live> live);
  // Choices waiting for their prompt's first choice to fill the prefix cache.
  void ReleaseDeferred(Group& group, int32_t prompt_index);
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
  void RecordFirstToken(Live& live);
  void RecordFinished(const Live& live);
  // After the plan is built: publishes the step's load (running prefill / decode counts, the
  // slot cap, the decode interval, the step budget and the estimated end of the step about to
  // be evaluated from `eval_start`) as one value on load_board_.
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
                  std::vector<Live*>* entry_live);
  std::vector<StepResult> ProcessOutputs(const StepPlan& plan, const std::vector<Live*>& entry_live,
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

  ModelEngineOptions options_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;  // set by Create
  PrepContext prep_;                                 // set by Create
  std::string chat_template_note_;                   // ResolvedChatTemplate::fallback_note
  int64_t n_ctx_ = 0;
  int64_t capacity_tokens_ = 0;  // whole KV pool, positions

  // Engine-thread state.
  std::unique_ptr<LlamaContext> ctx_;
  std::unique_ptr<ComputePool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  ModelDrafter* drafter_ = nullptr;  // the scheduler's drafter when it is a draft model
  double step_draft_ms_ = 0;         // the draft model's time in this step's scheduling
  std::unordered_map<RequestId, std::unique_ptr<Live>> live_;           // by scheduler id
  std::unordered_map<server::RequestHandle, std::shared_ptr<Group>> groups_;
  std::vector<float> logits_;  // [max_running + spec_step_tokens, n_vocab]: rows that sample
  // Prompts whose first choice sampled this step: their waiting choices start after Update.
  std::vector<std::pair<std::shared_ptr<Group>, int32_t>> release_;

  // Shared with other threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> inbox_;
  bool stop_ = false;
  std::atomic<int64_t> accepted_not_started_{0};  // in the inbox or waiting (for the 429 bound)
  std::atomic<int64_t> heartbeat_ns_{0};
  std::promise<void> calibrated_;  // set by the engine thread after Calibrate()
  std::atomic<bool> failed_{false};  // the model's file changed under it (FailModel)
  mutable std::mutex failure_mu_;
  std::string failure_;              // why (under failure_mu_)
  Clock::time_point file_checked_{};  // engine thread: last Integrity() check
  std::atomic<int64_t> queued_prompt_tokens_{0};
  std::atomic<int64_t> queued_decode_tokens_{0};  // max_tokens of the queued choices
  // Accepted requests whose terminal event has not gone out; lowered just before it does,
  // so a client never sees its answer while admission still counts the request.
  std::atomic<int64_t> open_requests_{0};
  // The step's load: built on the engine thread (step_load_) and published once per step
  // (and when the engine goes idle) as one value that Submit threads read (Load).
  StepLoad step_load_;
  Board<StepLoad> load_board_;
  Clock::time_point last_decode_step_{};                 // engine thread only
  SloHooks slo_;
  uint64_t knobs_version_ = 0;  // engine thread: last applied Knobs::version
  std::shared_ptr<const slo::Knobs> knobs_now_;  // engine thread: loaded at step start
  int64_t window_wait_us_ = 0;  // engine thread: the last plan's batching-window hold
  int64_t deadline_stops_ = 0;  // engine thread
  int64_t late_shed_ = 0;       // engine thread: requests ended as late (EngineSnapshot)
  int64_t late_served_ = 0;     // engine thread: requests served although late
  int64_t speed_refreshes_ = 0; // engine thread: idle speed refreshes (EngineSnapshot)
  int64_t prompt_tokens_ = 0;       // engine thread: EngineSnapshot::prompt_tokens
  int64_t generation_tokens_ = 0;   // engine thread: EngineSnapshot::generation_tokens
  int32_t spec_tokens_ = 0;           // drafted tokens per decode in effect (0: off)
  std::atomic<int64_t> context_trims_{0};
  mutable std::mutex snapshot_mu_;
  EngineSnapshot snapshot_;
  std::thread thread_;
};

}  // namespace lifeline::serving
