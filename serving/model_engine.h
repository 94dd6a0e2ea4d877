// ModelEngine: one loaded model served by one engine loop -- the front of that loop, the
// LocalModel that ServingHub calls on its threads.
//
//   Caller's (HTTP) thread: Prepare() renders the chat template, tokenizes, trims, checks the
//   context, sampler and stop limits; the caller decides admission on the prepared size;
//   EnqueuePrepared() applies the decision's max_tokens cap, checks the queue bound and
//   pushes the request into the inbox -- every refusal is answered on this thread, before
//   anything is queued (Submit() is both steps without admission). Cancel() pushes a cancel
//   message. Load() reads the queue counters and the load the loop published for its last
//   step. At level >= trim_context, Prepare drops old chat turns of requests that allow it
//   before the prompt is counted (docs/slo.md).
//   Engine thread: the EngineLoop this front owns (serving/engine_loop.h) drains the inbox and
//   runs the steps; exactly one terminal event per accepted request.
//   The two halves share only EngineShared (serving/engine_shared.h), which says who writes
//   and who reads each of its fields.
//
// Ownership: owns the model, tokenizer, chat template, the request-preparation context, the
// options, EngineShared and the EngineLoop (which owns the KV context, compute pool, scheduler
// and thread, and borrows the model, the options and EngineShared: it is destroyed first).
// Thread-safety: every LocalModel method (Prepare, EnqueuePrepared, Submit, Cancel, Load,
// Healthy, Snapshot, Tokenize, ...) may be called from any thread; AttachSlo before Start.
// Failure: construction errors are Status values (KV budget too small, bad options); request
// refusals are api::ApiError values (400 / 429); a forward-pass failure fails the
// requests of that step with a 500 error event, and the loop goes on. A model file that
// changes under the server (truncated: a guarded read fault; rewritten in place: its size or
// mtime moved; GgufFile::Integrity, checked after every forward pass and twice a second
// when idle) fails the model for good: the step's outputs are dropped, every request ends
// with one 503 model_failed event, Submit refuses, Healthy() turns false and a line naming
// the file goes to stderr. Restarting the server loads the new file.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "api/serving_api.h"
#include "serving/chat_setup.h"
#include "serving/engine_loop.h"
#include "serving/engine_shared.h"
#include "serving/local_model.h"
#include "serving/live_request.h"
#include "serving/model_engine_options.h"
#include "serving/request_prep.h"
#include "serving/request_timing.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"

namespace lifeline::serving {

class ModelEngine final : public LocalModel {
 public:

  // With a draft model, speculation (options.spec_tokens > 0) drafts with it instead of
  // prompt lookup; InvalidArgument when its vocabulary differs from the target's.
  static Result<std::unique_ptr<ModelEngine>> Create(std::unique_ptr<LlamaModel> model,
                                                     std::unique_ptr<Tokenizer> tokenizer,
                                                     const ModelEngineOptions& options,
                                                     DraftModelSpec draft = {});
  ~ModelEngine() override;  // Stop()
  ModelEngine(const ModelEngine&) = delete;
  ModelEngine& operator=(const ModelEngine&) = delete;

  // Starts the engine loop's thread; with options.calibrate, returns once the calibration
  // steps ran (admission then predicts from the first request on).
  void Start() override;
  // Ends every live request with a terminal error ("shutting_down") and joins the loop's
  // thread (EngineLoop::Stop).
  void Stop() override;

