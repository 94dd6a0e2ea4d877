#include "serving/model_engine.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "engine/gguf/gguf_file.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/toolcall/format.h"
#include "serving/model_engine_live.h"
#include "serving/request_timing.h"

namespace lifeline::serving {

using server::ApiError;
using server::GenerationEvent;

namespace {

using server::ErrorKind;
using server::MakeError;

const char* FinishReasonText(FinishReason r) {
  return r == FinishReason::kLength ? "length" : "stop";
}

}  // namespace

// A choice's `lifeline` object (engine_api.h): whether the SLO ladder cut it, and how. A
// choice that ended by itself (EOS, a stop string, its own max_tokens) is not truncated,
// even when a cap was in force.
nlohmann::json ModelEngine::ChoiceLifeline(const Live& live, const Request& r) {
  nlohmann::json j = {{"truncated", false}};
  if (live.deadline_stopped) {
    j = {{"truncated", true},
         {"reason", "deadline"},
         {"max_tokens", live.max_tokens},
         {"requested_max_tokens", live.requested_max_tokens},
         {"generated_tokens", live.generated},
         {"detail", "stopped at the request's deadline while its class was at ladder level "
                    "truncate or above"}};
  } else if (!live.cap_reason.empty() && r.finish_reason == FinishReason::kLength &&
             live.max_tokens < live.requested_max_tokens) {
    j = {{"truncated", true},
         {"reason", "max_tokens_cap"},
         {"max_tokens", live.max_tokens},
         {"requested_max_tokens", live.requested_max_tokens},
         {"generated_tokens", live.generated},
         {"detail", live.cap_reason}};
  }
  return j;
}

namespace {

}  // namespace

ModelEngine::ModelEngine(std::unique_ptr<LlamaModel> model, std::unique_ptr<Tokenizer> tokenizer,
                         const ModelEngineOptions& options)
    : options_(options), model_(std::move(model)), tokenizer_(std::move(tokenizer)) {}

ModelEngine::~ModelEngine() { Stop(); }

Result<std::unique_ptr<ModelEngine>> ModelEngine::Create(std::unique_ptr<LlamaModel> model,
                                                         std::unique_ptr<Tokenizer> tokenizer,
                                                         const ModelEngineOptions& options,
                                                         DraftModelSpec draft) {
  if (draft.model != nullptr) {
    if (draft.tokenizer == nullptr || tokenizer == nullptr) {
      return InvalidArgument("draft: both models need their tokenizers (the vocabularies must match)");
    }
    LL_RETURN_IF_ERROR(CheckSameVocab(*tokenizer, *draft.tokenizer));
  }
  if (options.threads < 1) return InvalidArgument("threads: must be >= 1");
  if (!options.pin_cpus.empty() && static_cast<int64_t>(options.pin_cpus.size()) < options.threads) {
    return InvalidArgument("pin_cpus: " + std::to_string(options.pin_cpus.size()) +
                           " CPUs for " + std::to_string(options.threads) + " compute threads");
  }
  if (options.max_running < 1) return InvalidArgument("max_running: must be >= 1");
  if (options.max_step_tokens < options.max_running) {
    return InvalidArgument("max_step_tokens (" + std::to_string(options.max_step_tokens) +
                           ") must be >= max_running (" + std::to_string(options.max_running) + ")");
  }
  if (options.max_waiting < 1) return InvalidArgument("max_waiting: must be >= 1");
  if (options.default_max_tokens < 1) return InvalidArgument("default_max_tokens: must be >= 1");
  std::unique_ptr<ModelEngine> e(new ModelEngine(std::move(model), std::move(tokenizer), options));
  const ModelConfig& cfg = e->model_->config();

  {
    LL_ASSIGN_OR_RETURN(ResolvedChatTemplate t,
                        ResolveChatTemplate(e->model_->file(), *e->tokenizer_, options.chat_template));
    e->chat_template_.emplace(std::move(t.tmpl));
    e->prep_.tool_format = toolcall::DetectToolCallFormat(e->chat_template_->source());
    toolcall::ReasoningFormat rf = toolcall::DetectReasoningFormat(e->chat_template_->source());
    if (options.reasoning_format != "auto") {
      auto named = toolcall::ReasoningFormatFromName(options.reasoning_format);
      if (!named) {
        return InvalidArgument("reasoning_format: '" + options.reasoning_format +
                               "' is not auto, none, think, bracket-think or granite");
      }
      rf = *named;
    }
    e->prep_.reasoning = BuildReasoningSetup(*e->tokenizer_, rf);
    e->chat_template_note_ = std::move(t.fallback_note);
    if (!t.dry_run_error.empty()) {
      if (!e->chat_template_note_.empty()) e->chat_template_note_ += "; ";
      e->chat_template_note_ += "warning: " + t.dry_run_error;
    }
  }

  ContextOptions copts;
  copts.n_ctx = options.n_ctx;
  copts.max_batch_tokens = options.max_step_tokens;
  copts.max_sequences = options.max_running;  // the sliding-window pool's sequences
  copts.kv_type = options.kv_type;
  copts.max_kv_bytes = options.kv_memory_bytes;
  // The scheduler's BlockManager is the one free list of the KV store: each step hands Eval
  // the block tables it allocated (BuildBatch).
  copts.caller_owns_blocks = true;
  // Probe n_ctx with a one-block context first (cheap), then size the real one.
  {
    ContextOptions probe = copts;
    probe.n_kv_blocks = 1;
    probe.max_batch_tokens = 1;
    LL_ASSIGN_OR_RETURN(auto c, LlamaContext::Create(cfg, probe));
    e->n_ctx_ = c->n_ctx();
  }
  // KV pool from the memory budget: bytes per 16-position block across the layers the pool
  // holds (all of them, or the global ones when sliding-window layers keep their own window
  // storage, which comes off the budget first).
  const KvPlan plan = PlanKv(cfg, copts, e->n_ctx_);
  if (plan.window_bytes >= options.kv_memory_bytes) {
    return ResourceExhausted("kv-memory: " + std::to_string(options.kv_memory_bytes) +
                             " bytes do not cover the sliding-window layers' " +
                             std::to_string(plan.window_bytes) + " bytes");
  }
  const uint64_t block_bytes = plan.main_block_bytes;
  const uint64_t n_blocks_u64 = (options.kv_memory_bytes - plan.window_bytes) / block_bytes;
  const uint64_t min_blocks = static_cast<uint64_t>(KvBlocksFor(e->n_ctx_));
  if (n_blocks_u64 < min_blocks) {
    return ResourceExhausted("kv-memory: " + std::to_string(options.kv_memory_bytes) +
                             " bytes hold " + std::to_string(n_blocks_u64) + " blocks of " +
                             std::to_string(block_bytes) + " bytes; one full context of " +
                             std::to_string(e->n_ctx_) + " positions needs " +
                             std::to_string(min_blocks));
  }
  const int32_t n_blocks = static_cast<int32_t>(std::min<uint64_t>(n_blocks_u64, 1u << 30));
  copts.n_kv_blocks = n_blocks;
  LL_ASSIGN_OR_RETURN(e->ctx_, LlamaContext::Create(cfg, copts));
  e->capacity_tokens_ = static_cast<int64_t>(n_blocks) * kKvBlockTokens;
  e->prep_.tokenizer = e->tokenizer_.get();
  e->prep_.chat_template = &*e->chat_template_;
  e->prep_.model_name = options.name;
  e->prep_.n_ctx = e->n_ctx_;
  e->prep_.capacity_tokens = e->capacity_tokens_;
  e->prep_.default_max_tokens = options.default_max_tokens;
  {
    Status vs = Status::Ok();
    e->prep_.grammar_vocab = BuildGrammarVocab(*e->tokenizer_, e->prep_.tool_format, &vs);
    if (!vs.ok()) return vs;
    // The masks inside a JSON string are the same for every schema: computing them here
    // spares the first constrained request a full walk of the vocabulary.
    auto json_object = grammar::ParseGbnf(grammar::JsonObjectGbnf());
    if (json_object.ok()) {
      grammar::GrammarMatcher(std::move(json_object).value(), e->prep_.grammar_vocab).Precompute();
    }
  }

  SchedulerConfig scfg;
  scfg.n_blocks = n_blocks;
  scfg.max_running = options.max_running;
  scfg.max_step_tokens = options.max_step_tokens;
  scfg.max_waiting = options.max_waiting;
  scfg.max_seq_tokens = e->n_ctx_;
  // Window storage is per sequence and released as it slides: a cached prefix has no window
  // behind it, so such models compute every prompt from position 0.
  scfg.prefix_caching = !plan.windowed;
  scfg.prefix_cache_reserve_blocks =
      options.prefix_cache_reserve_tokens < 0
          ? -1
          : (options.prefix_cache_reserve_tokens + kKvBlockTokens - 1) / kKvBlockTokens;
  // Higher priority first, then earliest deadline (requests without one last), then arrival.
  scfg.queue_order = QueueOrder::kEdfWithinPriority;
  LL_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(scfg));
  if (options.spec_tokens < 0 || options.spec_tokens > kMaxSpecTokens) {
    return InvalidArgument("speculate: " + std::to_string(options.spec_tokens) +
                           " drafted tokens per decode outside [0, " +
                           std::to_string(kMaxSpecTokens) + "]");
  }
  if (options.spec_step_tokens < 1 || options.spec_step_tokens > options.max_step_tokens) {
    return InvalidArgument("spec-step-tokens: " + std::to_string(options.spec_step_tokens) +
                           " outside [1, max-step-tokens = " +
                           std::to_string(options.max_step_tokens) + "]");
  }
  // A rejected draft would have advanced the sliding-window tables past where the sequence
  // continues; such models decode one token at a time.
  const int32_t spec_tokens = plan.windowed ? 0 : options.spec_tokens;
  e->spec_tokens_ = spec_tokens;
  {
    SchedulerKnobs k = e->scheduler_->knobs();
    k.spec_tokens = spec_tokens;
    k.spec_step_tokens = options.spec_step_tokens;
    LL_RETURN_IF_ERROR(e->scheduler_->SetKnobs(k));
    e->step_load_.max_running = k.max_running;
    e->step_load_.step_token_budget = k.max_step_tokens;
    e->load_board_.Publish(std::make_shared<const StepLoad>(e->step_load_));
  }
  e->pool_ = std::make_unique<ComputePool>(options.threads, options.pin_cpus);
  if (draft.model != nullptr) {
    if (spec_tokens == 0) {
      return InvalidArgument(plan.windowed
                                 ? "draft: this model's sliding-window layers keep their own KV, "
                                   "so it decodes one token at a time (no speculation)"
                                 : "draft: speculation is off (spec_tokens 0)");
    }
    // Its own KV, one sequence per running request, within the same memory budget as the
    // target's (a draft is the smaller model; its blocks are touched only as used).
    ModelDrafterOptions d;
    d.n_ctx = e->n_ctx_;
    d.max_sequences = options.max_running;
    d.kv_memory_bytes = options.kv_memory_bytes;
    d.kv_type = options.kv_type;
    LL_ASSIGN_OR_RETURN(auto drafter, ModelDrafter::Create(std::move(draft.model), *e->pool_, d));
    e->drafter_ = drafter.get();
    e->scheduler_->SetDrafter(std::move(drafter));
  }
  // One row per sequence that samples this step: the scheduler asks for logits only at a
  // request's last position (StepEntry::want_logits), so at most max_running rows, plus the
  // drafted positions under speculation (fewer than spec_step_tokens per step). (Sized by
  // max_step_tokens this was 155 MB zeroed at start for a 151k vocabulary.)
  const int64_t logit_rows = options.max_running + (spec_tokens > 0 ? options.spec_step_tokens : 0);
  e->logits_.resize(static_cast<size_t>(logit_rows) * static_cast<size_t>(cfg.n_vocab));
  e->snapshot_.kv_blocks_total = n_blocks;
  e->snapshot_.kv_blocks_free = n_blocks;
  return e;
}

