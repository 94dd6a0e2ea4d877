#include "serving/model_engine.h"

#include <algorithm>
#include <utility>

#include "engine/gguf/gguf_file.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop.h"
#include "serving/request_timing.h"

namespace lifeline::serving {

using server::ApiError;
using server::GenerationEvent;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Clock::now().time_since_epoch()).count();
}

ApiError BadRequest(std::string message, std::string param, std::string code = "") {
  ApiError e;
  e.http_status = 400;
  e.type = "invalid_request_error";
  e.code = std::move(code);
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError ServerError(int http_status, std::string type, std::string code, std::string message,
                     int retry_after_s = 0) {
  ApiError e;
  e.http_status = http_status;
  e.type = std::move(type);
  e.code = std::move(code);
  e.message = std::move(message);
  e.retry_after_s = retry_after_s;
  return e;
}

const char* FinishReasonText(FinishReason r) {
  return r == FinishReason::kLength ? "length" : "stop";
}

}  // namespace

// Engine-thread state of one accepted request.
struct ModelEngine::Live {
  server::RequestHandle handle = 0;
  server::GenerationSink sink;
  std::vector<int32_t> prompt;  // [n_prompt] token ids
  int64_t max_tokens = 0;
  bool ignore_eos = false;
  std::optional<int64_t> deadline_us;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::optional<StopMatcher> stop;
  RequestTiming timing;
  RequestId id = 0;
  SeqId seq = -1;          // model-side sequence while admitted
  bool started = false;    // scheduled at least once (left the queue bound)
  int64_t generated = 0;   // tokens appended
  int64_t cached_tokens = 0;
  int64_t preemptions = 0;
  bool terminated = false;
  std::string slo_class;       // latency sample label
  int32_t priority = 0;
  std::string cap_reason;      // non-empty: max_tokens was capped by the SLO ladder
  bool deadline_stopped = false;  // ended at its deadline (ladder level >= truncate)
  bool first_recorded = false;    // TTFT and queue samples went to the tracker
  ModelEngine::Trim trim;         // context trimmed at Submit (turns > 0)
};

ModelEngine::ModelEngine(std::unique_ptr<LlamaModel> model, std::unique_ptr<Tokenizer> tokenizer,
                         const ModelEngineOptions& options)
    : options_(options), model_(std::move(model)), tokenizer_(std::move(tokenizer)) {}

ModelEngine::~ModelEngine() { Stop(); }

Result<std::unique_ptr<ModelEngine>> ModelEngine::Create(std::unique_ptr<LlamaModel> model,
                                                         std::unique_ptr<Tokenizer> tokenizer,
                                                         const ModelEngineOptions& options) {
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

  SchedulerConfig scfg;
  scfg.n_blocks = n_blocks;
  scfg.block_tokens = static_cast<int32_t>(kKvBlockTokens);
  scfg.max_running = options.max_running;
  scfg.max_step_tokens = options.max_step_tokens;
  scfg.max_waiting = options.max_waiting;
  scfg.max_seq_tokens = e->n_ctx_;
  // Window storage is per sequence and released as it slides: a cached prefix has no window
  // behind it, so such models compute every prompt from position 0.
  scfg.prefix_caching = !plan.windowed;
  // Higher priority first, then earliest deadline (requests without one last), then arrival.
  scfg.queue_order = QueueOrder::kEdfWithinPriority;
  LL_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(scfg));
  e->pool_ = std::make_unique<ComputePool>(options.threads, options.pin_cpus);
  e->logits_.resize(static_cast<size_t>(options.max_step_tokens * cfg.n_vocab));
  e->snapshot_.kv_blocks_total = n_blocks;
  e->snapshot_.kv_blocks_free = n_blocks;
  return e;
}

