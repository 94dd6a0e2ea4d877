// Scheduler: the books of continuous batching over a paged, prefix-cached KV pool. The engine
// loop runs   plan = Schedule(now) -> evaluate plan.entries -> Update(results, now)   once per
// step; the scheduler decides who computes which positions, never computes anything itself.
//
// One step (Schedule):
//   1. Report requests cancelled since the last step; finish (kDeadline) waiting/preempted
//      requests whose deadline has passed (now >= deadline) -- they are never run.
//   2. Decodes first: one token for every DECODING request, most important first
//      (priority desc, then arrival, then id), up to max_running sequences and the
//      max_step_tokens budget. With speculation (knobs spec_tokens > 0) and no request
//      waiting, a decode may carry drafted tokens (draft.h) after its last known token, all
//      with logits, while the step's verification tokens stay within spec_step_tokens and
//      the draft is expected to pay for its verification (SetSpecCost); the
//      engine samples row by row and stops at the first sample that differs from the draft
//      (StepResult::tokens_ahead), so what is generated is exactly what one-at-a-time
//      decoding would have sampled. Rejected positions are simply not counted as computed:
//      their K/V is overwritten later, and their blocks stay in the table for that.
//   3. Chunked prefill of admitted PREFILLING requests with the remaining budget, same order,
//      so a long prompt is spread over steps and never delays anyone's next token.
//   4. Admission of waiting requests in QueuePolicy order while budget and slots remain:
//      prefix match first, then blocks for the chunk the budget allows; all or nothing.
//      Admission is strict (stops at the first request that does not fit, so a big request is
//      not starved by smaller ones behind it) and is skipped in a step that had to preempt.
//   KV exhaustion: when a running request cannot get a block for its tokens, the least
//   important running request not yet scheduled this step is preempted (blocks freed,
//   back to the queue, recomputed later from prompt + generated tokens, prefix cache
//   permitting) -- for a decode that may be the request itself. No running request ever
//   fails because another grew, and Submit rejects a request that could not fit even alone,
//   so the most important request always progresses.
//   Lowering max_running below the running count does not preempt: the least important
//   running requests sit out steps (keeping their blocks) until slots free up.
//
// Batching window (knobs max_queue_delay_us > 0), applied in step 4 only: running requests
// always decode and prefill; the window may hold back the admission of NEW requests (state
// WAITING; a preempted request is never held) so that the batch (running + admitted) reaches
// a target size. Targets are the preferred sizes above the running count and max_running
// (the max batch, which is never exceeded). Admission goes ahead, admitting all that fit,
// as soon as any of these holds:
//   - running + new waiting reaches a target (or max_running);
//   - the oldest new request has waited max_queue_delay_us (from its arrival_us);
//   - some new request's deadline would be missed by waiting: deadline - now - remaining wait
//     < its estimated prefill time (SetServiceEstimate; 0 when unknown);
//   - a preempted request is waiting.
// Otherwise the plan reports window_wait_us (the rest of the delay) so an idle engine can
// sleep until then or until a new request arrives. max_queue_delay_us = 0 changes nothing.
//
// Ownership: owns the requests, the BlockManager and the queue policy. Plans and finished
// requests are handed out by value.
// Thread-safety: none. The engine loop thread owns the scheduler; HTTP threads reach it only
// through the loop's inbox. Cancel frees blocks at once, so it must not race an evaluation
// of a plan that holds them (true by construction on the single engine thread).
// Failure: Submit returns InvalidArgument (empty prompt, max_tokens < 1), OutOfRange (can
// never fit: prompt + max_tokens over the KV pool or max_seq_tokens, prompt over
// max_waiting_tokens) or ResourceExhausted ("queue full": max_waiting requests or
// max_waiting_tokens prompt tokens already queued -- retry later). Engine failures reach a
// request through Update (FinishReason::kError) and stay that request's own. Calling
// Schedule while the previous non-empty plan awaits Update is a programming error (checked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "scheduler/block_manager.h"
#include "scheduler/block_tier.h"
#include "scheduler/draft.h"
#include "scheduler/queue_policy.h"
#include "scheduler/request.h"