void ModelEngine::Start() {
  heartbeat_ns_.store(Clock::now().time_since_epoch().count());
  std::future<void> calibrated = calibrated_.get_future();
  thread_ = std::thread([this] { Loop(); });
  // The engine thread owns the pool, so it runs the calibration; the HTTP server starts
  // after this returns, so no request meets an engine without a speed estimate.
  if (options_.calibrate) calibrated.wait();
}

void ModelEngine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string ModelEngine::Failure() const {
  if (!failed_.load()) return {};
  std::lock_guard<std::mutex> lock(failure_mu_);
  return failure_;
}

bool ModelEngine::Healthy() const {
  const int64_t age_ns = Clock::now().time_since_epoch().count() - heartbeat_ns_.load();
  return thread_.joinable() && !failed_.load() &&
         age_ns < std::chrono::duration_cast<std::chrono::nanoseconds>(options_.heartbeat_stale).count();
}

EngineSnapshot ModelEngine::Snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

std::variant<std::string, server::ApiError> ModelEngine::ApplyTemplate(
    const server::GenerationRequest& req) const {
  std::string text;
  if (auto err = RenderChat(prep_, req, nullptr, &text)) return *err;
  return text;
}

bool ModelEngine::TrimContext(const server::GenerationRequest& req, int64_t budget_tokens,
                              std::vector<int32_t>* prompt, Trim* trim) const {
  const std::vector<server::ChatMessage>& msgs = req.messages;
  // Kept: every system message and the last user turn (the last user message and anything
  // after it). Optional: the other messages before it, grouped into turns that each start at
  // a user message, so a question is never kept without its answer or the reverse.
  size_t last_user = msgs.size();
  for (size_t i = msgs.size(); i-- > 0;) {
    if (msgs[i].role == "user") {
      last_user = i;
      break;
    }
  }
  if (last_user == msgs.size()) return false;
  std::vector<std::vector<size_t>> turns;
  for (size_t i = 0; i < last_user; ++i) {
    if (msgs[i].role == "system" || msgs[i].role == "developer") continue;
    if (turns.empty() || msgs[i].role == "user") turns.emplace_back();
    turns.back().push_back(i);
  }
  if (turns.empty()) return false;
  const int64_t n_before = static_cast<int64_t>(prompt->size());
  // Tokens of the prompt with the k oldest turns dropped (nullopt: the template refused it).
  auto tokens_without = [&](size_t k) -> std::optional<std::vector<int32_t>> {
    std::vector<uint8_t> drop(msgs.size(), 0);
    for (size_t t = 0; t < k; ++t) {
      for (size_t i : turns[t]) drop[i] = 1;
    }
    std::string text;
    if (RenderChat(prep_, req, &drop, &text)) return std::nullopt;
    return EncodePromptText(prep_, true, text);
  };
  // Fewer turns never means more tokens, so a binary search needs O(log turns) renders.
  size_t lo = 1, hi = turns.size();
  std::optional<std::vector<int32_t>> best;
  size_t best_k = 0;
  while (lo <= hi) {
    const size_t mid = lo + (hi - lo) / 2;
    auto t = tokens_without(mid);
    if (t && static_cast<int64_t>(t->size()) <= budget_tokens) {
      best = std::move(t);
      best_k = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  if (!best) {  // even system + last turn is over the budget: send that much
    best = tokens_without(turns.size());
    best_k = turns.size();
    if (!best) return false;
  }
  trim->turns = static_cast<int32_t>(best_k);
  trim->messages = 0;
  for (size_t t = 0; t < best_k; ++t) trim->messages += static_cast<int32_t>(turns[t].size());
  trim->tokens = n_before - static_cast<int64_t>(best->size());
  *prompt = std::move(*best);
  return true;
}

int64_t ModelEngine::TrimBudgetTokens(const SubmitSlo& slo,
                                      const server::GenerationRequest& req) const {
  int64_t budget = slo_.config != nullptr ? slo_.config->ladder.trim_to_tokens
                                          : slo::LadderParams{}.trim_to_tokens;
  std::optional<double> ttft_budget_ms = slo.ttft_budget_ms;
  if (!ttft_budget_ms && slo_.config != nullptr) {
    slo::RequestSloFields fields;
    fields.slo_class = req.slo_class;
    fields.user_role = req.user_role;
    if (req.deadline_ms) fields.deadline_ms = static_cast<double>(*req.deadline_ms);
    if (auto b = slo::Resolve(*slo_.config, fields); b.ok()) ttft_budget_ms = b->ttft_budget_ms;
  }
  if (ttft_budget_ms && slo_.speeds != nullptr) {
    if (auto f = slo_.speeds->prefill_fit()) {
      // The prompt tokens the rest of the TTFT budget can prefill (one step's fixed cost,
      // then per token), after the queued prompts.
      const double elapsed_ms = std::chrono::duration<double, std::milli>(
                                    Clock::now() - req.timeline.first_byte).count();
      const double left_ms = *ttft_budget_ms - elapsed_ms - f->fixed_ms;
      const double fit = left_ms / f->per_token_ms -
                         static_cast<double>(queued_prompt_tokens_.load());
      budget = std::min<int64_t>(budget, fit <= 0 ? 0 : static_cast<int64_t>(std::min(fit, 1e15)));
    }
  }
  return budget;
}

server::ModelInfo ModelEngine::Info() const {
  server::ModelInfo m;
  m.id = options_.name;
  m.context_length_tokens = n_ctx_;
  m.chat_template_source = chat::OriginName(chat_template_->origin());
  m.chat_template_name = chat_template_->name();
  m.tool_call_format = std::string(toolcall::ToolCallFormatName(prep_.tool_format));
  m.reasoning_format = std::string(toolcall::ReasoningFormatName(
      prep_.reasoning != nullptr ? prep_.reasoning->format : toolcall::ReasoningFormat::kNone));
  return m;
}

std::variant<ModelEngine::Prepared, ApiError> ModelEngine::Prepare(server::GenerationRequest req,
                                                                   const SubmitSlo* slo) {
  if (failed_.load()) {
    return MakeError(ErrorKind::kUnavailable, "model_failed",
                     "model '" + options_.name + "' failed: " + Failure() +
                         "; restart the server to load the file again");
  }
  Prepared out;
  out.timing.first_byte = req.timeline.first_byte;
  out.timing.mark = req.timeline.validated;
  // Moved here from a model where it waited too long: that wait is queue time.
  if (req.timeline.rerouted > out.timing.mark) {
    out.timing.Charge(&out.timing.queue_ms, req.timeline.rerouted);
  }
  out.group = std::make_shared<Group>();
  PreparedRequest& prep = out.group->prepared;
  if (auto err = PrepareRequest(prep_, req, &prep, &out.timing)) return std::move(*err);

  if (req.is_chat && req.allow_context_trim && slo != nullptr && slo_.knobs != nullptr) {
    std::shared_ptr<const slo::Knobs> knobs = slo_.knobs->Load();
    if (knobs != nullptr &&
        knobs->LevelOf(slo->slo_class, options_.name) >= slo::Level::kTrimContext) {
      const int64_t budget = TrimBudgetTokens(*slo, req);
      std::vector<int32_t>& tokens = prep.prompts.front().tokens;
      if (static_cast<int64_t>(tokens.size()) > budget) {
        (void)TrimContext(req, budget, &tokens, &out.trim);
      }
    }
  }
  out.timing.Charge(&out.timing.tokenize_ms, Clock::now());
  if (auto err = CheckPromptLimits(prep_, req, &prep)) return std::move(*err);
  out.prompt_tokens = prep.prompt_tokens_total();
  out.max_tokens = prep.max_tokens;

  const int32_t n_choices = prep.n_choices();
  if (n_choices > options_.max_waiting) {
    return server::InvalidRequestError(
        "n",
        std::to_string(n_choices) + " choices (prompts x n) exceed what model '" +
            options_.name + "' queues at once (--max-waiting " +
            std::to_string(options_.max_waiting) + ")",
        "out_of_range");
  }
  if (slo != nullptr && slo->deadline_us) {
    out.deadline_us = slo->deadline_us;
  } else if (req.deadline_ms) {
    out.deadline_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          req.timeline.first_byte.time_since_epoch()).count() +
                      *req.deadline_ms * 1000;
  }
  if (slo != nullptr) out.slo = *slo;
  return out;
}

std::optional<ApiError> ModelEngine::Submit(server::RequestHandle handle,
                                            server::GenerationRequest req,
                                            server::GenerationSink sink, const SubmitSlo* slo) {
  auto prepared = Prepare(std::move(req), slo);
  if (auto* err = std::get_if<ApiError>(&prepared)) return std::move(*err);
  return EnqueuePrepared(std::move(std::get<Prepared>(prepared)), handle, std::move(sink));
}

std::optional<ApiError> ModelEngine::EnqueuePrepared(Prepared prepared,
                                                     server::RequestHandle handle,
                                                     server::GenerationSink sink,
                                                     std::optional<int64_t> max_tokens_cap,
                                                     std::string cap_reason) {
  std::shared_ptr<Group> group = std::move(prepared.group);
  const PreparedRequest& prep = group->prepared;
  const SubmitSlo* slo = prepared.slo ? &*prepared.slo : nullptr;
  int64_t max_tokens = prep.max_tokens;
  if (max_tokens_cap && *max_tokens_cap < max_tokens) {
    max_tokens = std::max<int64_t>(1, *max_tokens_cap);
  } else {
    cap_reason.clear();
  }
  const std::optional<int64_t> deadline_us = prepared.deadline_us;
  const RequestTiming& timing = prepared.timing;
  const Trim& trim = prepared.trim;
  const int32_t n_choices = prep.n_choices();
  const double enqueued_age_ms =
      std::chrono::duration<double, std::milli>(SloNow() - timing.first_byte).count();
  group->handle = handle;
  group->sink = std::move(sink);
  group->n_choices = n_choices;
  group->open = n_choices;
  group->live_count = n_choices;
  group->usage.prompt_tokens = prep.prompt_tokens_total();
  std::vector<std::unique_ptr<Live>> now;
  int64_t queued_tokens = 0, queued_decode = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(prep.prompts.size()); ++p) {
    for (int32_t j = 0; j < prep.n; ++j) {
      auto live = std::make_unique<Live>();
      live->group = group;
      live->index = p * prep.n + j;
      live->prompt_index = p;
      live->prompt = prep.prompts[p].tokens;
      live->echo_text = prep.prompts[p].echo_text;
      live->max_tokens = max_tokens;
      live->requested_max_tokens = prep.max_tokens;
      live->deadline_us = deadline_us;
      live->out.emplace(*tokenizer_, prep, live->prompt, live->index);
      live->timing = timing;
      live->queued = true;
      // A prompt's later choices find its blocks cached: only the first one prefills.
      live->queued_tokens = j == 0 ? static_cast<int64_t>(live->prompt.size()) : 0;
      queued_tokens += live->queued_tokens;
      live->queued_decode = max_tokens;
      queued_decode += max_tokens;
      if (slo != nullptr) {
        live->slo_class = slo->slo_class;
        live->priority = slo->priority;
        live->ttft_budget_ms = slo->ttft_budget_ms;
        live->serve_late = slo->serve_late;
        live->budget_is_deadline = slo->budget_is_deadline;
      }
      live->enqueued_age_ms = enqueued_age_ms;
      live->cap_reason = cap_reason;
      live->trim = trim;
      (j == 0 ? now : group->deferred).push_back(std::move(live));
    }
  }

  // The queue bound is checked here so a refusal is an immediate 429, never a late event. A
  // request with several choices is let in whole when nothing is queued.
  const int64_t before = accepted_not_started_.fetch_add(n_choices);
  if (before >= options_.max_waiting || (before > 0 && before + n_choices > options_.max_waiting)) {
    accepted_not_started_.fetch_sub(n_choices);
    return MakeError(ErrorKind::kOverloaded, "overloaded",
                     "model '" + options_.name + "': " + std::to_string(options_.max_waiting) +
                         " requests already queued; retry later",
                     {}, 1);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      accepted_not_started_.fetch_sub(n_choices);
      return MakeError(ErrorKind::kUnavailable, "shutting_down", "the server is shutting down",
                       {}, 1);
    }
    queued_prompt_tokens_.fetch_add(queued_tokens);
    queued_decode_tokens_.fetch_add(queued_decode);
    open_requests_.fetch_add(1);
    if (trim.turns > 0) {
      context_trims_.fetch_add(1);
      if (slo_.outcomes != nullptr) {
        slo_.outcomes->Count(slo->slo_class.empty() ? "interactive" : slo->slo_class,
                             options_.name, "trimmed");
      }
    }
    inbox_.push_back(Message{handle, std::move(group), std::move(now)});
  }
  cv_.notify_one();
  return std::nullopt;
}

