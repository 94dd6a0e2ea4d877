// EngineLoop's thread: one step = drain the inbox -> load the SLO knobs -> the deadline stop
// and late requests -> Schedule -> the batch through LlamaModel::Eval -> each choice's output
// (ChoiceOutput) -> Scheduler::Update -> terminal events -> the step's load and counters
// published to the front (EngineShared). The request-side books (RequestGroup / LiveChoice)
// are in live_request.h; the inbox drained into the scheduler and the terminal events
// in engine_loop.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "serving/engine_loop.h"
#include "serving/live_request.h"

namespace lifeline::serving {

using api::ApiError;
using api::GenerationEvent;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Clock::now().time_since_epoch()).count();
}

using api::ErrorKind;
using api::MakeError;

}  // namespace

void EngineLoop::StopAtDeadlines(int64_t now_us) {
  if (knobs_now_ == nullptr) return;  // no control plane: level 0 for every class
  std::vector<RequestId> due;
  for (const auto& [id, live] : live_) {
    // Never-started choices are left to the scheduler's expiry (503 deadline_exceeded).
    if (live->queued || !live->deadline_us || now_us < *live->deadline_us) continue;
    // Half a prefill is no embedding: one already started finishes (it has no tokens to cut).
    if (live->pooling) continue;
    if (knobs_now_->LevelOf(live->slo_class, options_.name) < slo::Level::kTruncate) continue;
    due.push_back(id);
  }
  for (RequestId id : due) {
    std::optional<Request> r = scheduler_->FinishNow(id, FinishReason::kLength, now_us);
    auto it = live_.find(id);
    if (!r || it == live_.end()) continue;
    LiveChoice& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());  // it was between steps
    live.deadline_stopped = true;
    ++deadline_stops_;
    if (slo_.outcomes != nullptr) {
      slo_.outcomes->Count(live.slo_class.empty() ? "interactive" : live.slo_class,
                           options_.name, "deadline_stop");
    }
    Complete(live, *r);
    live_.erase(it);
  }
}

void EngineLoop::ActOnLate(Clock::time_point now) {
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             now.time_since_epoch()).count();
  std::vector<RequestId> late;
  for (const auto& [id, live] : live_) {
    // Only choices never scheduled: once prefill has begun, the first token is on its way.
    if (!live->queued || !live->ttft_budget_ms || live->late || live->group->terminated) continue;
    // An embeddings / rerank request's inputs are one answer: once one of them runs, the
    // rest follow it instead of failing the whole request as late.
    if (live->pooling && live->group->started) continue;
    const double age_ms =
        std::chrono::duration<double, std::milli>(now - live->timing.first_byte).count();
    // Its own prefill is the least it still needs (the rest of the queue only adds).
    double own_ms = 0;
    if (slo_.speeds != nullptr) {
      own_ms = slo_.speeds->PrefillMs(static_cast<int64_t>(live->prompt.size())).value_or(0.0);
    }
    // Late because it waited: one that could not make its budget even when it was queued
    // was admitted knowingly (an idle model, a probe) and runs.
    if (age_ms + own_ms > *live->ttft_budget_ms &&
        live->enqueued_age_ms + own_ms <= *live->ttft_budget_ms) {
      late.push_back(id);
    }
  }
  for (RequestId id : late) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    const double age_ms =
        std::chrono::duration<double, std::milli>(now - live.timing.first_byte).count();
    const double budget_ms = *live.ttft_budget_ms;
    const std::string& cls = live.slo_class.empty() ? std::string("interactive") : live.slo_class;
    if (live.serve_late) {
      live.late = true;
      ++late_served_;
      if (live.group->late.is_null()) {
        live.group->late = {{"late", true}, {"ttft_budget_ms", budget_ms}, {"waited_ms", age_ms}};
      }
      if (slo_.outcomes != nullptr) slo_.outcomes->Count(cls, options_.name, "late_served");
      continue;
    }
    double own_ms = 0;
    if (slo_.speeds != nullptr) {
      own_ms = slo_.speeds->PrefillMs(static_cast<int64_t>(live.prompt.size())).value_or(0.0);
    }
    // The controller must see it: its TTFT would have been at least this (window only).
    if (slo_.tracker != nullptr) {
      slo_.tracker->RecordLowerBound(cls, options_.name, slo::Metric::kTtft, now_us,
                                     age_ms + own_ms);
    }
    if (slo_.outcomes != nullptr) slo_.outcomes->Count(cls, options_.name, "late_shed");
    ++late_shed_;
    (void)scheduler_->Cancel(id);  // its plan entry (none yet) and blocks go with it
    live.timing.Charge(&live.timing.queue_ms, Clock::now());
    // The queue it waited in needs about as long again to drain.
    const auto retry_s = static_cast<int32_t>(std::clamp(std::ceil(age_ms / 1000.0), 1.0, 60.0));
    char msg[320];
    std::snprintf(msg, sizeof(msg),
                  "class '%s' on model '%s': the request waited %.0f ms in the queue and its "
                  "first token can no longer come within its budget of %.0f ms (its own "
                  "prefill needs about %.0f ms more); retry after %d s",
                  cls.c_str(), options_.name.c_str(), age_ms, budget_ms, own_ms, retry_s);
    // A request's own deadline_ms keeps the documented 503 deadline_exceeded (its deadline
    // cannot be met); a class budget is load: 429 slo_late.
    FailGroup(live, GenerationEvent::Error(
                        live.budget_is_deadline
                            ? MakeError(ErrorKind::kUnavailable, "deadline_exceeded",
                                        std::string("the request's deadline can no longer be "
                                                    "met while it is queued: ") + msg,
                                        {}, 1)
                            : MakeError(ErrorKind::kOverloaded, "slo_late", msg, {}, retry_s)));
    live_.erase(it);
  }
}