void ModelEngine::Start() {
  heartbeat_ns_.store(Clock::now().time_since_epoch().count());
  thread_ = std::thread([this] { Loop(); });
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

bool ModelEngine::Healthy() const {
  const int64_t age_ns = Clock::now().time_since_epoch().count() - heartbeat_ns_.load();
  return thread_.joinable() &&
         age_ns < std::chrono::duration_cast<std::chrono::nanoseconds>(options_.heartbeat_stale).count();
}

EngineSnapshot ModelEngine::Snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

Result<std::string> ModelEngine::RenderChat(const server::GenerationRequest& req,
                                            const std::vector<uint8_t>* drop) const {
  chat::ChatInput in;
  for (size_t i = 0; i < req.messages.size(); ++i) {
    if (drop != nullptr && (*drop)[i] != 0) continue;
    const server::ChatMessage& m = req.messages[i];
    if (m.object.is_object()) {
      in.messages.push_back(m.object);
    } else {  // built in-process (tests, tools) without the client's JSON: role + content
      in.messages.push_back({{"role", m.role == "developer" ? "system" : m.role},
                             {"content", m.content}});
    }
  }
  in.tools = req.tools;
  in.documents = req.documents;
  in.add_generation_prompt = req.add_generation_prompt;
  in.kwargs = req.chat_template_kwargs.is_object() ? req.chat_template_kwargs
                                                   : nlohmann::ordered_json::object();
  return chat_template_->Render(in);
}

std::vector<int32_t> ModelEngine::EncodePrompt(const server::GenerationRequest& req,
                                               const std::string& text) const {
  // Special-token text is parsed: templates and completion prompts use it (as llama.cpp's
  // server does). Byte cap already enforced by the HTTP body limit.
  if (req.is_chat) return EncodeChatPrompt(*tokenizer_, *chat_template_, text);
  return tokenizer_->Encode(text, tokenizer_->add_bos(), /*parse_special=*/true);
}

Result<std::string> ModelEngine::RenderPrompt(const server::GenerationRequest& req,
                                              ApiError* error) const {
  if (!req.is_chat) return req.prompt;
  auto text = RenderChat(req, nullptr);
  if (!text.ok()) {
    const std::string& m = text.status().message();
    if (text.status().code() == StatusCode::kResourceExhausted) {
      *error = ServerError(500, "internal_error", "template_error",
                           "model '" + options_.name + "': the chat template exceeded its " +
                               "evaluation budget: " + m,
                           0);
    } else {
      // The template refused this conversation (its raise_exception) or cannot evaluate it
      // (e.g. content parts where it concatenates strings): the request's to change.
      *error = BadRequest("model '" + options_.name + "' chat template: " + m, "messages",
                          "template_error");
    }
  }
  return text;
}

std::variant<std::string, server::ApiError> ModelEngine::ApplyTemplate(
    const server::GenerationRequest& req) const {
  ApiError err;
  auto text = RenderPrompt(req, &err);
  if (!text.ok()) return err;
  return std::move(*text);
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
    auto text = RenderChat(req, &drop);
    if (!text.ok()) return std::nullopt;
    return EncodePrompt(req, *text);
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
    if (auto tps = slo_.speeds->prefill_tokens_per_s(); tps && *tps > 0) {
      // The prompt tokens the rest of the TTFT budget can prefill, after the queued prompts.
      const double elapsed_ms = std::chrono::duration<double, std::milli>(
                                    Clock::now() - req.timeline.first_byte).count();
      const double left_ms = *ttft_budget_ms - elapsed_ms;
      const double fit = left_ms * *tps / 1000.0 - static_cast<double>(queued_prompt_tokens_.load());
      budget = std::min<int64_t>(budget, fit <= 0 ? 0 : static_cast<int64_t>(std::min(fit, 1e15)));
    }
  }
  return budget;
}