namespace lifeline {

struct SchedulerConfig {
  int32_t n_blocks = 0;                 // KV pool size, blocks (>= 1)
  // Defaults for the scheduler's own tests and tools; a ModelEngine always sets these from
  // its options (serving/model_engine_options.h, whose defaults `serve`'s flags take).
  int32_t max_running = 64;             // sequences per step (>= 1)
  int64_t max_step_tokens = 512;        // tokens per step (>= 1); keep >= max_running
  int32_t max_waiting = 256;            // queued requests (>= 1)
  int64_t max_waiting_tokens = 1 << 20; // queued prompt tokens (>= 1)
  int64_t max_seq_tokens = 0;           // prompt + max_tokens cap (model context); 0 = none
  QueueOrder queue_order = QueueOrder::kFcfs;
  BlockHashFn block_hash_fn = &HashBlockTokens;  // test hook (forced collisions)
  // false: no prefix-cache hits (BlockManager::set_prefix_caching), e.g. for a model whose
  // sliding-window layers keep per-sequence K/V outside the blocks.
  bool prefix_caching = true;
  // BlockManager::SetCacheReserve: evictable prefix-cache blocks kept before allocations
  // reuse them instead of fresh blocks (bounds the KV pool's resident memory); < 0 unlimited.
  int64_t prefix_cache_reserve_blocks = -1;
};

// Most drafted tokens per decode (SchedulerKnobs::spec_tokens).
inline constexpr int32_t kMaxSpecTokens = 16;

// The knobs the SLO controller may change between steps.
struct SchedulerKnobs {
  int32_t max_running = 0;
  int64_t max_step_tokens = 0;
  // Batching window (as Triton's dynamic batcher; see "Batching window" above). 0 = off.
  int64_t max_queue_delay_us = 0;
  std::vector<int32_t> preferred_batch_sizes;  // strictly ascending, each >= 1; may be empty
  // Speculative decoding: drafted tokens per decode (0 = off) and the cap on a step's decode
  // tokens plus drafts (drafting stops adding where verification would make the step
  // compute-bound rather than read-bound). 8: the AVX-512 decode kernels stream each weight
  // once for up to 8 token rows (6 for the K-quants), so on 1.1B Q8_0 a pass of 6 tokens
  // costs 1.07x a one-token step and 8 tokens 1.46x (4 rows per pass before: 1.6-1.8x);
  // the measured cost table then picks the length (docs/performance.md).
  int32_t spec_tokens = 0;
  int64_t spec_step_tokens = 8;
};

struct NewRequest {
  std::vector<int32_t> prompt_tokens;  // >= 1 token
  int64_t max_tokens = 0;              // >= 1
  int64_t arrival_us = 0;
  std::optional<int64_t> deadline_us;  // absolute
  int32_t priority = 0;
  // false: every position is computed, none served from the prefix cache or the tier below
  // it -- an embedding pooled over all positions (mean) or the first (cls) needs each one's
  // hidden state, which a cached block does not keep. Its full blocks still enter the cache.
  bool reuse_prefix = true;
};

// One sequence's work in a step: compute positions [start_pos, end_pos) of request `id`.
struct StepEntry {
  RequestId id = 0;
  std::vector<BlockId> block_table;  // [KvBlocksFor(end_pos)] position p lives in block
                                     // block_table[p / kKvBlockTokens], slot p % kKvBlockTokens
  int64_t start_pos = 0;
  int64_t end_pos = 0;
  std::vector<int32_t> tokens;       // [end_pos - start_pos] token at each position
  std::vector<uint8_t> want_logits;  // [end_pos - start_pos] 1 only at the request's last
                                     // known token: sample the next token from it
  bool is_decode = false;            // a one-token step of a DECODING request (plus drafts)
  // Drafted tokens after the last known one (speculation): tokens = [last known] ++ draft,
  // end_pos = start_pos + 1 + draft.size(), and every position wants logits.
  std::vector<int32_t> draft;

  bool wants_token() const { return !want_logits.empty() && want_logits.back() != 0; }
};

struct StepPlan {
  int64_t step_index = 0;
  std::vector<StepEntry> entries;    // decodes first, then prefill chunks
  int64_t n_tokens = 0;              // sum of entry lengths (<= max_step_tokens)
  std::vector<Request> cancelled;    // finished by Cancel() since the last plan
  std::vector<Request> expired;      // finished with kDeadline this step
  std::vector<RequestId> preempted;  // sent back to the queue this step (still live)
  int64_t window_wait_us = 0;        // > 0: the batching window held admission; it ends
                                     // at the latest this long after `now`