void EngineLoop::ApplyPlanEnds(const StepPlan& plan) {
  for (const Request& r : plan.cancelled) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());
    FailGroup(live, GenerationEvent::Error(
                        MakeError(ErrorKind::kCancelled, "cancelled", "the request was cancelled")));
    live_.erase(it);
  }
  for (const Request& r : plan.expired) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    live.timing.Charge(&live.timing.queue_ms, Clock::now());
    FailGroup(live, GenerationEvent::Error(MakeError(
                        ErrorKind::kUnavailable, "deadline_exceeded",
                        "the request's deadline passed while it was queued: " + r.error_message,
                        {}, 1)));
    live_.erase(it);
  }
  for (RequestId id : plan.preempted) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    ++live.preemptions;
    // Recomputed from its start: a mean embedding must not count those positions twice.
    if (live.pooling) live.pooling->Reset();
    if (live.seq >= 0) {
      (void)ctx_->ReleaseSequence(live.seq);
      live.seq = -1;
    }
  }
}

// The plan's block tables go to Eval as they are: the scheduler's BlockManager owns them (and
// every block of the KV store), so the engine keeps no books of its own.
void EngineLoop::BuildBatch(const StepPlan& plan, std::vector<BatchToken>* batch,
                             std::vector<SeqKv>* kv, std::vector<LiveChoice*>* entry_live) {
  batch->reserve(static_cast<size_t>(plan.n_tokens));
  kv->reserve(plan.entries.size());
  entry_live->assign(plan.entries.size(), nullptr);
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const StepEntry& e = plan.entries[i];
    auto it = live_.find(e.id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    (*entry_live)[i] = &live;
    if (live.queued) {  // a choice leaves the queue bound the first time it is scheduled
      live.queued = false;
      live.group->started = true;
      shared_.accepted_not_started.fetch_sub(1);
      shared_.queued_prompt_tokens.fetch_sub(live.queued_tokens);
      shared_.queued_decode_tokens.fetch_sub(live.queued_decode);
    }
    if (const Request* r = scheduler_->Find(e.id)) {
      live.cached_tokens = r->n_cached_tokens;
      live.restored_tokens = r->n_restored_tokens;
    }
    if (live.seq < 0) live.seq = ctx_->NewSequence();
    kv->push_back({live.seq, e.block_table, e.start_pos});
    const auto n_prompt = static_cast<int64_t>(live.prompt.size());
    for (int64_t p = e.start_pos; p < e.end_pos; ++p) {
      const size_t k = static_cast<size_t>(p - e.start_pos);
      if (live.pooling) {  // an embedding: hidden rows where its pooling reads, no logits
        BatchToken t{e.tokens[k], p, live.seq, false};
        t.want_hidden = p < n_prompt && live.pooling->Wants(p, n_prompt);
        batch->push_back(t);
        continue;
      }
      batch->push_back({e.tokens[k], p, live.seq, e.want_logits[k] != 0});
    }
    live.timing.batch_sizes.push_back(static_cast<int32_t>(plan.entries.size()));
    live.timing.batch_tokens.push_back(static_cast<int32_t>(plan.n_tokens));
  }
}

