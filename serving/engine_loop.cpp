// EngineLoop's creation, thread and request books: the KV context sized from the memory
// budget, the scheduler / pool / drafter, Start and Stop, the inbox drained into the
// scheduler, and every way a request ends (Complete, FailGroup, FailAll, the model failing).
// The step: engine_loop_step.cpp; calibration and the idle speed refresh:
// engine_loop_calibrate.cpp.
#include "serving/engine_loop.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "engine/gguf/gguf_file.h"
#include "serving/live_request.h"
#include "serving/request_timing.h"

namespace lifeline::serving {

using api::ApiError;
using api::GenerationEvent;

namespace {

using api::ErrorKind;
using api::MakeError;

const char* FinishReasonText(FinishReason r) {
  return r == FinishReason::kLength ? "length" : "stop";
}

}  // namespace

// A choice's `lifeline` object (serving_api.h): whether the SLO ladder cut it, and how. A
// choice that ended by itself (EOS, a stop string, its own max_tokens) is not truncated,
// even when a cap was in force.
nlohmann::json EngineLoop::ChoiceLifeline(const LiveChoice& live, const Request& r) {
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

Result<EngineLoop::Kv> EngineLoop::CreateKv(const ModelConfig& config,
                                            const ModelEngineOptions& options) {
  Kv kv;
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
    LL_ASSIGN_OR_RETURN(auto c, LlamaContext::Create(config, probe));
    kv.n_ctx = c->n_ctx();
  }
  // KV pool from the memory budget: bytes per 16-position block across the layers the pool
  // holds (all of them, or the global ones when sliding-window layers keep their own window
  // storage, which comes off the budget first).
  const KvPlan plan = PlanKv(config, copts, kv.n_ctx);
  if (plan.window_bytes >= options.kv_memory_bytes) {
    return ResourceExhausted("kv-memory: " + std::to_string(options.kv_memory_bytes) +
                             " bytes do not cover the sliding-window layers' " +
                             std::to_string(plan.window_bytes) + " bytes");
  }
  const uint64_t block_bytes = plan.main_block_bytes;
  const uint64_t n_blocks_u64 = (options.kv_memory_bytes - plan.window_bytes) / block_bytes;
  const uint64_t min_blocks = static_cast<uint64_t>(KvBlocksFor(kv.n_ctx));
  if (n_blocks_u64 < min_blocks) {
    return ResourceExhausted("kv-memory: " + std::to_string(options.kv_memory_bytes) +
                             " bytes hold " + std::to_string(n_blocks_u64) + " blocks of " +
                             std::to_string(block_bytes) + " bytes; one full context of " +
                             std::to_string(kv.n_ctx) + " positions needs " +
                             std::to_string(min_blocks));
  }
  const int32_t n_blocks = static_cast<int32_t>(std::min<uint64_t>(n_blocks_u64, 1u << 30));
  copts.n_kv_blocks = n_blocks;
  LL_ASSIGN_OR_RETURN(kv.ctx, LlamaContext::Create(config, copts));
  kv.n_blocks = n_blocks;
  kv.capacity_tokens = static_cast<int64_t>(n_blocks) * kKvBlockTokens;
  kv.windowed = plan.windowed;
  return kv;
}

EngineLoop::EngineLoop(LlamaModel& model, const ModelEngineOptions& options,
                       EngineShared& shared, Kv kv)
    : options_(options),
      model_(model),
      shared_(shared),
      n_ctx_(kv.n_ctx),
      capacity_tokens_(kv.capacity_tokens),
      ctx_(std::move(kv.ctx)) {}

EngineLoop::~EngineLoop() { Stop(); }

Result<std::unique_ptr<EngineLoop>> EngineLoop::Create(LlamaModel& model,
                                                       const ModelEngineOptions& options,
                                                       EngineShared& shared, Kv kv,
                                                       std::unique_ptr<LlamaModel> draft_model) {
  const int32_t n_blocks = kv.n_blocks;
  const bool windowed = kv.windowed;
  std::unique_ptr<EngineLoop> e(new EngineLoop(model, options, shared, std::move(kv)));
  const ModelConfig& cfg = model.config();

  SchedulerConfig scfg;
  scfg.n_blocks = n_blocks;
  scfg.max_running = options.max_running;
  scfg.max_step_tokens = options.max_step_tokens;
  // The front's queue bound is the admission (ModelEngine::EnqueuePrepared); an embeddings
  // request is let in as one request however many inputs it carries, each a scheduler request
  // of its own.
  scfg.max_waiting = options.max_waiting + static_cast<int32_t>(api::kMaxEmbeddingInputs);
  scfg.max_seq_tokens = e->n_ctx_;
  // Window storage is per sequence and released as it slides: a cached prefix has no window
  // behind it, so such models compute every prompt from position 0.
  scfg.prefix_caching = !windowed;
  scfg.prefix_cache_reserve_blocks =
      options.prefix_cache_reserve_tokens < 0
          ? -1
          : (options.prefix_cache_reserve_tokens + kKvBlockTokens - 1) / kKvBlockTokens;
  // Higher priority first, then earliest deadline (requests without one last), then arrival.
  scfg.queue_order = QueueOrder::kEdfWithinPriority;
  LL_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(scfg));
  e->scheduler_->set_prefix_mirror(&shared.prefix_mirror);
  const bool disk_tier = !options.prefix_cache_dir.empty() && options.prefix_cache_disk_bytes > 0;
  if (scfg.prefix_caching && (options.prefix_cache_ram_bytes > 0 || disk_tier)) {
    KvStorage& kv_store = e->ctx_->kv();
    std::unique_ptr<KvDiskStore> disk;
    if (disk_tier) {
      const uint64_t identity = ModelKvIdentity(
          options.model_file_identity, static_cast<int>(kv_store.type()), kv_store.block_bytes());
      LL_ASSIGN_OR_RETURN(disk, KvDiskStore::Open(options.prefix_cache_dir, identity,
                                                  kv_store.block_bytes(),
                                                  options.prefix_cache_disk_bytes));
    }
    e->kv_tier_ = std::make_unique<HostKvTier>(&kv_store, options.prefix_cache_ram_bytes,
                                               std::move(disk), options.prefix_cache_ram_q8);
    e->scheduler_->SetBlockTier(e->kv_tier_.get());
  }
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
  const int32_t spec_tokens = windowed ? 0 : options.spec_tokens;
  e->spec_tokens_ = spec_tokens;
  {
    SchedulerKnobs k = e->scheduler_->knobs();
    k.spec_tokens = spec_tokens;
    k.spec_step_tokens = options.spec_step_tokens;
    LL_RETURN_IF_ERROR(e->scheduler_->SetKnobs(k));
    e->step_load_.max_running = k.max_running;
    e->step_load_.step_token_budget = k.max_step_tokens;
    shared.load.Publish(std::make_shared<const StepLoad>(e->step_load_));
  }
  e->pool_ = std::make_unique<ComputePool>(options.threads, options.pin_cpus);
  if (draft_model != nullptr) {
    if (spec_tokens == 0) {
      return InvalidArgument(windowed
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
    LL_ASSIGN_OR_RETURN(auto drafter, ModelDrafter::Create(std::move(draft_model), *e->pool_, d));
    e->drafter_ = drafter.get();
    e->scheduler_->SetDrafter(std::move(drafter));
  }
  // One row per sequence that samples this step: the scheduler asks for logits only at a
  // request's last position (StepEntry::want_logits), so at most max_running rows, plus the
  // drafted positions under speculation (fewer than spec_step_tokens per step). (Sized by
  // max_step_tokens this was 155 MB zeroed at start for a 151k vocabulary.)
  const int64_t logit_rows = options.max_running + (spec_tokens > 0 ? options.spec_step_tokens : 0);
  e->logits_.resize(static_cast<size_t>(logit_rows) * static_cast<size_t>(cfg.n_vocab));
  {
    std::lock_guard<std::mutex> lock(shared.snapshot_mu);
    shared.snapshot.kv_blocks_total = n_blocks;
    shared.snapshot.kv_blocks_free = n_blocks;
  }
  return e;
}

void EngineLoop::Start() {
  shared_.heartbeat_ns.store(Clock::now().time_since_epoch().count());
  std::future<void> calibrated = calibrated_.get_future();
  thread_ = std::thread([this] { Loop(); });
  // The engine thread owns the pool, so it runs the calibration; the HTTP server starts
  // after this returns, so no request meets an engine without a speed estimate.
  if (options_.calibrate) calibrated.wait();
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    if (shared_.stop && !thread_.joinable()) return;
    shared_.stop = true;
  }
  shared_.cv.notify_all();
  if (thread_.joinable()) thread_.join();
  // The pool's cached blocks go to the disk tier, so a restart finds these conversations.
  if (kv_tier_ != nullptr && kv_tier_->disk() != nullptr) {
    scheduler_->block_manager().ForEachCached(
        [this](BlockId block, uint64_t hash, std::span<const int32_t> tokens) {
          kv_tier_->Persist(block, hash, tokens, /*wait_for_room=*/true);
        });
    kv_tier_->Flush();
  }
}

void EngineLoop::Retire(LiveChoice& live) {
  if (live.retired) return;
  live.retired = true;
  if (live.queued) {
    live.queued = false;
    shared_.accepted_not_started.fetch_sub(1);
    shared_.queued_prompt_tokens.fetch_sub(live.queued_tokens);
    shared_.queued_decode_tokens.fetch_sub(live.queued_decode);
  }
  if (live.seq >= 0) {
    (void)ctx_->ReleaseSequence(live.seq);
    live.seq = -1;
  }
  RequestGroup& g = *live.group;
  if (--g.live_count == 0) groups_.erase(g.handle);
}

void EngineLoop::FailGroup(LiveChoice& live, GenerationEvent error) {
  std::shared_ptr<RequestGroup> g = live.group;  // Retire may drop the books' reference
  if (!g->terminated) {
    g->terminated = true;
    shared_.open_requests.fetch_sub(1);  // before the event: the client must not see it first
    g->sink(std::move(error));
    for (RequestId id : g->ids) {
      if (id != live.id) scheduler_->Cancel(id);  // they end silently (terminated)
    }
    for (auto& d : g->deferred) Retire(*d);
    g->deferred.clear();
  }
  Retire(live);
}

bool EngineLoop::Enqueue(std::unique_ptr<LiveChoice> live) {
  NewRequest nr;
  nr.prompt_tokens = live->prompt;
  nr.max_tokens = live->max_tokens;
  nr.arrival_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      Clock::now().time_since_epoch()).count();
  nr.deadline_us = live->deadline_us;
  nr.priority = live->priority;
  // A mean or cls embedding reads every position's (the first's) hidden state: computed.
  nr.reuse_prefix = !live->pooling || live->pooling->ReadsOnlyTheLast();
  auto id = scheduler_->Submit(std::move(nr));
  if (!id.ok()) {
    // Pre-checked on the HTTP thread; reaching here means the books disagree. Still one
    // visible terminal outcome.
    const bool full = id.status().code() == StatusCode::kResourceExhausted;
    ApiError e = full ? MakeError(ErrorKind::kOverloaded, "overloaded", id.status().message(),
                                  {}, 1)
                      : api::InvalidRequestError("max_tokens", id.status().message(), "");
    FailGroup(*live, GenerationEvent::Error(std::move(e)));
    return false;
  }
  live->id = *id;
  live->group->ids.push_back(*id);
  live_[*id] = std::move(live);
  return true;
}

