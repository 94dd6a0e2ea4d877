#include "scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "base/check.h"
#include "base/checked_math.h"
#include "scheduler/draft.h"

namespace lifeline {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }

// PREFILLING while more than one known token lacks K/V, DECODING when only the last does.
RequestState RunningState(const Request& r) {
  return r.n_tokens() - r.n_computed > 1 ? RequestState::kPrefilling : RequestState::kDecoding;
}

Status ValidateConfig(const SchedulerConfig& c) {
  if (c.n_blocks < 1) return InvalidArgument("n_blocks: " + Num(c.n_blocks) + " < 1");
  if (c.max_running < 1) return InvalidArgument("max_running: " + Num(c.max_running) + " < 1");
  if (c.max_step_tokens < 1) {
    return InvalidArgument("max_step_tokens: " + Num(c.max_step_tokens) + " < 1");
  }
  if (c.max_waiting < 1) return InvalidArgument("max_waiting: " + Num(c.max_waiting) + " < 1");
  if (c.max_waiting_tokens < 1) {
    return InvalidArgument("max_waiting_tokens: " + Num(c.max_waiting_tokens) + " < 1");
  }
  if (c.max_seq_tokens < 0) {
    return InvalidArgument("max_seq_tokens: " + Num(c.max_seq_tokens) + " < 0");
  }
  if (c.block_hash_fn == nullptr) return InvalidArgument("block_hash_fn: null");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config) {
  LL_RETURN_IF_ERROR(ValidateConfig(config));
  return std::unique_ptr<Scheduler>(new Scheduler(config));
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      knobs_{config.max_running, config.max_step_tokens},
      policy_(MakeQueuePolicy(config.queue_order)),
      blocks_(config.n_blocks, config.block_hash_fn),
      drafter_(std::make_unique<PromptLookupDrafter>()) {
  blocks_.set_prefix_caching(config.prefix_caching);
  blocks_.SetCacheReserve(config.prefix_cache_reserve_blocks);
}

Status Scheduler::SetKnobs(const SchedulerKnobs& knobs) {
  if (knobs.max_running < 1) {
    return InvalidArgument("max_running: " + Num(knobs.max_running) + " < 1");
  }
  if (knobs.max_step_tokens < 1) {
    return InvalidArgument("max_step_tokens: " + Num(knobs.max_step_tokens) + " < 1");
  }
  if (knobs.max_queue_delay_us < 0) {
    return InvalidArgument("max_queue_delay_us: " + Num(knobs.max_queue_delay_us) + " < 0");
  }
  for (size_t i = 0; i < knobs.preferred_batch_sizes.size(); ++i) {
    const int32_t p = knobs.preferred_batch_sizes[i];
    if (p < 1 || (i > 0 && p <= knobs.preferred_batch_sizes[i - 1])) {
      return InvalidArgument("preferred_batch_sizes[" + Num(static_cast<int64_t>(i)) + "]: " +
                             Num(p) + " must be >= 1 and above the previous size");
    }
  }
  if (knobs.spec_tokens < 0 || knobs.spec_tokens > kMaxSpecTokens) {
    return InvalidArgument("spec_tokens: " + Num(knobs.spec_tokens) + " outside [0, " +
                           Num(kMaxSpecTokens) + "]");
  }
  if (knobs.spec_step_tokens < 1) {
    return InvalidArgument("spec_step_tokens: " + Num(knobs.spec_step_tokens) + " < 1");
  }
  knobs_ = knobs;
  return Status::Ok();
}

void Scheduler::SetQueuePolicy(std::unique_ptr<QueuePolicy> policy) {
  LL_CHECK(policy != nullptr);
  policy_ = std::move(policy);
}

Result<RequestId> Scheduler::Submit(NewRequest req) {
  const int64_t n_prompt = static_cast<int64_t>(req.prompt_tokens.size());
  auto reject = [&](Status s) {
    ++(s.code() == StatusCode::kResourceExhausted ? stats_.rejected_queue_full
                                                  : stats_.rejected_invalid);
    return s;
  };
  if (n_prompt == 0) return reject(InvalidArgument("prompt_tokens: empty; at least 1 token"));
  if (req.max_tokens < 1) {
    return reject(InvalidArgument("max_tokens: " + Num(req.max_tokens) + " < 1"));
  }
  uint64_t total = 0;
  if (!CheckedAdd(static_cast<uint64_t>(n_prompt), static_cast<uint64_t>(req.max_tokens),
                  &total) ||
      total > static_cast<uint64_t>(blocks_.capacity_tokens())) {
    return reject(OutOfRange("prompt_tokens + max_tokens = " + Num(n_prompt) + " + " +
                             Num(req.max_tokens) + " exceeds the KV pool capacity of " +
                             Num(blocks_.capacity_tokens()) + " tokens (" +
                             Num(blocks_.n_blocks()) + " blocks of " +
                             Num(kKvBlockTokens) + ")"));
  }
  if (config_.max_seq_tokens > 0 && total > static_cast<uint64_t>(config_.max_seq_tokens)) {
    return reject(OutOfRange("prompt_tokens + max_tokens = " + Num(static_cast<int64_t>(total)) +
                             " exceeds max_seq_tokens " + Num(config_.max_seq_tokens)));
  }
  if (n_prompt > config_.max_waiting_tokens) {
    return reject(OutOfRange("prompt_tokens: " + Num(n_prompt) +
                             " exceeds max_waiting_tokens " + Num(config_.max_waiting_tokens)));
  }
  if (static_cast<int64_t>(waiting_.size()) >= config_.max_waiting) {
    return reject(ResourceExhausted("queue full: " + Num(static_cast<int64_t>(waiting_.size())) +
                                    " requests waiting, max_waiting " +
                                    Num(config_.max_waiting)));
  }
  if (waiting_tokens_ + n_prompt > config_.max_waiting_tokens) {
    return reject(ResourceExhausted("queue full: " + Num(waiting_tokens_) + " tokens waiting + " +
                                    Num(n_prompt) + " exceeds max_waiting_tokens " +
                                    Num(config_.max_waiting_tokens)));
  }
  Request r;
  r.id = next_id_++;
  r.tokens = std::move(req.prompt_tokens);
  r.n_prompt_tokens = n_prompt;
  r.max_tokens = req.max_tokens;
  r.arrival_us = req.arrival_us;
  r.deadline_us = req.deadline_us;
  r.priority = req.priority;
  r.reuse_prefix = req.reuse_prefix;
  r.state = RequestState::kWaiting;
  const RequestId id = r.id;
  live_.emplace(id, std::move(r));
  waiting_.push_back(id);
  waiting_tokens_ += n_prompt;
  ++stats_.submitted;
  return id;
}

bool Scheduler::Cancel(RequestId id) {
  if (live_.count(id) == 0) return false;
  pending_cancelled_.push_back(Finish(id, FinishReason::kCancelled, "cancelled", last_now_us_));
  return true;
}

const Request* Scheduler::Find(RequestId id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

bool Scheduler::MoreImportant(const Request& a, const Request& b) const {
  return std::make_tuple(-int64_t{a.priority}, a.arrival_us, a.id) <
         std::make_tuple(-int64_t{b.priority}, b.arrival_us, b.id);
}

void Scheduler::EraseFrom(std::vector<RequestId>& list, RequestId id) {
  auto it = std::find(list.begin(), list.end(), id);
  if (it != list.end()) list.erase(it);
}

Request Scheduler::Finish(RequestId id, FinishReason reason, std::string message,
                          int64_t now_us) {
  auto it = live_.find(id);
  LL_CHECK(it != live_.end());
  Request r = std::move(it->second);
  live_.erase(it);
  drafter_->Forget(id);
  if (r.running()) {
    blocks_.Free(id);
    EraseFrom(running_, id);
  } else {
    EraseFrom(waiting_, id);
    waiting_tokens_ -= r.n_tokens();
  }
  r.state = RequestState::kFinished;
  r.finish_reason = reason;
  if (KindOf(reason) == FinishKind::kError) r.error_message = std::move(message);
  r.finished_us = now_us;
  switch (KindOf(reason)) {
    case FinishKind::kCompleted: ++stats_.completed; break;
    case FinishKind::kCancelled: ++stats_.cancelled; break;
    default: ++stats_.errored; break;
  }
  if (reason == FinishReason::kDeadline) ++stats_.expired;
  return r;
}

void Scheduler::ExpireWaiting(int64_t now_us, StepPlan* plan) {
  const std::vector<RequestId> queued = waiting_;
  for (RequestId id : queued) {
    const Request& r = live_.at(id);
    if (!r.deadline_us || now_us < *r.deadline_us) continue;
    std::string msg = "deadline passed while waiting: now " + Num(now_us) + " us >= deadline " +
                      Num(*r.deadline_us) + " us";
    plan->expired.push_back(Finish(id, FinishReason::kDeadline, std::move(msg), now_us));
  }
}

void Scheduler::AddEntry(Request& r, int64_t n_positions, bool is_decode, StepPlan* plan,
                         std::vector<int32_t> draft) {
  LL_CHECK(n_positions >= 1);
  StepEntry e;
  e.id = r.id;
  auto table = blocks_.Table(r.id);
  e.block_table.assign(table.begin(), table.end());
  e.start_pos = r.n_computed;
  e.end_pos = r.n_computed + n_positions;
  LL_CHECK(e.end_pos <= r.n_tokens());
  e.tokens.assign(r.tokens.begin() + e.start_pos, r.tokens.begin() + e.end_pos);
  e.want_logits.assign(static_cast<size_t>(n_positions), 0);
  if (e.end_pos == r.n_tokens()) e.want_logits.back() = 1;
  if (!draft.empty()) {  // a decode: [last known] ++ draft, logits at every position
    LL_CHECK(is_decode && n_positions == 1);
    e.tokens.insert(e.tokens.end(), draft.begin(), draft.end());
    e.end_pos += static_cast<int64_t>(draft.size());
    e.want_logits.assign(e.tokens.size(), 1);
    e.draft = std::move(draft);
  }
  LL_CHECK(KvBlocksFor(e.end_pos) <= static_cast<int64_t>(e.block_table.size()));
  e.is_decode = is_decode;
  scheduled_this_step_.emplace(r.id, static_cast<int64_t>(plan->entries.size()));
  budget_tokens_ -= e.end_pos - e.start_pos;
  plan->entries.push_back(std::move(e));
  --slots_;
}

void Scheduler::SetDrafter(std::unique_ptr<Drafter> drafter) {
  LL_CHECK(drafter != nullptr);
  drafter_ = std::move(drafter);
}

void Scheduler::ObserveSpecCost(int64_t n_tokens, double ms) {
  if (n_tokens < 1 || n_tokens > static_cast<int64_t>(spec_cost_ms_.size())) return;
  constexpr double kAlpha = 0.05;
  double& c = spec_cost_ms_[static_cast<size_t>(n_tokens - 1)];
  c += kAlpha * (ms - c);
}

int64_t Scheduler::BestDraftLength(double a, int64_t max_k, int64_t step_tokens) const {
  if (spec_cost_ms_.empty()) return max_k;  // no cost model: every pass costs the same
  const auto cost = [this](int64_t n) { return spec_cost_ms_[static_cast<size_t>(n - 1)]; };
  const int64_t table = static_cast<int64_t>(spec_cost_ms_.size());
  if (step_tokens < 1 || step_tokens > table || cost(step_tokens) <= 0) return 0;
  double best_rate = static_cast<double>(step_tokens) / cost(step_tokens);
  const double draft_ms = std::max(0.0, drafter_->ms_per_token());
  int64_t best_k = 0;
  double gain = 0, a_pow = 1;
  for (int64_t k = 1; k <= max_k && step_tokens + k <= table; ++k) {
    a_pow *= a;
    gain += a_pow;  // E_k: the k-th draft counts only if all before it were accepted
    if (cost(step_tokens + k) <= 0) break;
    const double rate = (static_cast<double>(step_tokens) + gain) /
                        (cost(step_tokens + k) + static_cast<double>(k) * draft_ms);
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
    }
  }
  return best_k;
}

// Drafts go to the most important decodes first, only while nobody waits (a new request's
// first token matters more than a running one's next few), within the step's verification
// cap and budget, the request's max_tokens (the bonus token after the draft is one of them)
// and context, and never at the price of a preemption: no free blocks, no draft.
std::vector<int32_t> Scheduler::DraftFor(Request& r, int64_t* spec_budget, int64_t step_tokens) {
  std::vector<int32_t> none;
  if (knobs_.spec_tokens <= 0 || !waiting_.empty()) return none;
  int64_t k = std::min<int64_t>({knobs_.spec_tokens, *spec_budget - 1, budget_tokens_ - 1,
                                 r.max_tokens - r.n_generated() - 1});
  if (config_.max_seq_tokens > 0) k = std::min<int64_t>(k, config_.max_seq_tokens - r.n_tokens());
  if (k < 1) return none;
  // Worth verifying? The request's acceptance so far (a prior of 1/2 before any draft) against
  // what longer passes cost.
  const double acceptance = (static_cast<double>(r.spec_accepted) + 1.0) /
                            (static_cast<double>(r.spec_drafted) + 2.0);
  k = BestDraftLength(acceptance, k, step_tokens);
  if (k < 1) return none;
  std::vector<int32_t> draft = drafter_->Draft(r.id, r.tokens, static_cast<int32_t>(k));
  if (draft.size() > static_cast<size_t>(k)) draft.resize(static_cast<size_t>(k));
  if (draft.empty()) return none;
  if (!blocks_.Allocate(r.id, r.n_computed + 1 + static_cast<int64_t>(draft.size()))) return none;
  *spec_budget -= static_cast<int64_t>(draft.size());
  return draft;
}

Request* Scheduler::PickVictim(const Request* than) {
  Request* victim = nullptr;
  for (RequestId id : running_) {
    if (scheduled_this_step_.count(id) != 0) continue;
    Request& r = live_.at(id);
    if (than != nullptr && !MoreImportant(*than, r)) continue;
    if (victim == nullptr || MoreImportant(*victim, r)) victim = &r;
  }
  return victim;
}

void Scheduler::Preempt(Request& r, StepPlan* plan) {
  // Note: recompute rather than swap; the prefix cache keeps its committed full blocks as
  // evictable, so a resume soon after often gets most of them back for free.
  blocks_.Free(r.id);
  EraseFrom(running_, r.id);
  r.state = RequestState::kPreempted;
  r.n_computed = 0;
  ++r.n_preemptions;
  waiting_.push_back(r.id);
  waiting_tokens_ += r.n_tokens();
  plan->preempted.push_back(r.id);
  preempted_this_step_ = true;
  ++stats_.preemptions;
}

namespace {
std::vector<RequestId> SortedBy(std::vector<RequestId> ids,
                                const std::unordered_map<RequestId, Request>& live,
                                auto&& less) {
  std::sort(ids.begin(), ids.end(),
            [&](RequestId a, RequestId b) { return less(live.at(a), live.at(b)); });
  return ids;
}
}  // namespace

void Scheduler::ScheduleDecodes(StepPlan* plan) {
  auto by_importance = [this](const Request& a, const Request& b) {
    return MoreImportant(a, b);
  };
  // Verification tokens the step may still take: decodes plus drafts.
  int64_t spec_budget = knobs_.spec_step_tokens;
  // The step's decode tokens as the cost model sees them: every decode (they all run, up to
  // the slots), plus the drafts added so far.
  int64_t step_tokens = 0;
  for (RequestId id : running_) step_tokens += live_.at(id).state == RequestState::kDecoding;
  step_tokens = std::min<int64_t>(step_tokens, slots_);
  for (RequestId id : SortedBy(running_, live_, by_importance)) {
    if (budget_tokens_ <= 0 || slots_ <= 0) break;
    Request& r = live_.at(id);
    if (r.state != RequestState::kDecoding) continue;  // prefilling, or preempted just now
    bool preempted_self = false;
    while (!blocks_.Allocate(id, r.n_computed + 1)) {
      Request* victim = PickVictim(nullptr);  // r itself is a candidate
      LL_CHECK(victim != nullptr);
      preempted_self = victim == &r;
      Preempt(*victim, plan);
      if (preempted_self) break;
    }
    if (preempted_self) continue;
    std::vector<int32_t> draft = DraftFor(r, &spec_budget, step_tokens);
    step_tokens += static_cast<int64_t>(draft.size());
    --spec_budget;
    AddEntry(r, 1, /*is_decode=*/true, plan, std::move(draft));
  }
}

void Scheduler::SchedulePrefills(StepPlan* plan) {
  auto by_importance = [this](const Request& a, const Request& b) {
    return MoreImportant(a, b);
  };
  for (RequestId id : SortedBy(running_, live_, by_importance)) {
    if (budget_tokens_ <= 0 || slots_ <= 0) break;
    Request& r = live_.at(id);
    if (r.state != RequestState::kPrefilling || scheduled_this_step_.count(id) != 0) continue;
    const int64_t want = std::min(r.n_tokens() - r.n_computed, budget_tokens_);
    while (true) {
      const int64_t held = static_cast<int64_t>(blocks_.Table(id).size());
      const int64_t fit = (held + blocks_.n_available()) * kKvBlockTokens - r.n_computed;
      if (fit >= 1) {
        // A short chunk now beats none: blocks freed later let the rest follow.
        const int64_t n = std::min(want, fit);
        LL_CHECK(blocks_.Allocate(id, r.n_computed + n));
        AddEntry(r, n, /*is_decode=*/false, plan);
        break;
      }
      // Only a less important request may give way; otherwise wait for blocks to free up.
      Request* victim = PickVictim(&r);
      if (victim == nullptr) break;
      Preempt(*victim, plan);
    }
  }
}

int64_t Scheduler::WindowWaitUs(int64_t now_us) const {
  const int64_t delay_us = knobs_.max_queue_delay_us;
  if (delay_us <= 0) return 0;
  int32_t n_new = 0;
  int64_t oldest_us = 0;
  for (RequestId id : waiting_) {
    const Request& r = live_.at(id);
    if (r.state == RequestState::kPreempted) return 0;  // admitted once already: never held
    oldest_us = n_new == 0 ? r.arrival_us : std::min(oldest_us, r.arrival_us);
    ++n_new;
  }
  if (n_new == 0) return 0;
  const int64_t running = static_cast<int64_t>(running_.size());
  const int64_t limit = knobs_.max_running;
  const int64_t reachable = std::min<int64_t>(running + n_new, limit);
  if (reachable >= limit) return 0;  // a full batch
  for (int32_t p : knobs_.preferred_batch_sizes) {
    if (p > running && p <= reachable) return 0;  // a preferred size is reached now
  }
  const int64_t remaining_us = delay_us - (now_us - oldest_us);
  if (remaining_us <= 0) return 0;  // the oldest has waited the whole delay
  // Slack: waiting out the rest of the window must leave each deadline time for its prefill.
  for (RequestId id : waiting_) {
    const Request& r = live_.at(id);
    if (!r.deadline_us) continue;
    const double prefill_us = prefill_us_per_token_ * static_cast<double>(r.n_tokens());
    if (static_cast<double>(*r.deadline_us - now_us - remaining_us) <= prefill_us) return 0;
  }
  return remaining_us;
}

void Scheduler::SetBlockTier(BlockTier* tier) {
  tier_ = tier;
  if (tier == nullptr) {
    blocks_.SetEvictionObserver(nullptr);
    return;
  }
  blocks_.SetEvictionObserver([tier](BlockId block, uint64_t hash,
                                     std::span<const int32_t> tokens) {
    tier->OnEvict(block, hash, tokens);
  });
}

int64_t Scheduler::TierRun(std::span<const int32_t> tokens, int64_t pool_blocks,
                           std::vector<uint64_t>* hashes) const {
  if (tier_ == nullptr) return 0;
  const int64_t max_blocks = BlockManager::MaxPrefixBlocks(static_cast<int64_t>(tokens.size()));
  if (pool_blocks >= max_blocks) return 0;
  *hashes = blocks_.ChainHashes(tokens, max_blocks);
  int64_t run = 0;
  for (int64_t b = pool_blocks; b < max_blocks; ++b) {
    if (!tier_->Holds((*hashes)[static_cast<size_t>(b)],
                      tokens.subspan(static_cast<size_t>(b * kKvBlockTokens), kKvBlockTokens))) {
      break;
    }
    ++run;
  }
  return run;
}

void Scheduler::AdmitWaiting(int64_t now_us, StepPlan* plan) {
  // Note: a step that had to preempt for lack of blocks admits nobody; admitting would only
  // hand the just-freed blocks to a newcomer and preempt again next step.
  if (preempted_this_step_) return;
  if (const int64_t wait_us = WindowWaitUs(now_us); wait_us > 0) {
    plan->window_wait_us = wait_us;
    return;
  }
  std::stable_sort(waiting_.begin(), waiting_.end(), [this](RequestId a, RequestId b) {
    return policy_->Precedes(live_.at(a), live_.at(b));
  });
  const std::vector<RequestId> order = waiting_;
  for (RequestId id : order) {
    if (budget_tokens_ <= 0 || slots_ <= 0 ||
        static_cast<int64_t>(running_.size()) >= knobs_.max_running) {
      break;
    }
    Request& r = live_.at(id);
    const PrefixProbe probe = r.reuse_prefix ? blocks_.ProbePrefix(r.tokens) : PrefixProbe{};
    // The prefix may continue in the tier below the pool: those blocks are restored, not
    // computed (they still need pool blocks).
    std::vector<uint64_t> hashes;
    const int64_t tier_blocks = r.reuse_prefix ? TierRun(r.tokens, probe.n_blocks, &hashes) : 0;
    const int64_t reused = probe.n_tokens + tier_blocks * kKvBlockTokens;
    const int64_t n = std::min(r.n_tokens() - reused, budget_tokens_);
    const int64_t need = KvBlocksFor(reused + n) - probe.n_blocks;
    // Attaching evictable hits takes them off the list an allocation could draw from.
    if (need > blocks_.n_available() - probe.n_unreferenced) break;  // strict queue order
    Result<int64_t> cached = r.reuse_prefix ? blocks_.MatchPrefix(id, r.tokens) : Result<int64_t>(0);
    LL_CHECK(cached.ok() && *cached == probe.n_tokens);
    LL_CHECK(blocks_.Allocate(id, reused + n));
    EraseFrom(waiting_, id);
    waiting_tokens_ -= r.n_tokens();
    running_.push_back(id);
    // Restore in chain order; the first refusal ends the run (the rest is computed).
    int64_t restored = 0;
    for (int64_t j = 0; j < tier_blocks; ++j) {
      const int64_t b = probe.n_blocks + j;
      const std::span<const int32_t> block_tokens(r.tokens.data() + b * kKvBlockTokens,
                                                  kKvBlockTokens);
      const BlockId into = blocks_.Table(id)[static_cast<size_t>(b)];
      if (!tier_->Restore(hashes[static_cast<size_t>(b)], block_tokens, into)) {
        ++stats_.tier_restore_failures;
        break;
      }
      LL_CHECK(blocks_.CommitFullBlock(id, block_tokens).ok());
      ++restored;
    }
    stats_.tier_restored_blocks += restored;
    r.n_restored_tokens = restored * kKvBlockTokens;
    r.n_restored_tokens_total += r.n_restored_tokens;
    r.n_computed = *cached + r.n_restored_tokens;
    r.n_cached_tokens = r.n_computed;
    r.n_cached_tokens_total += r.n_computed;
    r.state = RunningState(r);
    AddEntry(r, n, /*is_decode=*/false, plan);
  }
}

StepPlan Scheduler::Schedule(int64_t now_us) {
  LL_CHECK(in_flight_.empty());  // Update() must consume the previous plan first
  last_now_us_ = now_us;
  StepPlan plan;
  plan.step_index = step_index_++;
  plan.cancelled = std::move(pending_cancelled_);
  pending_cancelled_.clear();
  ExpireWaiting(now_us, &plan);

  budget_tokens_ = knobs_.max_step_tokens;
  slots_ = knobs_.max_running;
  preempted_this_step_ = false;
  scheduled_this_step_.clear();
  ScheduleDecodes(&plan);
  SchedulePrefills(&plan);
  AdmitWaiting(now_us, &plan);
  scheduled_this_step_.clear();
  const bool held = plan.window_wait_us > 0;
  if (held) {
    ++stats_.window_held_steps;
    if (!window_held_last_step_) ++stats_.window_waits;
  }
  window_held_last_step_ = held;

  for (const StepEntry& e : plan.entries) plan.n_tokens += e.end_pos - e.start_pos;
  for (const StepEntry& e : plan.entries) {
    Request& r = live_.at(e.id);
    BatchRecord rec;
    rec.step_index = plan.step_index;
    rec.scheduled_us = now_us;
    rec.step_tokens = static_cast<int32_t>(plan.n_tokens);
    rec.step_seqs = static_cast<int32_t>(plan.entries.size());
    rec.own_tokens = static_cast<int32_t>(e.end_pos - e.start_pos);
    r.batches.push_back(rec);
    if (!r.first_scheduled_us) r.first_scheduled_us = now_us;
    in_flight_.push_back({e.id, e.end_pos, e.wants_token(), e.draft});
  }
  if (!plan.entries.empty()) ++stats_.steps;
  return plan;
}

std::vector<Request> Scheduler::Update(std::span<const StepResult> results, int64_t now_us) {
  std::vector<Request> finished;
  if (in_flight_.empty()) return finished;
  last_now_us_ = now_us;
  std::unordered_map<RequestId, const StepResult*> by_id;
  for (const StepResult& res : results) by_id[res.id] = &res;

  for (const InFlight& f : in_flight_) {
    auto it = live_.find(f.id);
    if (it == live_.end() || !it->second.running()) continue;  // cancelled meanwhile
    Request& r = it->second;
    auto found = by_id.find(f.id);
    const StepResult* res = found == by_id.end() ? nullptr : found->second;
    if (res != nullptr && res->finish == FinishReason::kError) {
      std::string msg = res->error_message.empty() ? "engine error" : res->error_message;
      finished.push_back(Finish(f.id, FinishReason::kError, std::move(msg), now_us));
      continue;
    }
    // Speculation: the accepted drafts must be a prefix of the draft, or the engine and the
    // books disagree about what sits in the cache.
    const size_t ahead = res != nullptr ? res->tokens_ahead.size() : 0;
    if (ahead > f.draft.size() ||
        (ahead > 0 && !std::equal(res->tokens_ahead.begin(), res->tokens_ahead.end(), f.draft.begin()))) {
      finished.push_back(Finish(f.id, FinishReason::kError,
                                "engine reported " + Num(static_cast<int64_t>(ahead)) +
                                    " accepted tokens that are not a prefix of the " +
                                    Num(static_cast<int64_t>(f.draft.size())) + "-token draft",
                                now_us));
      continue;
    }
    // Positions hold valid K/V up to the last accepted draft; the rest of the draft's are
    // rewritten by later steps.
    r.n_computed = f.end_pos - static_cast<int64_t>(f.draft.size() - ahead);
    r.tokens.insert(r.tokens.end(), f.draft.begin(), f.draft.begin() + static_cast<std::ptrdiff_t>(ahead));
    r.spec_drafted += static_cast<int64_t>(f.draft.size());
    r.spec_accepted += static_cast<int64_t>(ahead);
    stats_.spec_drafted += static_cast<int64_t>(f.draft.size());
    stats_.spec_accepted += static_cast<int64_t>(ahead);
    if (ahead > 0 && !r.first_token_us) r.first_token_us = now_us;
    Status st = blocks_.CommitFullBlocks(f.id, r.tokens, r.n_computed);
    LL_CHECK(st.ok());
    FinishReason reason = res != nullptr ? res->finish : FinishReason::kNone;
    if (f.wants_token) {
      if (res != nullptr && res->token) {
        r.tokens.push_back(*res->token);
        if (!r.first_token_us) r.first_token_us = now_us;
        if (reason == FinishReason::kNone && r.n_generated() >= r.max_tokens) {
          reason = FinishReason::kLength;
        }
      } else if (reason == FinishReason::kNone) {
        std::string msg = "no token reported for request " + Num(f.id) + " at position " +
                          Num(f.end_pos - 1);
        finished.push_back(Finish(f.id, FinishReason::kError, std::move(msg), now_us));
        continue;
      }
    }
    if (reason != FinishReason::kNone) {
      finished.push_back(
          Finish(f.id, reason, res != nullptr ? res->error_message : std::string(), now_us));
      continue;
    }
    r.state = RunningState(r);
  }
  in_flight_.clear();
  return finished;
}

std::optional<Request> Scheduler::FinishNow(RequestId id, FinishReason reason, int64_t now_us) {
  LL_CHECK(in_flight_.empty());  // between steps only: no plan may still hold its blocks
  if (reason == FinishReason::kNone || live_.count(id) == 0) return std::nullopt;
  last_now_us_ = now_us;
  return Finish(id, reason, reason == FinishReason::kDeadline ? "deadline passed" : "", now_us);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.running = static_cast<int64_t>(running_.size());
  s.waiting_tokens = waiting_tokens_;
  return s;
}

Status Scheduler::CheckInvariants() const {
  LL_RETURN_IF_ERROR(blocks_.CheckInvariants());
  std::unordered_set<RequestId> seen;
  int64_t queued_tokens = 0;
  for (RequestId id : waiting_) {
    auto it = live_.find(id);
    if (it == live_.end() || !seen.insert(id).second) {
      return Internal("waiting queue: request " + Num(id) + " unknown or listed twice");
    }
    const Request& r = it->second;
    if (r.state != RequestState::kWaiting && r.state != RequestState::kPreempted) {
      return Internal("request " + Num(id) + " queued in state " + RequestStateName(r.state));
    }
    if (blocks_.HasSeq(id) || r.n_computed != 0) {
      return Internal("queued request " + Num(id) + " holds blocks or computed positions");
    }
    queued_tokens += r.n_tokens();
  }
  for (RequestId id : running_) {
    auto it = live_.find(id);
    if (it == live_.end() || !seen.insert(id).second) {
      return Internal("running list: request " + Num(id) + " unknown or listed twice");
    }
    const Request& r = it->second;
    if (!r.running()) {
      return Internal("request " + Num(id) + " running in state " + RequestStateName(r.state));
    }
    const int64_t held = static_cast<int64_t>(blocks_.Table(id).size());
    if (held < KvBlocksFor(r.n_computed) || r.n_computed >= r.n_tokens()) {
      return Internal("running request " + Num(id) + ": n_computed " + Num(r.n_computed) +
                      " with " + Num(held) + " blocks and " + Num(r.n_tokens()) + " tokens");
    }
  }
  if (seen.size() != live_.size()) {
    return Internal(Num(static_cast<int64_t>(live_.size())) + " live requests but " +
                    Num(static_cast<int64_t>(seen.size())) + " queued or running");
  }
  if (queued_tokens != waiting_tokens_) {
    return Internal("waiting_tokens " + Num(waiting_tokens_) + " != " + Num(queued_tokens));
  }
  return Status::Ok();
}

namespace {
// Request ids start at 1: this key is never a request's.
constexpr SeqKey kScratchKey = std::numeric_limits<SeqKey>::min();
}  // namespace

std::span<const BlockId> Scheduler::AllocateScratch(int64_t n_positions) {
  if (blocks_.HasSeq(kScratchKey) || !blocks_.Allocate(kScratchKey, n_positions)) return {};
  return blocks_.Table(kScratchKey);
}

void Scheduler::FreeScratch() { (void)blocks_.Free(kScratchKey); }

}  // namespace lifeline
