// ModelEngine, the front of an engine loop: creation (the chat template, the request limits,
// the vocabulary's grammar view, then the loop), Prepare / EnqueuePrepared / Cancel on the
// caller's thread, and what it reads of the loop (Load, Snapshot, Healthy) through
// EngineShared. The loop: engine_loop.cpp (its creation, admission to the scheduler and the
// terminal events), engine_loop_step.cpp (the step), engine_loop_calibrate.cpp.
#include "serving/model_engine.h"

#include <algorithm>
#include <utility>

#include "text/grammar/grammar_matcher.h"
#include "text/grammar/json_schema.h"
#include "text/toolcall/format.h"
#include "serving/live_request.h"
#include "serving/request_timing.h"

namespace lifeline::serving {

using api::ApiError;

namespace {

using api::ErrorKind;
using api::MakeError;

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

  // The KV context first: the request limits (n_ctx, the pool's capacity) come from it.
  LL_ASSIGN_OR_RETURN(EngineLoop::Kv kv, EngineLoop::CreateKv(cfg, e->options_));
  e->n_ctx_ = kv.n_ctx;
  e->prep_.tokenizer = e->tokenizer_.get();
  e->prep_.chat_template = &*e->chat_template_;
  e->prep_.model_name = options.name;
  e->prep_.n_ctx = e->n_ctx_;
  e->prep_.capacity_tokens = kv.capacity_tokens;
  e->prep_.default_max_tokens = options.default_max_tokens;
  LL_RETURN_IF_ERROR(ResolvePooling(*e->model_, options.pooling, &e->prep_));
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
  // The loop borrows the front's copy of the options (the caller's may not outlive Create).
  LL_ASSIGN_OR_RETURN(e->loop_, EngineLoop::Create(*e->model_, e->options_, e->shared_,
                                                   std::move(kv), std::move(draft.model)));
  return e;
}

// The pooling embeddings use: --pooling, else the file's <arch>.pooling_type, else mean
// (what llama.cpp users pass for a decoder whose file says nothing); and a reranker's head and
// prompt template.
Status ModelEngine::ResolvePooling(const LlamaModel& model, const std::string& flag,
                                   PrepContext* prep) {
  const ModelConfig& c = model.config();
  prep->rerank_outputs = c.n_cls_out;
  if (flag == "auto" || flag.empty()) {
    prep->pooling = c.pooling == PoolingType::kUnspecified || c.pooling == PoolingType::kNone
                        ? PoolingType::kMean
                        : c.pooling;
  } else {
    const std::optional<PoolingType> p = PoolingFromName(flag);
    if (!p || *p == PoolingType::kNone) {
      return InvalidArgument("pooling: '" + flag + "' is not auto, mean, cls, last or rank");
    }
    if (*p == PoolingType::kRank && c.n_cls_out == 0) {
      return InvalidArgument("pooling: rank needs a classifier head (cls.output.weight), and "
                             "this model's file has none");
    }
    prep->pooling = *p;
  }
  if (model.file().FindKv("tokenizer.chat_template.rerank") != nullptr) {
    Result<std::string_view> t = model.file().GetString("tokenizer.chat_template.rerank");
    if (!t.ok()) return DataLoss("tokenizer.chat_template.rerank: " + t.status().message());
    prep->rerank_template = std::string(*t);
  }
  return Status::Ok();
}

void ModelEngine::AttachSlo(SloHooks hooks) {
  slo_ = hooks;
  loop_->AttachSlo(std::move(hooks));
}

void ModelEngine::Start() { loop_->Start(); }

// Also reached from the destructor of an engine whose Create failed before the loop existed.
void ModelEngine::Stop() {
  if (loop_ != nullptr) loop_->Stop();
}

std::string ModelEngine::Failure() const { return shared_.Failure(); }

bool ModelEngine::Healthy() const {
  const int64_t age_ns = Clock::now().time_since_epoch().count() - shared_.heartbeat_ns.load();
  return loop_ != nullptr && loop_->Started() && !shared_.failed.load() &&
         age_ns < std::chrono::duration_cast<std::chrono::nanoseconds>(options_.heartbeat_stale).count();
}

EngineSnapshot ModelEngine::Snapshot() const {
  std::lock_guard<std::mutex> lock(shared_.snapshot_mu);
  return shared_.snapshot;
}

std::variant<std::string, api::ApiError> ModelEngine::ApplyTemplate(
    const api::GenerationRequest& req) const {
  std::string text;
  if (auto err = RenderChat(prep_, req, nullptr, &text)) return *err;
  return text;
}

bool ModelEngine::TrimContext(const api::GenerationRequest& req, int64_t budget_tokens,
                              std::vector<int32_t>* prompt, Trim* trim) const {
  const std::vector<api::ChatMessage>& msgs = req.messages;
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
                                      const api::GenerationRequest& req) const {
  int64_t budget = slo_.config != nullptr ? slo_.config->ladder.trim_to_tokens
                                          : slo::LadderParams{}.trim_to_tokens;
  std::optional<double> ttft_budget_ms = slo.ttft_budget_ms;
  if (!ttft_budget_ms && slo_.config != nullptr) {
    slo::RequestSloFields fields;
    fields.slo_class = req.slo_class;
    fields.user_role = req.user_role;
    if (req.deadline_ms) fields.deadline_ms = static_cast<double>(*req.deadline_ms);
    if (auto b = slo::Resolve(*slo_.config, fields, slo_.targets); b.ok()) {
      ttft_budget_ms = b->ttft_budget_ms;
    }
  }
  if (ttft_budget_ms && slo_.speeds != nullptr) {
    if (auto f = slo_.speeds->prefill_fit()) {
      // The prompt tokens the rest of the TTFT budget can prefill (one step's fixed cost,
      // then per token), after the queued prompts.
      const double elapsed_ms = std::chrono::duration<double, std::milli>(
                                    Clock::now() - req.timeline.first_byte).count();
      const double left_ms = *ttft_budget_ms - elapsed_ms - f->fixed_ms;
      const double fit = left_ms / f->per_token_ms -
                         static_cast<double>(shared_.queued_prompt_tokens.load());
      budget = std::min<int64_t>(budget, fit <= 0 ? 0 : static_cast<int64_t>(std::min(fit, 1e15)));
    }
  }
  return budget;
}

api::ModelInfo ModelEngine::Info() const {
  api::ModelInfo m;
  m.id = options_.name;
  m.context_length_tokens = n_ctx_;
  m.chat_template_source = chat::OriginName(chat_template_->origin());
  m.chat_template_name = chat_template_->name();
  m.tool_call_format = std::string(toolcall::ToolCallFormatName(prep_.tool_format));
  m.reasoning_format = std::string(toolcall::ReasoningFormatName(
      prep_.reasoning != nullptr ? prep_.reasoning->format : toolcall::ReasoningFormat::kNone));
  m.embedding_length = model_->config().n_embd;
  m.pooling = PoolingName(prep_.pooling);
  m.rerank_outputs = static_cast<int32_t>(prep_.rerank_outputs);
  return m;
}

std::variant<ModelEngine::Prepared, ApiError> ModelEngine::Prepare(api::GenerationRequest req,
                                                                   const SubmitSlo* slo) {
  if (shared_.failed.load()) {
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
  out.group = std::make_shared<RequestGroup>();
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
  ApplyThinkingPolicy(slo != nullptr ? slo->thinking : slo::ThinkingPolicy{}, req, &prep);
  out.thinking_shortened_by = prep.reasoning_shortened_by;
  out.thinks = prep.reasoning != nullptr;
  out.thinking_budget_tokens = prep.reasoning_budget_tokens;
  out.prompt_tokens = prep.prompt_tokens_total();
  // What the prefix cache already holds of each prompt (a mean / cls embedding computes every
  // position): admission prices the rest (PrefixMirror; the loop's own lookup decides).
  if (prep.task == api::Task::kGenerate || ReadsOnlyTheLast(prep.pooling)) {
    for (const PreparedPrompt& pp : prep.prompts) {
      out.cached_prompt_tokens +=
          shared_.prefix_mirror.LeadingHits(pp.tokens, &HashBlockTokens, kRootBlockHash);
    }
  }
  out.max_tokens = prep.max_tokens;

  const int32_t n_choices = prep.n_choices();
  // An embeddings / rerank request is admitted as one request (EnqueuePrepared).
  if (prep.task == api::Task::kGenerate && n_choices > options_.max_waiting) {
    return api::InvalidRequestError(
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

std::optional<ApiError> ModelEngine::Submit(api::RequestHandle handle,
                                            api::GenerationRequest req,
                                            api::GenerationSink sink, const SubmitSlo* slo) {
  auto prepared = Prepare(std::move(req), slo);
  if (auto* err = std::get_if<ApiError>(&prepared)) return std::move(*err);
  return EnqueuePrepared(std::move(std::get<Prepared>(prepared)), handle, std::move(sink));
}

std::optional<ApiError> ModelEngine::EnqueuePrepared(Prepared prepared,
                                                     api::RequestHandle handle,
                                                     api::GenerationSink sink,
                                                     std::optional<int64_t> max_tokens_cap,
                                                     std::string cap_reason) {
  std::shared_ptr<RequestGroup> group = std::move(prepared.group);
  if (prepared.thinking_budget_cap && group->prepared.reasoning != nullptr) {
    // Admission: only this much thinking fits the TTFA budget (never raised).
    int64_t& budget = group->prepared.reasoning_budget_tokens;
    const int64_t cap = std::max<int64_t>(0, *prepared.thinking_budget_cap);
    if (budget < 0 || cap < budget) {
      budget = cap;
      group->prepared.reasoning_shortened_by = "admission";
    }
  }
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
  std::vector<std::unique_ptr<LiveChoice>> now;
  int64_t queued_tokens = 0, queued_decode = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(prep.prompts.size()); ++p) {
    for (int32_t j = 0; j < prep.n; ++j) {
      auto live = std::make_unique<LiveChoice>();
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
      if (prep.task != api::Task::kGenerate) live->pooling.emplace(prep.pooling, model_->config().n_embd);
      (j == 0 ? now : group->deferred).push_back(std::move(live));
    }
  }

  // The queue bound is checked here so a refusal is an immediate 429, never a late event. A
  // request with several choices is let in whole when nothing is queued.
  const int64_t before = shared_.accepted_not_started.fetch_add(n_choices);
  // Embeddings and reranking batch their inputs in one request: it needs room for one.
  const int32_t admit_as = prep.task == api::Task::kGenerate ? n_choices : 1;
  if (before >= options_.max_waiting || (before > 0 && before + admit_as > options_.max_waiting)) {
    shared_.accepted_not_started.fetch_sub(n_choices);
    return MakeError(ErrorKind::kOverloaded, "overloaded",
                     "model '" + options_.name + "': " + std::to_string(options_.max_waiting) +
                         " requests already queued; retry later",
                     {}, 1);
  }
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    if (shared_.stop) {
      shared_.accepted_not_started.fetch_sub(n_choices);
      return MakeError(ErrorKind::kUnavailable, "shutting_down", "the server is shutting down",
                       {}, 1);
    }
    shared_.queued_prompt_tokens.fetch_add(queued_tokens);
    shared_.queued_decode_tokens.fetch_add(queued_decode);
    shared_.open_requests.fetch_add(1);
    if (trim.turns > 0) {
      shared_.context_trims.fetch_add(1);
      if (slo_.outcomes != nullptr) {
        slo_.outcomes->Count(slo->slo_class.empty() ? "interactive" : slo->slo_class,
                             options_.name, "trimmed");
      }
    }
    shared_.inbox.push_back(InboxMessage{handle, std::move(group), std::move(now)});
  }
  shared_.cv.notify_one();
  return std::nullopt;
}

void ModelEngine::Cancel(api::RequestHandle handle) {
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    shared_.inbox.push_back(InboxMessage{handle, nullptr, {}});
  }
  shared_.cv.notify_one();
}

slo::QueueLoad ModelEngine::Load(int64_t now_us) const {
  slo::QueueLoad l;
  l.queued_requests = static_cast<int32_t>(shared_.accepted_not_started.load());
  l.queued_prefill_tokens = shared_.queued_prompt_tokens.load();
  l.queued_decode_tokens = shared_.queued_decode_tokens.load();
  l.open_requests = shared_.open_requests.load();
  // One step's values, all from the same publication.
  const std::shared_ptr<const StepLoad> step = shared_.load.Load();
  if (step == nullptr) return l;
  l.running_prefill_tokens = step->running_prefill_tokens;
  l.running_decodes = step->running_decodes;
  l.step_token_budget = step->step_token_budget;
  l.max_running = step->max_running;
  l.running_sequences = step->running_sequences;
  l.running_decode_tokens_left = step->running_decode_tokens_left;
  l.running_decode_min_left = step->running_decode_min_left;
  l.decode_interval_ms = step->decode_interval_ms;
  // Past the estimate (the step overran, or it ended) nothing is added.
  if (step->step_end_estimate_us > now_us) {
    l.step_left_ms = static_cast<double>(step->step_end_estimate_us - now_us) / 1000.0;
  }
  return l;
}

}  // namespace lifeline::serving