void EngineLoop::ReleaseDeferred(RequestGroup& group, int32_t prompt_index) {
  std::vector<std::unique_ptr<LiveChoice>> ready;
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

void EngineLoop::DrainInbox() {
  std::deque<InboxMessage> msgs;
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    msgs.swap(shared_.inbox);
  }
  for (InboxMessage& m : msgs) {
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

void EngineLoop::Complete(LiveChoice& live, const Request& r) {
  std::shared_ptr<RequestGroup> g = live.group;
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
  if (live.index % g->prepared.n == 0) {
    g->usage.cached_tokens += live.cached_tokens;
    g->restored_tokens += live.restored_tokens;
  }
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
    shared_.open_requests.fetch_sub(1);  // before the event: the client must not see it first
    nlohmann::json timings = tm.ToJson(g->usage.prompt_tokens, g->usage.cached_tokens,
                                       g->usage.completion_tokens, live.preemptions);
    timings["tokens"]["restored"] = g->restored_tokens;
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
      const PreparedRequest& pr = g->prepared;
      ext["reasoning"] = {{"tokens", g->usage.reasoning_tokens},
                          {"budget_tokens", live.out->reasoning_budget_tokens()},
                          {"requested_budget_tokens", pr.reasoning_requested_tokens},
                          {"budget_source", pr.reasoning_budget_source},
                          {"cut", g->reasoning_cut}};
      if (!pr.reasoning_shortened_by.empty()) {
        ext["reasoning"]["shortened_by"] = pr.reasoning_shortened_by;
      }
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

void EngineLoop::FailModel(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(shared_.failure_mu);
    shared_.failure = why.message();
  }
  shared_.failed.store(true);
  std::fprintf(stderr,
               "lifeline serve: model '%s' failed: %s; its requests end with 503 model_failed "
               "and it is not ready until the server is restarted\n",
               options_.name.c_str(), why.message().c_str());
  FailAll("model_failed", "model '" + options_.name + "' failed: " + why.message());
}

bool EngineLoop::CheckFile(bool now) {
  if (shared_.failed.load()) return false;
  const auto t = Clock::now();
  if (!now && t - file_checked_ < std::chrono::milliseconds(500)) return true;
  file_checked_ = t;
  Status s = model_.file().Integrity();
  if (s.ok()) return true;
  FailModel(s);
  return false;
}

void EngineLoop::FailAll(const std::string& code, const std::string& message) {
  std::deque<InboxMessage> msgs;
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    msgs.swap(shared_.inbox);
  }
  const auto error = [&] {
    return GenerationEvent::Error(MakeError(ErrorKind::kUnavailable, code, message, {}, 1));
  };
  for (InboxMessage& m : msgs) {
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