std::optional<ApiError> ModelEngine::Submit(server::RequestHandle handle,
                                            server::GenerationRequest req,
                                            server::GenerationSink sink,
                                            const SubmitSlo* slo) {
  auto live = std::make_unique<Live>();
  live->timing.first_byte = req.timeline.first_byte;
  live->timing.mark = req.timeline.validated;

  ApiError err;
  auto text = RenderPrompt(req, &err);
  if (!text.ok()) return err;
  live->timing.Charge(&live->timing.template_ms, Clock::now());

  live->prompt = EncodePrompt(req, *text);
  if (req.is_chat && req.allow_context_trim && slo != nullptr && slo_.knobs != nullptr) {
    std::shared_ptr<const slo::Knobs> knobs = slo_.knobs->Load();
    if (knobs != nullptr && knobs->LevelOf(slo->slo_class) >= slo::Level::kTrimContext) {
      const int64_t budget = TrimBudgetTokens(*slo, req);
      if (static_cast<int64_t>(live->prompt.size()) > budget) {
        (void)TrimContext(req, budget, &live->prompt, &live->trim);
      }
    }
  }
  live->timing.Charge(&live->timing.tokenize_ms, Clock::now());
  const std::string prompt_param = req.is_chat ? "messages" : "prompt";
  const int64_t n_prompt = static_cast<int64_t>(live->prompt.size());
  if (n_prompt == 0) return BadRequest("the prompt encodes to no tokens", prompt_param);
  if (n_prompt >= n_ctx_) {
    return BadRequest("the prompt is " + std::to_string(n_prompt) +
                          " tokens; the model's context holds " + std::to_string(n_ctx_) +
                          " (at least one generated token must fit)",
                      prompt_param, "context_length_exceeded");
  }
  if (req.max_tokens) {
    if (*req.max_tokens < 1) return BadRequest("max_tokens: must be >= 1", "max_tokens");
    if (n_prompt + *req.max_tokens > n_ctx_) {
      return BadRequest("prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" +
                            std::to_string(*req.max_tokens) + ") = " +
                            std::to_string(n_prompt + *req.max_tokens) +
                            " exceeds the context of " + std::to_string(n_ctx_) + " tokens",
                        "max_tokens", "context_length_exceeded");
    }
    live->max_tokens = *req.max_tokens;
  } else {
    live->max_tokens = std::min<int64_t>(options_.default_max_tokens, n_ctx_ - n_prompt);
  }
  if (n_prompt + live->max_tokens > capacity_tokens_) {
    return BadRequest("prompt + max_tokens = " + std::to_string(n_prompt + live->max_tokens) +
                          " exceeds the KV cache of " + std::to_string(capacity_tokens_) +
                          " tokens (--kv-memory)",
                      "max_tokens", "context_length_exceeded");
  }

  SamplerParams sp;
  sp.temperature = static_cast<float>(req.sampling.temperature);
  sp.top_p = static_cast<float>(req.sampling.top_p);
  sp.top_k = req.sampling.top_k;
  sp.min_p = static_cast<float>(req.sampling.min_p);
  sp.presence_penalty = static_cast<float>(req.sampling.presence_penalty);
  sp.frequency_penalty = static_cast<float>(req.sampling.frequency_penalty);
  sp.repeat_penalty = static_cast<float>(req.sampling.repeat_penalty);
  if (req.sampling.seed) sp.seed = static_cast<uint64_t>(*req.sampling.seed);
  if (Status s = ValidateSamplerParams(sp); !s.ok()) return BadRequest(s.message(), "sampling");
  auto stop = StopMatcher::Create(req.stop);
  if (!stop.ok()) return BadRequest(stop.status().message(), "stop");
  live->stop.emplace(std::move(stop).value());
  live->sampler = std::make_unique<Sampler>(sp);
  for (int32_t id : live->prompt) live->sampler->Accept(id);
  live->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_);
  live->ignore_eos = req.ignore_eos;
  if (slo != nullptr) {
    live->slo_class = slo->slo_class;
    live->priority = slo->priority;
    if (slo->admit) {
      SloAdmission verdict = slo->admit(n_prompt, live->max_tokens);
      if (verdict.error) return std::move(*verdict.error);
      if (verdict.route) {
        ApiError route;
        route.code = kRouteCode;
        return route;
      }
      if (verdict.max_tokens_cap && *verdict.max_tokens_cap < live->max_tokens) {
        live->max_tokens = std::max<int64_t>(1, *verdict.max_tokens_cap);
        live->cap_reason = verdict.cap_reason;
      }
    }
  }
  if (slo != nullptr && slo->deadline_us) {
    live->deadline_us = slo->deadline_us;
  } else if (req.deadline_ms) {
    live->deadline_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            req.timeline.first_byte.time_since_epoch()).count() +
                        *req.deadline_ms * 1000;
  }
  live->handle = handle;
  live->sink = std::move(sink);

  // The queue bound is checked here so a refusal is an immediate 429, never a late event.
  if (accepted_not_started_.fetch_add(1) >= options_.max_waiting) {
    accepted_not_started_.fetch_sub(1);
    return ServerError(429, "overloaded_error", "overloaded",
                       "model '" + options_.name + "': " + std::to_string(options_.max_waiting) +
                           " requests already queued; retry later",
                       1);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      accepted_not_started_.fetch_sub(1);
      return ServerError(503, "unavailable", "shutting_down", "the server is shutting down", 1);
    }
    queued_prompt_tokens_.fetch_add(n_prompt);
    if (live->trim.turns > 0) {
      context_trims_.fetch_add(1);
      if (slo_.outcomes != nullptr) {
        slo_.outcomes->Count(live->slo_class.empty() ? "interactive" : live->slo_class,
                             options_.name, "trimmed");
      }
    }
    inbox_.push_back(Message{handle, std::move(live)});
  }
  cv_.notify_one();
  return std::nullopt;
}