void ModelEngine::Cancel(server::RequestHandle handle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(Message{handle, nullptr, {}});
  }
  cv_.notify_one();
}

void ModelEngine::Retire(Live& live) {
  if (live.retired) return;
  live.retired = true;
  if (live.queued) {
    live.queued = false;
    accepted_not_started_.fetch_sub(1);
    queued_prompt_tokens_.fetch_sub(live.queued_tokens);
    queued_decode_tokens_.fetch_sub(live.queued_decode);
  }
  if (live.seq >= 0) {
    (void)ctx_->ReleaseSequence(live.seq);
    live.seq = -1;
  }
  Group& g = *live.group;
  if (--g.live_count == 0) groups_.erase(g.handle);
}

void ModelEngine::FailGroup(Live& live, GenerationEvent error) {
  std::shared_ptr<Group> g = live.group;  // Retire may drop the books' reference
  if (!g->terminated) {
    g->terminated = true;
    open_requests_.fetch_sub(1);  // before the event: the client must not see it first
    g->sink(std::move(error));
    for (RequestId id : g->ids) {
      if (id != live.id) scheduler_->Cancel(id);  // they end silently (terminated)
    }
    for (auto& d : g->deferred) Retire(*d);
    g->deferred.clear();
  }
  Retire(live);
}

