// Test harness for the scheduler: a fake clock, a fake "model" that returns a known token per
// sequence, and a fake KV memory that checks every plan against the request's true token
// history (kept here, independently of the scheduler's books).
//
// FakeKv stores, per slot, the (token, position) written there and, per block, a fingerprint
// of the whole prefix the block was computed under. Before an entry computes [start, end) it
// verifies that positions [0, start) are readable through the entry's block table and hold
// exactly this request's tokens after exactly this request's prefix, and that no block it
// writes is shared. A wrong prefix share, a block reused while held, or a stale table fails.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"

namespace lifeline::testing {

// The fake model's token for request `id` after it generated `n_generated` tokens.
int32_t FakeToken(RequestId id, int64_t n_generated);

// A scheduler config with these three set, the rest at their defaults.
SchedulerConfig Config(int32_t n_blocks, int32_t max_running, int64_t max_step_tokens);

class FakeKv {
 public:
  explicit FakeKv(int32_t n_blocks);
  // Checks and applies one entry; `expected` holds the request's known tokens (>= end_pos,
  // or >= start_pos + 1 for an entry with a draft, whose drafted positions are written with
  // the draft's tokens: if a rejected draft's K/V were ever read as valid, a later Apply
  // finds the wrong token there). Returns "" when consistent, else the first violation.
  std::string Apply(const StepEntry& e, std::span<const int32_t> expected,
                    const BlockManager& bm);

  struct Slot {
    int32_t token = -1;
    int64_t pos = -1;
  };
  // One block's contents, as a tier below the pool copies them out and back in.
  struct BlockImage {
    std::vector<Slot> slots;
    uint64_t prefix_fp = 0;
  };
  BlockImage Save(BlockId block) const;
  void Load(BlockId block, const BlockImage& image);

 private:
  std::vector<Slot> slots_;          // [n_blocks * kKvBlockTokens]
  std::vector<uint64_t> prefix_fp_;  // [n_blocks] fingerprint of the tokens before the block
};

// Decides, per produced token, whether the caller's stop rule ends the request.
using StopRule = std::function<bool(RequestId id, int32_t token, int64_t n_generated)>;
// The fake model's token for request `id` after `n_generated` tokens (default FakeToken).
using TokenFn = std::function<int32_t(RequestId id, int64_t n_generated)>;

class Harness {
 public:
  explicit Harness(const SchedulerConfig& config, int64_t step_us = 1000);

  Scheduler& sched() { return *sched_; }
  FakeKv& kv() { return kv_; }
  int64_t now_us() const { return now_us_; }
  void Advance(int64_t us) { now_us_ += us; }

  // Submits and records the prompt; fails the test on rejection.
  RequestId Submit(std::vector<int32_t> prompt, int64_t max_tokens, int32_t priority = 0,
                   std::optional<int64_t> deadline_us = std::nullopt);
  Result<RequestId> TrySubmit(std::vector<int32_t> prompt, int64_t max_tokens,
                              int32_t priority = 0,
                              std::optional<int64_t> deadline_us = std::nullopt);

  // One Schedule -> fake evaluation -> Update round; checks the plan's shape and the KV.
  StepPlan Step();
  // Steps until nothing is live or max_steps pass; returns the number of steps.
  int64_t RunUntilIdle(int64_t max_steps);

  void set_stop_rule(StopRule rule) { stop_rule_ = std::move(rule); }
  // NewRequest::reuse_prefix of the requests submitted from now on.
  void set_reuse_prefix(bool on) { reuse_prefix_ = on; }
  void set_token_fn(TokenFn fn) { token_fn_ = std::move(fn); }
  // Requests for which the fake engine reports an error in their next step.
  void FailNext(RequestId id) { fail_next_.push_back(id); }
  std::map<RequestId, Request>& finished() { return finished_; }
  int64_t n_submitted() const { return n_submitted_; }
  const std::vector<int32_t>& expected(RequestId id) { return expected_[id]; }
  // Plans seen so far (entries without tables and tokens), for ordering checks.
  const std::vector<StepPlan>& plans() const { return plans_; }
  int64_t finished_count(FinishKind kind) const;

 private:
  void Record(Request r);

  SchedulerConfig config_;
  std::unique_ptr<Scheduler> sched_;
  FakeKv kv_;
  int64_t now_us_ = 0;
  int64_t step_us_;
  int64_t n_submitted_ = 0;
  std::map<RequestId, std::vector<int32_t>> expected_;  // prompt ++ tokens produced
  std::map<RequestId, Request> finished_;
  std::vector<RequestId> fail_next_;
  std::vector<StepPlan> plans_;
  std::set<RequestId> admitted_;  // ran since their last admission (not preempted since)
  StopRule stop_rule_;
  bool reuse_prefix_ = true;
  TokenFn token_fn_ = FakeToken;
};

}  // namespace lifeline::testing