void EngineLoop::ObserveSpeeds(const StepPlan& plan, size_t batch_tokens,
                                Clock::time_point t_eval0, Clock::time_point t_eval1) {
  if (slo_.speeds == nullptr) return;
  // Speeds for admission: a pure-decode step times one token per sequence; a step with
  // prefill chunks gives the step speed over all its tokens (the decodes riding along are
  // rows of the same products), which is how admission charges decodes that share steps with
  // a prefill.
  bool has_prefill = false;
  for (const StepEntry& e : plan.entries) has_prefill |= !e.is_decode;
  const double eval_ms = std::chrono::duration<double, std::milli>(t_eval1 - t_eval0).count();
  if (has_prefill) {
    slo_.speeds->ObservePrefill(static_cast<int64_t>(batch_tokens), eval_ms, NowUs());
  } else {
    slo_.speeds->ObserveDecode(eval_ms, NowUs());
  }
}

// The time between two consecutive steps that both carry decodes is what a decoding
// sequence waits per token (model, sampling, sending, and any prefill chunk sharing the
// step), so it is how fast running slots free: admission's slot wait (slo/admission.h) reads
// its moving average. The calibrated decode step (one sequence, nothing else) is several
// times shorter than a step of 16 decodes beside a prefill chunk.
void EngineLoop::ObserveDecodeInterval(const StepPlan& plan, Clock::time_point t_step0) {
  bool has_decode = false;
  for (const StepEntry& e : plan.entries) has_decode |= e.is_decode;
  if (!has_decode) {
    last_decode_step_ = {};
    return;
  }
  if (last_decode_step_ != Clock::time_point{}) {
    const double ms =
        std::chrono::duration<double, std::milli>(t_step0 - last_decode_step_).count();
    const double old = step_load_.decode_interval_ms;
    constexpr double kAlpha = 0.3;
    step_load_.decode_interval_ms = old > 0 ? old + kAlpha * (ms - old) : ms;
  }
  last_decode_step_ = t_step0;
}