bool ModelEngine::Enqueue(std::unique_ptr<Live> live) {
  NewRequest nr;
  nr.prompt_tokens = live->prompt;
  nr.max_tokens = live->max_tokens;
  nr.arrival_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      Clock::now().time_since_epoch()).count();
  nr.deadline_us = live->deadline_us;
  nr.priority = live->priority;
  auto id = scheduler_->Submit(std::move(nr));
  if (!id.ok()) {
    // Pre-checked on the HTTP thread; reaching here means the books disagree. Still one
    // visible terminal outcome.
    const bool full = id.status().code() == StatusCode::kResourceExhausted;
    ApiError e = full ? MakeError(ErrorKind::kOverloaded, "overloaded", id.status().message(),
                                  {}, 1)
                      : server::InvalidRequestError("max_tokens", id.status().message(), "");
    FailGroup(*live, GenerationEvent::Error(std::move(e)));
    return false;
  }
  live->id = *id;
  live->group->ids.push_back(*id);
  live_[*id] = std::move(live);
  return true;
}

void ModelEngine::ReleaseDeferred(Group& group, int32_t prompt_index) {
  std::vector<std::unique_ptr<Live>> ready;
  auto& d = group.deferred;
  for (auto it = d.begin(); it != d.end();) {
    if ((*it)->prompt_index == prompt_index) {
      ready.push_back(std::move(*it));
      it = d.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& live : ready) {
    if (group.terminated) {
      Retire(*live);
    } else {
      (void)Enqueue(std::move(live));
    }
  }
}

void ModelEngine::DrainInbox() {
  std::deque<Message> msgs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    msgs.swap(inbox_);
  }
  for (Message& m : msgs) {
    if (m.group == nullptr) {  // cancel
      auto it = groups_.find(m.handle);
      if (it == groups_.end()) continue;
      for (RequestId id : it->second->ids) scheduler_->Cancel(id);
      continue;
    }
    groups_[m.handle] = m.group;
    prompt_tokens_ += m.group->usage.prompt_tokens;
    for (auto& live : m.lives) {
      if (!Enqueue(std::move(live))) break;  // the request failed; its other choices retire
    }
  }
}