  bool empty() const { return entries.empty(); }
};

// The engine's answer for one entry of the plan. Entries whose wants_token() is true need a
// token (or a finish reason); for other entries a result is optional (e.g. to report kError).
struct StepResult {
  RequestId id = 0;
  std::optional<int32_t> token;       // sampled token; appended before `finish` applies
  FinishReason finish = FinishReason::kNone;  // kStop (caller's stop rule), kError, ...
  std::string error_message;          // for kError
  // Speculation: the samples before `token` that equalled the entry's draft, in order (a
  // prefix of it); they are appended first, and their positions count as computed.
  std::vector<int32_t> tokens_ahead;
};

struct SchedulerStats {
  int64_t submitted = 0;          // accepted by Submit
  int64_t rejected_queue_full = 0;
  int64_t rejected_invalid = 0;   // bad or never-fitting requests
  int64_t completed = 0;          // kLength + kStop
  int64_t errored = 0;            // kError + kDeadline
  int64_t expired = 0;            // kDeadline (also counted in errored)
  int64_t cancelled = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;              // non-empty plans
  int64_t waiting = 0;            // now: queued (incl. preempted)
  int64_t running = 0;            // now: admitted, holding blocks
  int64_t waiting_tokens = 0;     // now: known tokens of queued requests
  int64_t window_waits = 0;       // batching-window holds begun (a held step after one not held)
  int64_t window_held_steps = 0;  // Schedule calls whose admission the window held
  int64_t spec_drafted = 0;       // drafted tokens sent for verification
  int64_t spec_accepted = 0;      // of those, sampled by the model (tokens gained)
  int64_t tier_restored_blocks = 0;   // prefix blocks copied back from the tier (block_tier.h)
  int64_t tier_restore_failures = 0;  // restores the tier refused (then computed)
};

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config);

  // Queues a request; returns its id (ids increase from 1). See the header for the errors.
  Result<RequestId> Submit(NewRequest request);
  // Finishes a live request as kCancelled at once, in any phase, freeing its blocks; it is
  // reported in the next plan's `cancelled`. Returns false for unknown/finished ids.
  bool Cancel(RequestId id);

  StepPlan Schedule(int64_t now_us);
  // Applies the engine's results for the last plan: advances n_computed, commits full blocks
  // to the prefix cache, appends tokens, finishes requests (max_tokens, caller's stop, error)
  // and frees their blocks. A wants_token() entry without a token or finish reason is
  // finished with kError. Results for unknown ids are ignored. Returns the requests that
  // finished. A call with no plan outstanding does nothing.
  std::vector<Request> Update(std::span<const StepResult> results, int64_t now_us);
  // Ends a live request now with `reason` (the engine's stop at the deadline uses kLength),
  // in any phase, freeing its blocks, and returns it finished; nullopt for unknown ids or a
  // kNone reason. Only between steps (no plan awaiting Update; checked).
  std::optional<Request> FinishNow(RequestId id, FinishReason reason, int64_t now_us);

  Status SetKnobs(const SchedulerKnobs& knobs);
  // The batching window's slack check: estimated prefill time per prompt token (measured by
  // the engine); 0 or less = unknown (then only the deadline itself is checked).
  void SetServiceEstimate(double prefill_us_per_token) {
    prefill_us_per_token_ = prefill_us_per_token > 0 ? prefill_us_per_token : 0;
  }
  SchedulerKnobs knobs() const { return knobs_; }
  // Speculation's cost model: cost_ms[n - 1] is the time of a decode-only step of n tokens
  // (measured by the engine). A draft of k tokens is sent only when it raises the step's
  // expected tokens per millisecond: (B + D + E_k) / cost(B + D + k) > (B + D) / cost(B + D),
  // with B the step's decodes, D the drafts already in it and E_k = a + a^2 + ... + a^k the
  // tokens the request is expected to gain at its acceptance rate a ((accepted + 1) /
  // (drafted + 2)); k is the best such length. Steps longer than the table are not drafted
  // into. Empty (the default): every pass up to spec_step_tokens costs the same.
  // With a drafter that costs time (Drafter::ms_per_token), a k-token draft adds k times that
  // to the step's cost above.
  void SetSpecCost(std::vector<double> cost_ms) { spec_cost_ms_ = std::move(cost_ms); }
  // Where drafts come from (draft.h); the default is prompt lookup. Not null.
  void SetDrafter(std::unique_ptr<Drafter> drafter);
  Drafter& drafter() { return *drafter_; }
  // A decode-only step of `n_tokens` took `ms`: that entry of the table follows it (an EWMA,
  // slow enough to ride out one noisy step, fast enough to follow the machine's load).
  // Ignored without a table or beyond its length.
  void ObserveSpecCost(int64_t n_tokens, double ms);
  void SetQueuePolicy(std::unique_ptr<QueuePolicy> policy);
  // A prefix-cache tier below the pool (borrowed; nullptr: none). Cached blocks the pool
  // evicts are offered to it, and at admission a prompt's prefix continues from it past the
  // blocks the pool still holds: those blocks are restored, not computed (they count as
  // cached tokens, and as restored tokens).
  void SetBlockTier(BlockTier* tier);
  const QueuePolicy& queue_policy() const { return *policy_; }

  // KV blocks for a measurement outside any request (the engine's idle speed refresh): a
  // table covering n_positions under a key no request uses, or empty when the pool cannot
  // spare them now. Only between steps; FreeScratch returns them before the next Schedule.
  std::span<const BlockId> AllocateScratch(int64_t n_positions);
  void FreeScratch();

  const Request* Find(RequestId id) const;  // live requests only
  const BlockManager& block_manager() const { return blocks_; }
  // The prefix cache's blocks mirrored for other threads (block_manager.h, set_mirror).
  void set_prefix_mirror(PrefixMirror* mirror) { blocks_.set_mirror(mirror); }
  SchedulerStats stats() const;
  // Block manager invariants plus: running requests hold blocks covering n_computed, queued
  // ones hold none, every live request is in exactly one of the queue / running list.
  Status CheckInvariants() const;

 private:
  explicit Scheduler(const SchedulerConfig& config);

  // Importance for preemption and the decode/prefill passes: priority desc, arrival, id.
  bool MoreImportant(const Request& a, const Request& b) const;
  void ExpireWaiting(int64_t now_us, StepPlan* plan);
  void ScheduleDecodes(StepPlan* plan);
  void SchedulePrefills(StepPlan* plan);
  void AdmitWaiting(int64_t now_us, StepPlan* plan);
  // The batching window: 0 = admit now, else how long admission may still wait.
  int64_t WindowWaitUs(int64_t now_us) const;
  // Least important running request not scheduled this step, optionally only those less
  // important than `than`; nullptr when none.
  Request* PickVictim(const Request* than);
  void Preempt(Request& req, StepPlan* plan);
  void AddEntry(Request& req, int64_t n_positions, bool is_decode, StepPlan* plan,
                std::vector<int32_t> draft = {});
  // The draft for a DECODING request this step (empty: none), its blocks allocated.
  std::vector<int32_t> DraftFor(Request& req, int64_t* spec_budget, int64_t step_tokens);
  // The draft length that most raises tokens per ms of a step now holding `step_tokens`
  // decode tokens (see SetSpecCost); 0 when none does.
  int64_t BestDraftLength(double acceptance, int64_t max_k, int64_t step_tokens) const;
  // Removes the request from the books, frees its blocks, and returns it finished.
  Request Finish(RequestId id, FinishReason reason, std::string message, int64_t now_us);
  void EraseFrom(std::vector<RequestId>& list, RequestId id);

  SchedulerConfig config_;
  SchedulerKnobs knobs_;
  std::unique_ptr<QueuePolicy> policy_;
  BlockManager blocks_;
  std::unordered_map<RequestId, Request> live_;
  std::vector<RequestId> waiting_;  // queued + preempted, sorted by policy at each step
  std::vector<RequestId> running_;  // admitted (prefilling or decoding), hold blocks
  std::vector<Request> pending_cancelled_;
  int64_t waiting_tokens_ = 0;
  RequestId next_id_ = 1;
  int64_t step_index_ = 0;
  int64_t last_now_us_ = 0;  // the latest clock reading seen (timestamps Cancel)

  // The plan being built / awaiting Update.
  struct InFlight {
    RequestId id;
    int64_t end_pos;
    bool wants_token;
    std::vector<int32_t> draft;  // the entry's drafted tokens (empty without speculation)
  };
  std::vector<InFlight> in_flight_;
  std::unordered_map<RequestId, int64_t> scheduled_this_step_;  // id -> entry index
  int64_t budget_tokens_ = 0;   // left in the step being built
  int32_t slots_ = 0;           // sequences left in the step being built
  bool preempted_this_step_ = false;
  double prefill_us_per_token_ = 0;
  std::vector<double> spec_cost_ms_;  // SetSpecCost
  std::unique_ptr<Drafter> drafter_;  // SetDrafter; prompt lookup by default
  BlockTier* tier_ = nullptr;         // SetBlockTier
  // Consecutive blocks after the pool's `pool_blocks` that the tier holds for `tokens`.
  int64_t TierRun(std::span<const int32_t> tokens, int64_t pool_blocks,
                  std::vector<uint64_t>* hashes) const;
  bool window_held_last_step_ = false;

  SchedulerStats stats_;
};

}  // namespace lifeline