std::vector<StepResult> EngineLoop::ProcessOutputs(const StepPlan& plan,
                                                    const std::vector<LiveChoice*>& entry_live,
                                                    const Status& eval_status,
                                                    Clock::time_point t_step0,
                                                    Clock::time_point t_eval0,
                                                    Clock::time_point t_eval1) {
  std::vector<StepResult> results;
  results.reserve(plan.entries.size());
  const int64_t n_vocab = model_.config().n_vocab;
  const int64_t n_embd = model_.config().n_embd;
  int64_t logit_row = 0, hidden_row = 0;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const StepEntry& e = plan.entries[i];
    LiveChoice* live = entry_live[i];
    const bool wants = e.wants_token();
    if (live != nullptr && live->pooling) {
      // Its rows, in batch order: the positions BuildBatch asked for.
      const auto n_prompt = static_cast<int64_t>(live->prompt.size());
      for (int64_t p = e.start_pos; p < e.end_pos; ++p) {
        if (p >= n_prompt || !live->pooling->Wants(p, n_prompt)) continue;
        if (eval_status.ok()) live->pooling->Add(p, hidden_.data() + hidden_row * n_embd);
        ++hidden_row;
      }
      results.push_back(FinishEmbedding(e, *live, eval_status, t_step0, t_eval0, t_eval1));
      if (results.back().finish == FinishReason::kNone) results.pop_back();
      continue;
    }
    // The entry's logits rows: its last position, or with a draft every position.
    float* row = wants ? logits_.data() + logit_row * n_vocab : nullptr;
    logit_row += std::count(e.want_logits.begin(), e.want_logits.end(), uint8_t{1});
    if (live == nullptr) continue;
    RequestTiming& tm = live->timing;
    tm.Charge(&tm.queue_ms, t_step0);
    if (e.is_decode && step_draft_ms_ > 0) {
      // The draft model's passes ran inside scheduling: they are compute, like the target's.
      const auto draft_start = t_eval0 - std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double, std::milli>(step_draft_ms_));
      tm.Charge(&tm.kv_alloc_ms, draft_start);
      tm.Charge(&tm.decode_ms, t_eval0);
    } else {
      tm.Charge(&tm.kv_alloc_ms, t_eval0);
    }
    tm.Charge(e.is_decode ? &tm.decode_ms : &tm.prefill_ms, t_eval1);
    StepResult res;
    res.id = e.id;
    if (!eval_status.ok()) {
      res.finish = FinishReason::kError;
      res.error_message = eval_status.ToString();
      results.push_back(res);
      continue;
    }
    if (!wants) continue;
    RequestGroup& g = *live->group;
    const bool first_sample = !live->out->sampled();
    if (first_sample && !live->echo_text.empty() && !g.terminated) {
      GenerationEvent echo = GenerationEvent::Token(live->echo_text, -1);
      echo.index = live->index;
      g.sink(std::move(echo));
    }
    // Row by row: a sample equal to the draft at that row is accepted and the next row read
    // (the draft was conditioned on it); the first other sample, or the one after the whole
    // draft, ends the step. Each sample goes through the choice's whole output path, so the
    // tokens, text and stops are those of decoding one token at a time.
    for (size_t k = 0;; ++k) {
      TokenStep step = live->out->Next(row + static_cast<int64_t>(k) * n_vocab,
                                       static_cast<int32_t>(n_vocab));
      if (step.outcome == TokenStep::Outcome::kError) {
        res.finish = FinishReason::kError;
        res.error_message = step.error;
        break;
      }
      if (step.token >= 0) {
        ++live->generated;
        ++generation_tokens_;
        tm.OnToken(Clock::now());
        RecordFirstToken(*live);
      }
      if (!step.text.empty()) tm.OnAnswer(Clock::now());
      if (!g.terminated &&
          (!step.text.empty() || !step.reasoning.empty() || !step.logprobs.empty())) {
        GenerationEvent ev = GenerationEvent::Token(std::move(step.text), step.token);
        ev.index = live->index;
        ev.reasoning = std::move(step.reasoning);
        ev.logprobs = std::move(step.logprobs);
        g.sink(std::move(ev));
      }
      const bool stop = step.outcome == TokenStep::Outcome::kStop;
      if (!stop && k < e.draft.size() && step.token == e.draft[k]) {
        res.tokens_ahead.push_back(step.token);
        continue;
      }
      if (step.token >= 0) res.token = step.token;
      if (stop) res.finish = FinishReason::kStop;
      break;
    }
    g.spec_drafted += static_cast<int64_t>(e.draft.size());
    g.spec_accepted += static_cast<int64_t>(res.tokens_ahead.size());
    if (first_sample && !g.deferred.empty()) release_.emplace_back(live->group, live->prompt_index);
    tm.Charge(&tm.sampling_ms, Clock::now());
    results.push_back(std::move(res));
  }
  return results;
}

// An embedding choice after a step: timed like a prefill; when its prompt is complete its
// answer -- the pooled vector, or a reranker's scores -- goes out as the choice's one event,
// and it finishes without a token ("stop"). kNone: its prefill goes on.
StepResult EngineLoop::FinishEmbedding(const StepEntry& e, LiveChoice& live,
                                       const Status& eval_status, Clock::time_point t_step0,
                                       Clock::time_point t_eval0, Clock::time_point t_eval1) {
  RequestTiming& tm = live.timing;
  tm.Charge(&tm.queue_ms, t_step0);
  tm.Charge(&tm.kv_alloc_ms, t_eval0);
  tm.Charge(&tm.prefill_ms, t_eval1);
  StepResult res;
  res.id = e.id;
  if (!eval_status.ok()) {
    res.finish = FinishReason::kError;
    res.error_message = eval_status.ToString();
    return res;
  }
  if (!e.wants_token()) return res;
  std::vector<float> answer = live.pooling->Pooled();
  if (live.group->prepared.task == api::Task::kRerank) {
    answer = RankScores(model_.config(), model_.weights(), answer);
  }
  if (answer.empty()) {
    res.finish = FinishReason::kError;
    res.error_message = "the embedding's pooling read no hidden state";
    return res;
  }
  // Its answer is its first (and only) output: TTFT is the time to the vector.
  tm.OnToken(Clock::now());
  RecordFirstToken(live);
  RequestGroup& g = *live.group;
  if (!g.terminated) {
    GenerationEvent ev = GenerationEvent::Token("", -1);
    ev.index = live.index;
    ev.embedding = std::move(answer);
    g.sink(std::move(ev));
  }
  tm.Charge(&tm.sampling_ms, Clock::now());
  res.finish = FinishReason::kStop;
  return res;
}