void ModelEngine::Complete(Live& live, const Request& r) {
  std::shared_ptr<Group> g = live.group;
  RequestTiming& tm = live.timing;
  TokenStep tail = live.out->Flush();
  if (!tail.text.empty()) tm.OnAnswer(Clock::now());
  if (!g->terminated && (!tail.text.empty() || !tail.reasoning.empty() || !tail.logprobs.empty())) {
    GenerationEvent ev = GenerationEvent::Token(std::move(tail.text), -1);
    ev.index = live.index;
    ev.reasoning = std::move(tail.reasoning);
    ev.logprobs = std::move(tail.logprobs);
    g->sink(std::move(ev));
  }
  tm.Charge(&tm.sampling_ms, Clock::now());
  g->usage.completion_tokens += live.generated;
  g->usage.reasoning_tokens += live.out->reasoning_tokens();
  if (g->prepared.reasoning != nullptr) {
    g->reasoning_cut = g->reasoning_cut || live.out->reasoning_cut();
  }
  // Cached prompt tokens of each prompt's first choice (its siblings reuse that prompt).
  if (live.index % g->prepared.n == 0) g->usage.cached_tokens += live.cached_tokens;
  const char* finish = FinishReasonText(r.finish_reason);
  nlohmann::json choice_lifeline = ChoiceLifeline(live, r);
  if (choice_lifeline["truncated"] == true && g->truncation.is_null()) {
    g->truncation = choice_lifeline;
  }
  --g->open;
  if (!g->terminated && g->n_choices > 1) {
    g->sink(GenerationEvent::ChoiceDone(live.index, finish, choice_lifeline));
  }
  if (!g->terminated && g->open == 0) {
    g->terminated = true;
    open_requests_.fetch_sub(1);  // before the event: the client must not see it first
    nlohmann::json timings = tm.ToJson(g->usage.prompt_tokens, g->usage.cached_tokens,
                                       g->usage.completion_tokens, live.preemptions);
    timings["spec_drafted"] = g->spec_drafted;
    timings["spec_accepted"] = g->spec_accepted;
    // The `lifeline` extension object: what the SLO ladder did to this request (any choice).
    nlohmann::json ext = nlohmann::json::object();
    if (!g->truncation.is_null()) {
      ext["truncated"] = true;
      ext["reason"] = g->truncation["reason"];
      ext["detail"] = g->truncation["detail"];
    }
    if (!g->late.is_null()) ext["late"] = g->late;
    if (g->prepared.reasoning != nullptr) {
      // The thinking: what it cost and whether its budget ended it (docs/reasoning.md).
      ext["reasoning"] = {{"tokens", g->usage.reasoning_tokens},
                          {"budget_tokens", live.out->reasoning_budget_tokens()},
                          {"cut", g->reasoning_cut}};
    }
    if (live.trim.turns > 0) {
      ext["context_trim"] = {{"turns", live.trim.turns},
                             {"messages", live.trim.messages},
                             {"tokens", live.trim.tokens}};
    }
    if (!ext.empty()) timings["lifeline"] = std::move(ext);
    RecordFinished(live);
    GenerationEvent done = GenerationEvent::Done(finish, g->usage, std::move(timings));
    done.lifeline = std::move(choice_lifeline);
    done.timed_until = tm.mark;  // the server charges the rest as handoff_ms
    g->sink(std::move(done));
  }
  Retire(live);
}