void ModelEngine::Cancel(server::RequestHandle handle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(Message{handle, nullptr});
  }
  cv_.notify_one();
}

void ModelEngine::Finish(Live& live, GenerationEvent event) {
  if (live.terminated) return;
  live.terminated = true;
  if (!live.started) {
    live.started = true;
    accepted_not_started_.fetch_sub(1);
    queued_prompt_tokens_.fetch_sub(static_cast<int64_t>(live.prompt.size()));
  }
  if (live.seq >= 0) {
    (void)ctx_->ReleaseSequence(live.seq);
    live.seq = -1;
  }
  live.sink(std::move(event));
}

void ModelEngine::DrainInbox() {
  std::deque<Message> msgs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    msgs.swap(inbox_);
  }
  for (Message& m : msgs) {
    if (m.live == nullptr) {  // cancel
      auto it = handle_to_id_.find(m.handle);
      if (it != handle_to_id_.end()) scheduler_->Cancel(it->second);
      continue;
    }
    Live& live = *m.live;
    NewRequest nr;
    nr.prompt_tokens = live.prompt;
    nr.max_tokens = live.max_tokens;
    nr.arrival_us = NowUs();
    nr.deadline_us = live.deadline_us;
    nr.priority = live.priority;
    auto id = scheduler_->Submit(std::move(nr));
    if (!id.ok()) {
      // Pre-checked on the HTTP thread; reaching here means the books disagree. Still one
      // visible terminal outcome.
      const bool full = id.status().code() == StatusCode::kResourceExhausted;
      Finish(live, GenerationEvent::Error(
                       full ? ServerError(429, "overloaded_error", "overloaded",
                                          id.status().message(), 1)
                            : BadRequest(id.status().message(), "max_tokens")));
      continue;
    }
    live.id = *id;
    handle_to_id_[live.handle] = *id;
    live_[*id] = std::move(m.live);
  }
}

void ModelEngine::Complete(Live& live, const Request& r) {
  RequestTiming& tm = live.timing;
  server::Usage usage{r.n_prompt_tokens, live.generated};
  if (!live.stop->stopped()) {
    // Whatever the detokenizer and stop matcher still hold is part of the answer.
    StopPush tail = live.stop->Push(live.detok->Flush());
    std::string rest = tail.emit + (tail.stopped ? "" : live.stop->Finish());
    if (!rest.empty()) live.sink(GenerationEvent::Token(std::move(rest), -1));
  }
  tm.Charge(&tm.sampling_ms, Clock::now());
  nlohmann::json timings = tm.ToJson(r.n_prompt_tokens, live.cached_tokens, live.generated,
                                     live.preemptions);
  // The `lifeline` extension object: what the SLO ladder did to this request.
  nlohmann::json ext = nlohmann::json::object();
  if (live.deadline_stopped) {
    ext["truncated"] = true;
    ext["reason"] = "deadline";
  } else if (!live.cap_reason.empty() && r.finish_reason == FinishReason::kLength) {
    ext["truncated"] = true;
    ext["reason"] = live.cap_reason;
  }
  if (live.trim.turns > 0) {
    ext["context_trim"] = {{"turns", live.trim.turns},
                           {"messages", live.trim.messages},
                           {"tokens", live.trim.tokens}};
  }
  if (!ext.empty()) timings["lifeline"] = std::move(ext);
  RecordFinished(live);
  GenerationEvent done = GenerationEvent::Done(FinishReasonText(r.finish_reason), usage,
                                               std::move(timings));
  done.timed_until = tm.mark;  // the server charges the rest as handoff_ms
  Finish(live, std::move(done));
}