void EngineLoop::ApplyFinished(std::vector<Request> finished) {
  for (Request& r : finished) {
    auto it = live_.find(r.id);
    if (it == live_.end()) continue;
    LiveChoice& live = *it->second;
    if (KindOf(r.finish_reason) == FinishKind::kCompleted) {
      Complete(live, r);
    } else if (r.finish_reason == FinishReason::kDeadline) {
      FailGroup(live, GenerationEvent::Error(MakeError(ErrorKind::kUnavailable, "deadline_exceeded",
                                                       r.error_message, {}, 1)));
    } else {
      FailGroup(live, GenerationEvent::Error(MakeError(ErrorKind::kInternal, "engine_error",
                                                       r.error_message)));
    }
    live_.erase(it);
  }
}

bool EngineLoop::Step() {
  const auto t_step0 = Clock::now();
  StopAtDeadlines(NowUs());
  ActOnLate(SloNow());
  StepPlan plan = scheduler_->Schedule(NowUs());
  step_draft_ms_ = drafter_ != nullptr ? drafter_->TakeElapsedMs() : 0;
  window_wait_us_ = plan.window_wait_us;
  ApplyPlanEnds(plan);
  if (plan.empty()) {
    last_decode_step_ = {};
    return false;
  }
  ObserveDecodeInterval(plan, t_step0);

  std::vector<BatchToken> batch;
  std::vector<SeqKv> kv;
  std::vector<LiveChoice*> entry_live;
  BuildBatch(plan, &batch, &kv, &entry_live);
  const auto t_eval0 = Clock::now();
  PublishStepLoad(plan, t_eval0);
  const auto n_hidden = static_cast<size_t>(std::count_if(
      batch.begin(), batch.end(), [](const BatchToken& t) { return t.want_hidden; }));
  const size_t hidden_floats = n_hidden * static_cast<size_t>(model_.config().n_embd);
  if (hidden_.size() < hidden_floats) hidden_.resize(hidden_floats);
  const Status eval_status = model_.Eval(batch, kv, *ctx_, *pool_, logits_, hidden_);
  const auto t_eval1 = Clock::now();
  // Outputs computed from a file that changed under us are never sent.
  if (!CheckFile(/*now=*/true)) return true;
  if (eval_status.ok()) {
    ObserveSpeeds(plan, batch.size(), t_eval0, t_eval1);
    ObserveSpecCost(plan, std::chrono::duration<double, std::milli>(t_eval1 - t_eval0).count());
  }

  std::vector<StepResult> results =
      ProcessOutputs(plan, entry_live, eval_status, t_step0, t_eval0, t_eval1);
  ApplyFinished(scheduler_->Update(results, NowUs()));
  // A prompt's first choice has filled the prefix cache: its siblings may start.
  for (auto& [group, prompt_index] : release_) ReleaseDeferred(*group, prompt_index);
  release_.clear();
  return true;
}