void ModelEngine::FailModel(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_ = why.message();
  }
  failed_.store(true);
  std::fprintf(stderr,
               "lifeline serve: model '%s' failed: %s; its requests end with 503 model_failed "
               "and it is not ready until the server is restarted\n",
               options_.name.c_str(), why.message().c_str());
  FailAll("model_failed", "model '" + options_.name + "' failed: " + why.message());
}

bool ModelEngine::CheckFile(bool now) {
  if (failed_.load()) return false;
  const auto t = Clock::now();
  if (!now && t - file_checked_ < std::chrono::milliseconds(500)) return true;
  file_checked_ = t;
  Status s = model_->file().Integrity();
  if (s.ok()) return true;
  FailModel(s);
  return false;
}

void ModelEngine::FailAll(const std::string& code, const std::string& message) {
  std::deque<Message> msgs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    msgs.swap(inbox_);
  }
  const auto error = [&] {
    return GenerationEvent::Error(MakeError(ErrorKind::kUnavailable, code, message, {}, 1));
  };
  for (Message& m : msgs) {
    if (m.group == nullptr) continue;
    groups_[m.handle] = m.group;
    for (auto& live : m.lives) FailGroup(*live, error());
  }
  for (auto& [id, live] : live_) {
    scheduler_->Cancel(id);
    FailGroup(*live, error());
  }
  live_.clear();
  groups_.clear();
}

}  // namespace lifeline::serving