void ModelEngine::StopAtDeadlines(int64_t now_us) {
  if (knobs_now_ == nullptr) return;  // no control plane: level 0 for every class
  std::vector<RequestId> due;
  for (const auto& [id, live] : live_) {
    // Never-started requests are left to the scheduler's expiry (503 deadline_exceeded).
    if (!live->started || !live->deadline_us || now_us < *live->deadline_us) continue;
    if (knobs_now_->LevelOf(live->slo_class) < slo::Level::kTruncate) continue;
    due.push_back(id);
  }
  for (RequestId id : due) {
    std::optional<Request> r = scheduler_->FinishNow(id, FinishReason::kLength, now_us);
    auto it = live_.find(id);
    if (!r || it == live_.end()) continue;
    Live& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());  // it was between steps
    live.deadline_stopped = true;
    ++deadline_stops_;
    if (slo_.outcomes != nullptr) {
      slo_.outcomes->Count(live.slo_class.empty() ? "interactive" : live.slo_class,
                           options_.name, "deadline_stop");
    }
    Complete(live, *r);
    handle_to_id_.erase(live.handle);
    live_.erase(it);
  }
}

bool ModelEngine::Step() {
  const auto t_step0 = Clock::now();
  StopAtDeadlines(NowUs());
  StepPlan plan = scheduler_->Schedule(NowUs());
  window_wait_us_ = plan.window_wait_us;

  for (const Request& r : plan.cancelled) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());
    Finish(live, GenerationEvent::Error(
                     ServerError(499, "cancelled", "cancelled", "the request was cancelled")));
    handle_to_id_.erase(live.handle);
    live_.erase(it);
  }
  for (const Request& r : plan.expired) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());
    Finish(live, GenerationEvent::Error(ServerError(
                     503, "unavailable", "deadline_exceeded",
                     "the request's deadline passed while it was queued: " + r.error_message, 1)));
    handle_to_id_.erase(live.handle);
    live_.erase(it);
  }
  for (RequestId id : plan.preempted) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    ++live.preemptions;
    if (live.seq >= 0) {
      (void)ctx_->ReleaseSequence(live.seq);
      live.seq = -1;
    }
  }
  if (plan.empty()) return false;

  // Build the ragged batch: each entry's positions, through its adopted block table.
  std::vector<BatchToken> batch;
  batch.reserve(static_cast<size_t>(plan.n_tokens));
  std::vector<Live*> entry_live(plan.entries.size(), nullptr);
  Status eval_status = Status::Ok();
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const StepEntry& e = plan.entries[i];
    auto it = live_.find(e.id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    entry_live[i] = &live;
    if (!live.started) {
      live.started = true;
      accepted_not_started_.fetch_sub(1);
      queued_prompt_tokens_.fetch_sub(static_cast<int64_t>(live.prompt.size()));
    }
    if (const Request* r = scheduler_->Find(e.id)) live.cached_tokens = r->n_cached_tokens;
    if (live.seq < 0) live.seq = ctx_->NewSequence();
    if (Status s = ctx_->sequences().Adopt(live.seq, e.block_table, e.start_pos); !s.ok()) {
      eval_status = s;
    }
    for (int64_t p = e.start_pos; p < e.end_pos; ++p) {
      const size_t k = static_cast<size_t>(p - e.start_pos);
      batch.push_back({e.tokens[k], p, live.seq, e.want_logits[k] != 0});
    }
    live.timing.batch_sizes.push_back(static_cast<int32_t>(plan.entries.size()));
    live.timing.batch_tokens.push_back(static_cast<int32_t>(plan.n_tokens));
  }
  const auto t_eval0 = Clock::now();
  PublishStepLoad(plan, t_eval0);
  if (eval_status.ok()) eval_status = model_->Eval(batch, *ctx_, *pool_, logits_);
  const auto t_eval1 = Clock::now();
  step_end_estimate_us_.store(0, std::memory_order_relaxed);
  if (slo_.speeds != nullptr && eval_status.ok()) {
    // Speeds for admission: a pure-decode step times one token per sequence; a step with
    // prefill chunks gives the step speed over all its tokens (the decodes riding along are
    // rows of the same products), which is how admission charges decodes that share steps
    // with a prefill.
    bool has_prefill = false;
    for (const StepEntry& e : plan.entries) has_prefill |= !e.is_decode;
    const double eval_ms = std::chrono::duration<double, std::milli>(t_eval1 - t_eval0).count();
    if (has_prefill) {
      slo_.speeds->ObservePrefill(static_cast<int64_t>(batch.size()), eval_ms, NowUs());
    } else {
      slo_.speeds->ObserveDecode(eval_ms, NowUs());
    }
  }

  std::vector<StepResult> results;
  results.reserve(plan.entries.size());
  const int64_t n_vocab = model_->config().n_vocab;
  int64_t logit_row = 0;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const StepEntry& e = plan.entries[i];
    Live* live = entry_live[i];
    const bool wants = e.wants_token();
    if (live == nullptr) {
      if (wants) ++logit_row;
      continue;
    }
    RequestTiming& tm = live->timing;
    tm.Charge(&tm.queue_ms, t_step0);
    tm.Charge(&tm.kv_alloc_ms, t_eval0);
    tm.Charge(e.is_decode ? &tm.decode_ms : &tm.prefill_ms, t_eval1);
    StepResult res;
    res.id = e.id;
    if (!eval_status.ok()) {
      res.finish = FinishReason::kError;
      res.error_message = eval_status.ToString();
      results.push_back(res);
      if (wants) ++logit_row;
      continue;
    }
    if (!wants) continue;
    float* row = logits_.data() + logit_row * n_vocab;
    ++logit_row;
    const int32_t id = live->sampler->Sample(row, static_cast<int32_t>(n_vocab));
    if (live->sampler->last_sample_degenerate()) {
      res.finish = FinishReason::kError;
      res.error_message = "the model produced no finite logits";
    } else if (!live->ignore_eos && tokenizer_->IsEndOfGeneration(id)) {
      res.finish = FinishReason::kStop;
    } else {
      live->sampler->Accept(id);
      res.token = id;
      ++live->generated;
      tm.OnToken(Clock::now());
      if (live->generated == 1) RecordFirstToken(*live);
      const StopPush pushed = live->stop->Push(live->detok->Push(id));
      if (!pushed.emit.empty()) live->sink(GenerationEvent::Token(pushed.emit, id));
      if (pushed.stopped) res.finish = FinishReason::kStop;
    }
    tm.Charge(&tm.sampling_ms, Clock::now());
    results.push_back(std::move(res));
  }

  for (Request& r : scheduler_->Update(results, NowUs())) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    if (KindOf(r.finish_reason) == FinishKind::kCompleted) {
      Complete(live, r);
    } else if (r.finish_reason == FinishReason::kDeadline) {
      Finish(live, GenerationEvent::Error(ServerError(503, "unavailable", "deadline_exceeded",
                                                      r.error_message, 1)));
    } else {
      Finish(live, GenerationEvent::Error(ServerError(500, "server_error", "engine_error",
                                                      r.error_message)));
    }
    handle_to_id_.erase(live.handle);
    live_.erase(it);
  }
  return true;
}