void EngineLoop::ApplyKnobs() {
  if (slo_.speeds != nullptr) {
    // The batching window's slack check needs the time a prompt token takes to prefill.
    if (auto f = slo_.speeds->prefill_fit()) {
      scheduler_->SetServiceEstimate(f->per_token_ms * 1000.0);
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
  if (scheduler_->SetKnobs(k).ok()) step_load_.max_running = k.max_running;
}

void EngineLoop::PublishStepLoad(const StepPlan& plan, Clock::time_point eval_start) {
  std::unordered_map<RequestId, int64_t> planned_end;
  planned_end.reserve(plan.entries.size());
  bool has_prefill = false;
  for (const StepEntry& e : plan.entries) {
    planned_end[e.id] = e.end_pos;
    has_prefill |= !e.is_decode;
  }
  int64_t prefill_left = 0;
  int32_t decodes = 0, holding_slots = 0;
  int64_t decode_left = 0, decode_min_left = std::numeric_limits<int64_t>::max();
  const auto count_decode = [&](const Request& r) {
    ++decodes;
    const int64_t left = std::max<int64_t>(0, r.max_tokens - r.n_generated());
    decode_left += left;
    decode_min_left = std::min(decode_min_left, left);
  };
  for (const auto& [id, live] : live_) {
    if (live->queued) continue;  // still in EngineShared::queued_prompt_tokens
    const Request* r = scheduler_->Find(id);
    if (r == nullptr || r->finished()) continue;
    if (r->running()) ++holding_slots;
    if (r->state == RequestState::kDecoding) {
      count_decode(*r);
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
      count_decode(*r);  // its prefill ends with this step: it decodes from the next one
    }
  }
  step_load_.running_prefill_tokens = prefill_left;
  step_load_.running_decodes = decodes;
  step_load_.running_sequences = holding_slots;
  step_load_.running_decode_tokens_left = decode_left;
  step_load_.running_decode_min_left = decodes > 0 ? decode_min_left : 0;
  double est_ms = 0;
  if (slo_.speeds != nullptr) {
    if (has_prefill) {
      if (auto ms = slo_.speeds->PrefillMs(plan.n_tokens)) est_ms = *ms;
    } else if (auto dms = slo_.speeds->decode_ms_per_token()) {
      est_ms = *dms;
    }
  }
  const int64_t start_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               eval_start.time_since_epoch()).count();
  step_load_.step_end_estimate_us = est_ms > 0 ? start_us + static_cast<int64_t>(est_ms * 1000.0) : 0;
  shared_.load.Publish(std::make_shared<const StepLoad>(step_load_));
}

void EngineLoop::PublishIdleLoad() {
  step_load_.running_prefill_tokens = 0;
  step_load_.running_decodes = 0;
  step_load_.running_sequences = 0;
  step_load_.running_decode_tokens_left = 0;
  step_load_.running_decode_min_left = 0;
  step_load_.step_end_estimate_us = 0;
  shared_.load.Publish(std::make_shared<const StepLoad>(step_load_));
}

void EngineLoop::RecordFirstToken(LiveChoice& live) {
  RequestGroup& g = *live.group;
  if (slo_.tracker == nullptr || g.first_recorded) return;
  g.first_recorded = true;
  const RequestTiming& tm = live.timing;
  slo::RequestSample s;
  s.ttft_ms = tm.ttft_ms;
  s.queue_ms = tm.queue_ms;  // the queue time before the first token
  const std::string& cls = live.slo_class.empty() ? std::string("interactive") : live.slo_class;
  slo_.tracker->RecordRequest(cls, options_.name, NowUs(), s);
}

void EngineLoop::RecordFinished(const LiveChoice& live) {
  if (slo_.tracker == nullptr) return;
  const RequestTiming& tm = live.timing;
  const auto now = Clock::now();
  slo::RequestSample s;
  const double e2e_ms = std::chrono::duration<double, std::milli>(now - tm.first_byte).count();
  s.e2e_ms = e2e_ms;
  // A request that produced no token (its first sample was end-of-generation) reports its
  // queue time here; one that did reported TTFT and queue time at its first token.
  if (!live.group->first_recorded) {
    s.queue_ms = tm.queue_ms;
    if (tm.ttft_ms >= 0) s.ttft_ms = tm.ttft_ms;
  }
  if (tm.ttft_ms >= 0 && live.generated > 1) {
    s.tpot_ms = (e2e_ms - tm.ttft_ms) / static_cast<double>(live.generated - 1);
  }
  s.itl_ms = tm.itl_ms;
  // Time to the first answer text. A thinking request that ended before answering (its
  // thinking ran to max_tokens) answered at best at its end: e2e, a lower bound.
  const bool thought = live.out.has_value() && live.out->reasoning_tokens() > 0;
  if (tm.ttfa_ms >= 0) {
    s.ttfa_ms = tm.ttfa_ms;
  } else if (thought) {
    s.ttfa_ms = e2e_ms;
  }
  if (thought && tm.ttft_ms >= 0 && s.ttfa_ms) s.think_ms = std::max(0.0, *s.ttfa_ms - tm.ttft_ms);
  const std::string& cls = live.slo_class.empty() ? std::string("interactive") : live.slo_class;
  slo_.tracker->RecordRequest(cls, options_.name, NowUs(), s);
}

void EngineLoop::PublishSnapshot() {
  const SchedulerStats st = scheduler_->stats();
  const BlockManagerStats bs = scheduler_->block_manager().stats();
  std::lock_guard<std::mutex> lock(shared_.snapshot_mu);
  shared_.snapshot.waiting = st.waiting;
  shared_.snapshot.running = st.running;
  shared_.snapshot.kv_blocks_free = static_cast<int32_t>(scheduler_->block_manager().n_available());
  shared_.snapshot.kv_blocks_touched = bs.blocks_touched;
  shared_.snapshot.prefix_hit_tokens = bs.prefix_hit_tokens;
  shared_.snapshot.prefix_lookup_tokens = bs.prefix_lookup_tokens;
  shared_.snapshot.prefix_restored_tokens = st.tier_restored_blocks * kKvBlockTokens;
  if (kv_tier_ != nullptr) shared_.snapshot.ram_tier = kv_tier_->Stats();
  shared_.snapshot.preemptions = st.preemptions;
  shared_.snapshot.spec_drafted = st.spec_drafted;
  shared_.snapshot.spec_accepted = st.spec_accepted;
  shared_.snapshot.steps = st.steps;
  shared_.snapshot.live_requests = static_cast<int64_t>(groups_.size());
  shared_.snapshot.window_waits = st.window_waits;
  shared_.snapshot.max_queue_delay_us = scheduler_->knobs().max_queue_delay_us;
  shared_.snapshot.context_trims = shared_.context_trims.load();
  shared_.snapshot.deadline_stops = deadline_stops_;
  shared_.snapshot.late_shed = late_shed_;
  shared_.snapshot.late_served = late_served_;
  shared_.snapshot.speed_refreshes = speed_refreshes_;
  shared_.snapshot.prompt_tokens = prompt_tokens_;
  shared_.snapshot.generation_tokens = generation_tokens_;
}

void EngineLoop::Loop() {
  if (options_.calibrate) Calibrate();
  if (spec_tokens_ > 0) CalibrateSpeculation();
  calibrated_.set_value();
  for (;;) {
    shared_.heartbeat_ns.store(Clock::now().time_since_epoch().count());
    if (shared_.failed.load() || !CheckFile(/*now=*/false)) {
      // A failed model answers every request with its error and computes nothing.
      FailAll("model_failed", "model '" + options_.name + "' failed: " + shared_.Failure());
      std::unique_lock<std::mutex> lock(shared_.mu);
      if (shared_.stop) break;
      shared_.cv.wait_for(lock, std::chrono::milliseconds(250),
                          [&] { return shared_.stop || !shared_.inbox.empty(); });
      continue;
    }
    {
      std::unique_lock<std::mutex> lock(shared_.mu);
      if (shared_.stop) break;
      if (shared_.inbox.empty() && live_.empty()) {
        lock.unlock();
        MaybeRefreshSpeed();
        lock.lock();
        if (shared_.stop) break;
        if (!shared_.inbox.empty()) continue;
        // Idle: wake at least every 250 ms to keep the heartbeat fresh.
        shared_.cv.wait_for(lock, std::chrono::milliseconds(250),
                            [&] { return shared_.stop || !shared_.inbox.empty(); });
        if (shared_.stop) break;
        continue;
      }
    }
    DrainInbox();
    ApplyKnobs();
    step_load_.step_token_budget = scheduler_->knobs().max_step_tokens;
    const bool ran = Step();
    if (live_.empty()) {
      // The last request ended: nothing runs (PublishStepLoad only sees non-empty plans).
      PublishIdleLoad();
    }
    PublishSnapshot();
    if (!ran && !live_.empty()) {
      // Nothing schedulable right now: the batching window holds admission (sleep until it
      // ends or a request arrives), or something rare: don't spin a core. Capped so started
      // requests' deadlines and the heartbeat are still looked at often.
      const auto wait = window_wait_us_ > 0
                            ? std::chrono::microseconds(std::min<int64_t>(window_wait_us_, 50'000))
                            : std::chrono::microseconds(1000);
      std::unique_lock<std::mutex> lock(shared_.mu);
      shared_.cv.wait_for(lock, wait, [&] { return shared_.stop || !shared_.inbox.empty(); });
    }
  }
  FailAll("shutting_down", "the server is shutting down");
}

}  // namespace lifeline::serving