  // A request goes in three steps, on the caller's thread: Prepare (render, tokenize, trim
  // at the ladder's level, check the context, the KV pool and the choices), then the caller's
  // admission decision on the prepared size (ServingHub: slo::Decide -> admit, route to
  // the next cascade member, or refuse), then EnqueuePrepared with the decision's
  // max_tokens cap. Nothing is queued or counted before EnqueuePrepared; a Prepared dropped
  // unused (routed or refused) costs nothing.
  using Trim = ContextTrim;
  using Prepared = PreparedSubmit;  // prompt_tokens / max_tokens set by Prepare
  std::variant<Prepared, api::ApiError> Prepare(api::GenerationRequest request,
                                                   const SubmitSlo* slo = nullptr) override;
  // Queues a prepared request (nullopt: the engine will deliver events to `sink`), with
  // max_tokens lowered to `max_tokens_cap` (the ladder's truncation, reported with
  // `cap_reason`), or refuses it: the model's queue is full (429) or the server is stopping.
  std::optional<api::ApiError> EnqueuePrepared(Prepared prepared, api::RequestHandle handle,
                                                  api::GenerationSink sink,
                                                  std::optional<int64_t> max_tokens_cap = {},
                                                  std::string cap_reason = {}) override;
  // Prepare + EnqueuePrepared without an admission decision (tests, single-model use).
  std::optional<api::ApiError> Submit(api::RequestHandle handle,
                                         api::GenerationRequest request,
                                         api::GenerationSink sink,
                                         const SubmitSlo* slo = nullptr);
  // Before Start(): the front and the loop each keep a copy.
  void AttachSlo(SloHooks hooks) override;
  // Prompt tokens accepted and not yet scheduled (for admission's queue estimate).
  int64_t QueuedPromptTokens() const { return shared_.queued_prompt_tokens.load(); }
  int64_t QueuedRequests() const { return shared_.accepted_not_started.load(); }
  // Accepted requests not yet ended (queued or running).
  int64_t OpenRequests() const override { return shared_.open_requests.load(); }
  // The work ahead of a request arriving at `now_us` (steady clock, us), for admission's
  // TTFT prediction: the queue above, plus what the engine thread publishes at each step
  // (running prefill left, decoding sequences, the step token budget, the estimated end of
  // the step in flight). The step's values come from one publication (EngineShared::load);
  // the queue counters are separate atomic loads and may be a step apart from them, which is
  // fine for an estimate.
  slo::QueueLoad Load(int64_t now_us) const override;
  void Cancel(api::RequestHandle handle) override;

  bool Healthy() const override;
  // Non-empty once the model failed (its file changed under it): why, naming the file.
  std::string Failure() const override;
  EngineSnapshot Snapshot() const override;
  const std::string& name() const override { return options_.name; }
  api::ModelInfo Info() const override;
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
  std::variant<std::string, api::ApiError> ApplyTemplate(
      const api::GenerationRequest& req) const override;
  // POST /tokenize: the ids a completion prompt of this text gets with add_special (BOS per
  // the vocab, no EOS) -- the same Encode call.
  std::variant<std::vector<int32_t>, api::ApiError> Tokenize(
      const api::TokenizeRequest& req) const override;
  // POST /detokenize: SentencePiece's decoding, so Detokenize(Tokenize(x)) == x: control
  // tokens (BOS) add nothing, and an SPM vocab's dummy-prefix space before the first piece is
  // dropped. 400 naming tokens[i] and the vocabulary size for an id outside it.
  std::variant<std::string, api::ApiError> Detokenize(
      const api::DetokenizeRequest& req) const override;

 private:
  static Status ResolvePooling(const LlamaModel& model, const std::string& flag,
                               PrepContext* prep);
  ModelEngine(std::unique_ptr<LlamaModel> model, std::unique_ptr<Tokenizer> tokenizer,
              const ModelEngineOptions& options);
  // Level >= trim_context: drops the oldest turns between the system message(s) and the last
  // user turn until the prompt fits `budget_tokens` (or only system + last turn are left).
  // Returns false (and leaves *prompt) when there is nothing to drop.
  bool TrimContext(const api::GenerationRequest& req, int64_t budget_tokens,
                   std::vector<int32_t>* prompt, Trim* trim) const;
  // The context-trim budget of a request (docs/slo.md): ladder.trim_to_tokens, lowered to
  // what the TTFT budget leaves at the measured prefill speed behind the queued prompts.
  int64_t TrimBudgetTokens(const SubmitSlo& slo, const api::GenerationRequest& req) const;
  Clock::time_point SloNow() const { return slo_.clock ? slo_.clock() : Clock::now(); }

  ModelEngineOptions options_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;  // set by Create
  PrepContext prep_;                                 // set by Create
  std::string chat_template_note_;                   // ResolvedChatTemplate::fallback_note
  int64_t n_ctx_ = 0;
  SloHooks slo_;  // set before Start, then read-only (the loop has its own copy)

  // What the front and the loop both touch; declared before loop_, which borrows it.
  EngineShared shared_;
  // Set by Create; declared last, so it is destroyed (its thread joined) before everything
  // it borrows.
  std::unique_ptr<EngineLoop> loop_;
};

}  // namespace lifeline::serving