void ModelEngine::FailAll(const std::string& code, const std::string& message, int http_status) {
  std::deque<Message> msgs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    msgs.swap(inbox_);
  }
  for (Message& m : msgs) {
    if (m.live) {
      Finish(*m.live, GenerationEvent::Error(ServerError(http_status, "unavailable", code, message, 1)));
    }
  }
  for (auto& [id, live] : live_) {
    scheduler_->Cancel(id);
    Finish(*live, GenerationEvent::Error(ServerError(http_status, "unavailable", code, message, 1)));
  }
  live_.clear();
  handle_to_id_.clear();
}

void ModelEngine::ApplyKnobs() {
  if (slo_.speeds != nullptr) {
    // The batching window's slack check needs the time a prompt token takes to prefill.
    if (auto tps = slo_.speeds->prefill_tokens_per_s(); tps && *tps > 0) {
      scheduler_->SetServiceEstimate(1e6 / *tps);
    }
  }
  if (slo_.knobs == nullptr) return;
  // One pointer copy per step; the class levels of this step come from the same snapshot.
  knobs_now_ = slo_.knobs->Load();
  const std::shared_ptr<const slo::Knobs>& knobs = knobs_now_;
  if (knobs == nullptr || knobs->version == knobs_version_) return;
  knobs_version_ = knobs->version;
  SchedulerKnobs k = scheduler_->knobs();
  if (const slo::ModelKnobs* mk = knobs->ForModel(options_.name)) {
    // The engine's buffers were sized for options_: the controller may shrink, never exceed.
    k.max_running = std::clamp<int32_t>(mk->max_running, 1, options_.max_running);
    k.max_step_tokens =
        std::clamp<int64_t>(mk->max_step_tokens, k.max_running, options_.max_step_tokens);
  }
  k.max_queue_delay_us = std::max<int64_t>(0, knobs->max_queue_delay_us);
  k.preferred_batch_sizes = knobs->preferred_batch_sizes;
  (void)scheduler_->SetKnobs(k);
}

