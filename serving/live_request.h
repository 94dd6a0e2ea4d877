// The books of one accepted request (RequestGroup) and of each of its choices (LiveChoice).
// The front (ModelEngine::EnqueuePrepared, model_engine.cpp) builds them on the caller's
// thread and hands them over through the inbox (EngineShared); from then on only the engine
// loop (EngineLoop, engine_loop*.cpp) touches them. Internal to serving/.
//
// A request has prompts x n choices; each choice is one scheduler request (one sequence).
// Choices after the first of a prompt wait (RequestGroup::deferred) until that first one has
// been prefilled, so they find the prompt's full blocks in the prefix cache instead of
// computing them again. The request ends visibly once: a kDone after its last choice
// completed, or the first kError (the other choices are then cancelled and end silently).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/kv_blocks.h"
#include "scheduler/request.h"
#include "api/serving_api.h"
#include "engine/model/pooling.h"
#include "serving/choice_output.h"
#include "serving/local_model.h"
#include "serving/request_prep.h"
#include "serving/request_timing.h"

namespace lifeline::serving {

struct LiveChoice;

struct RequestGroup {
  api::RequestHandle handle = 0;
  api::GenerationSink sink;
  int32_t n_choices = 1;
  int32_t open = 1;              // choices not yet completed
  int32_t live_count = 0;        // choices known to the engine thread and not retired
  bool terminated = false;       // the terminal event went out
  bool first_recorded = false;   // TTFT and queue samples went to the tracker
  bool started = false;          // a choice has been scheduled (left the queue)
  api::Usage usage;           // prompts counted once; completion tokens of every choice
  std::vector<RequestId> ids;    // scheduler ids of the choices handed to the scheduler
  std::vector<std::unique_ptr<LiveChoice>> deferred;  // waiting for their prompt's first
  PreparedRequest prepared;      // what the choices' outputs are built from
  nlohmann::json truncation;     // the first truncated choice's `lifeline` object (or null)
  bool reasoning_cut = false;    // a choice's thinking was ended at its budget
  int64_t restored_tokens = 0;   // of the cached prompt tokens, restored from the RAM tier
  // Set when a choice was queued past its TTFT budget and served anyway (on_late = "serve"):
  // {"late": true, "ttft_budget_ms", "waited_ms"}, disclosed in timings.lifeline.
  nlohmann::json late;
  int64_t spec_drafted = 0;      // speculation, all choices: drafted tokens verified ...
  int64_t spec_accepted = 0;     // ... and the ones the model sampled (timings)
};

struct LiveChoice {
  std::shared_ptr<RequestGroup> group;
  int32_t index = 0;             // choice index in the response
  int32_t prompt_index = 0;
  std::vector<int32_t> prompt;   // [n_prompt] token ids
  std::string echo_text;         // sent before the first token (completions' echo)
  int64_t max_tokens = 0;
  int64_t requested_max_tokens = 0;  // before the SLO ladder's cap
  int64_t queued_tokens = 0;     // what this choice added to EngineShared::queued_prompt_tokens
  int64_t queued_decode = 0;     // ... and to queued_decode_tokens (its max_tokens)
  std::optional<int64_t> deadline_us;
  std::optional<ChoiceOutput> out;
  RequestTiming timing;
  RequestId id = 0;
  SeqId seq = -1;          // model-side sequence while admitted
  bool queued = false;     // counted in accepted_not_started (until scheduled or retired)
  bool retired = false;
  int64_t generated = 0;   // tokens appended
  int64_t cached_tokens = 0;
  int64_t restored_tokens = 0;  // of cached_tokens, restored from the tier below the pool
  int64_t preemptions = 0;
  std::string slo_class;       // latency sample label
  int32_t priority = 0;
  std::string cap_reason;      // non-empty: max_tokens was capped by the SLO ladder
  bool deadline_stopped = false;  // ended at its deadline (ladder level >= truncate)
  // Its class's TTFT budget (from the first byte) and what to do when it is queued past the
  // point of meeting it (SubmitSlo); late: it was, and is served anyway (disclosed).
  std::optional<double> ttft_budget_ms;
  bool serve_late = false;
  bool budget_is_deadline = false;  // the budget is the request's own deadline_ms
  bool late = false;
  double enqueued_age_ms = 0;  // its age when it was queued (admission had decided)
  ContextTrim trim;            // context trimmed at Prepare (turns > 0)
  // An embedding or rerank choice: its hidden rows pool here over the prefill chunks, and its
  // answer is the pooled vector (or the classifier's scores), never a token.
  std::optional<PoolingAccumulator> pooling;
};

}  // namespace lifeline::serving