slo::QueueLoad ModelEngine::Load(int64_t now_us) const {
  slo::QueueLoad l;
  l.queued_requests = static_cast<int32_t>(accepted_not_started_.load());
  l.queued_prefill_tokens = queued_prompt_tokens_.load();
  l.running_prefill_tokens = running_prefill_tokens_.load(std::memory_order_relaxed);
  l.running_decodes = running_decodes_.load(std::memory_order_relaxed);
  l.step_token_budget = step_token_budget_.load(std::memory_order_relaxed);
  // Past the estimate (the step overran) nothing is added: the overrun is not predictable.
  const int64_t end_us = step_end_estimate_us_.load(std::memory_order_relaxed);
  if (end_us > now_us) l.step_left_ms = static_cast<double>(end_us - now_us) / 1000.0;
  return l;
}

void ModelEngine::PublishStepLoad(const StepPlan& plan, Clock::time_point eval_start) {
  std::unordered_map<RequestId, int64_t> planned_end;
  planned_end.reserve(plan.entries.size());
  bool has_prefill = false;
  for (const StepEntry& e : plan.entries) {
    planned_end[e.id] = e.end_pos;
    has_prefill |= !e.is_decode;
  }
  int64_t prefill_left = 0;
  int32_t decodes = 0;
  for (const auto& [id, live] : live_) {
    if (!live->started) continue;  // still in queued_prompt_tokens_
    const Request* r = scheduler_->Find(id);
    if (r == nullptr || r->finished()) continue;
    if (r->state == RequestState::kDecoding) {
      ++decodes;
      continue;
    }
    // Prefilling, or preempted (to recompute prompt + generated): what this step leaves.
    int64_t computed = r->n_computed;
    if (auto it = planned_end.find(id); it != planned_end.end()) {
      computed = std::max(computed, it->second);
    }
    const int64_t left = r->n_tokens() - computed;
    if (left > 0) {
      prefill_left += left;
    } else {
      ++decodes;  // its prefill ends with this step: it decodes from the next one
    }
  }
  running_prefill_tokens_.store(prefill_left, std::memory_order_relaxed);
  running_decodes_.store(decodes, std::memory_order_relaxed);
  double est_ms = 0;
  if (slo_.speeds != nullptr) {
    if (has_prefill) {
      if (auto tps = slo_.speeds->prefill_tokens_per_s()) {
        est_ms = static_cast<double>(plan.n_tokens) * 1000.0 / *tps;
      }
    } else if (auto dms = slo_.speeds->decode_ms_per_token()) {
      est_ms = *dms;
    }
  }
  const int64_t start_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               eval_start.time_since_epoch()).count();
  step_end_estimate_us_.store(est_ms > 0 ? start_us + static_cast<int64_t>(est_ms * 1000.0) : 0,
                              std::memory_order_relaxed);
}

void ModelEngine::RecordFirstToken(Live& live) {
  if (slo_.tracker == nullptr || live.first_recorded) return;
  live.first_recorded = true;
  const RequestTiming& tm = live.timing;
  slo::RequestSample s;
  s.ttft_ms = tm.ttft_ms;
  s.queue_ms = tm.queue_ms;  // the queue time before the first token
  const std::string& cls = live.slo_class.empty() ? std::string("interactive") : live.slo_class;
  slo_.tracker->RecordRequest(cls, options_.name, NowUs(), s);
}

void ModelEngine::RecordFinished(const Live& live) {
  if (slo_.tracker == nullptr) return;
  const RequestTiming& tm = live.timing;
  const auto now = Clock::now();
  slo::RequestSample s;
  const double e2e_ms = std::chrono::duration<double, std::milli>(now - tm.first_byte).count();
  s.e2e_ms = e2e_ms;
  // A request that produced no token (its first sample was end-of-generation) reports its
  // queue time here; one that did reported TTFT and queue time at its first token.
  if (!live.first_recorded) {
    s.queue_ms = tm.queue_ms;
    if (tm.ttft_ms >= 0) s.ttft_ms = tm.ttft_ms;
  }
  if (tm.ttft_ms >= 0 && live.generated > 1) {
    s.tpot_ms = (e2e_ms - tm.ttft_ms) / static_cast<double>(live.generated - 1);
  }
  s.itl_ms = tm.itl_ms;
  const std::string& cls = live.slo_class.empty() ? std::string("interactive") : live.slo_class;
  slo_.tracker->RecordRequest(cls, options_.name, NowUs(), s);
}

void ModelEngine::Loop() {
  for (;;) {
    heartbeat_ns_.store(Clock::now().time_since_epoch().count());
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) break;
      if (inbox_.empty() && live_.empty()) {
        // Idle: wake at least every 250 ms to keep the heartbeat fresh.
        cv_.wait_for(lock, std::chrono::milliseconds(250),
                     [&] { return stop_ || !inbox_.empty(); });
        if (stop_) break;
        continue;
      }
    }
    DrainInbox();
    ApplyKnobs();
    step_token_budget_.store(scheduler_->knobs().max_step_tokens, std::memory_order_relaxed);
    const bool ran = Step();
    if (live_.empty()) {
      // The last request ended: nothing runs (PublishStepLoad only sees non-empty plans).
      running_prefill_tokens_.store(0, std::memory_order_relaxed);
      running_decodes_.store(0, std::memory_order_relaxed);
    }
    {
      const SchedulerStats st = scheduler_->stats();
      const BlockManagerStats bs = scheduler_->block_manager().stats();
      std::lock_guard<std::mutex> lock(snapshot_mu_);
      snapshot_.waiting = st.waiting;
      snapshot_.running = st.running;
      snapshot_.kv_blocks_free = static_cast<int32_t>(scheduler_->block_manager().n_available());
      snapshot_.prefix_hit_tokens = bs.prefix_hit_tokens;
      snapshot_.prefix_lookup_tokens = bs.prefix_lookup_tokens;
      snapshot_.preemptions = st.preemptions;
      snapshot_.steps = st.steps;
      snapshot_.live_requests = static_cast<int64_t>(live_.size());
      snapshot_.window_waits = st.window_waits;
      snapshot_.max_queue_delay_us = scheduler_->knobs().max_queue_delay_us;
      snapshot_.context_trims = context_trims_.load();
      snapshot_.deadline_stops = deadline_stops_;
    }
    if (!ran && !live_.empty()) {
      // Nothing schedulable right now: the batching window holds admission (sleep until it
      // ends or a request arrives), or something rare: don't spin a core. Capped so started
      // requests' deadlines and the heartbeat are still looked at often.
      const auto wait = window_wait_us_ > 0
                            ? std::chrono::microseconds(std::min<int64_t>(window_wait_us_, 50'000))
                            : std::chrono::microseconds(1000);
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, wait, [&] { return stop_ || !inbox_.empty(); });
    }
  }
  FailAll("shutting_down", "the server is shutting down", 503);
}

}  // namespace lifeline::serving
