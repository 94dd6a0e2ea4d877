// Scheduler: continuous batching, chunked prefill, preemption, cancellation, queue policies,
// deadlines, queue bounds and prefix reuse, driven by a fake clock and a fake model
// (sched_harness.h) whose KV check verifies every plan against each request's true history.
// Expected counts and positions are derived by hand in the comments.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "sched_harness.h"

namespace lifeline {
namespace {

using testing::FakeToken;
using testing::Config;
using testing::Harness;

std::vector<int32_t> Prompt(int32_t n, int32_t first = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

const StepEntry* EntryOf(const StepPlan& plan, RequestId id) {
  for (const StepEntry& e : plan.entries) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

bool PoolIsFull(const Scheduler& s) {
  const BlockManagerStats b = s.block_manager().stats();
  return b.blocks_used == 0 && b.blocks_free + b.blocks_evictable == b.blocks_total;
}

TEST(SchedulerTest, CreateRejectsBadConfig) {
  EXPECT_FALSE(Scheduler::Create(Config(0, 4, 64)).ok());
  EXPECT_FALSE(Scheduler::Create(Config(8, 0, 64)).ok());
  auto bad = Scheduler::Create(Config(8, 4, 0));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max_step_tokens"), std::string::npos);
}

TEST(SchedulerTest, NewRequestsJoinRunningOnes) {
  Harness h(Config(64, 8, 64));
  const RequestId a = h.Submit(Prompt(10), 20);
  StepPlan p = h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 0);
  EXPECT_EQ(p.entries[0].end_pos, 10);
  EXPECT_TRUE(p.entries[0].wants_token());
  EXPECT_EQ(h.sched().Find(a)->state, RequestState::kDecoding);
  h.Step();
  h.Step();
  // A has 3 generated tokens; its next step computes position 10 + 2 = 12.
  const RequestId b = h.Submit(Prompt(5, 900), 10);
  p = h.Step();
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].id, a);
  EXPECT_TRUE(p.entries[0].is_decode);
  EXPECT_EQ(p.entries[0].start_pos, 12);
  EXPECT_EQ(p.entries[1].id, b);
  EXPECT_EQ(p.entries[1].end_pos, 5);
  p = h.Step();
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_TRUE(p.entries[0].is_decode && p.entries[1].is_decode);
  h.RunUntilIdle(100);
  ASSERT_EQ(h.finished().size(), 2u);
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.finished()[a].n_generated(), 20);
  EXPECT_EQ(h.finished()[b].n_generated(), 10);
  EXPECT_EQ(h.finished()[b].batches[0].step_seqs, 2);  // it ran alongside A from the start
  EXPECT_TRUE(PoolIsFull(h.sched()));
}

TEST(SchedulerTest, LongPromptIsChunkedAndNeverStallsARunningDecode) {
  Harness h(Config(128, 4, 64));  // 2048-token pool, 64 tokens per step
  const RequestId a = h.Submit(Prompt(8), 200);
  h.Step();
  const RequestId b = h.Submit(Prompt(1000, 5000), 10);
  while (h.sched().Find(b) != nullptr) {
    const StepPlan p = h.Step();
    ASSERT_FALSE(p.entries.empty());
    // A decodes in every step, first; B gets the rest of the budget (64 - 1 = 63).
    EXPECT_EQ(p.entries[0].id, a);
    EXPECT_TRUE(p.entries[0].is_decode);
    if (const StepEntry* e = EntryOf(p, b)) {
      EXPECT_LE(e->end_pos - e->start_pos, 63);
    }
  }
  const Request& rb = h.finished()[b];
  // ceil(1000 / 63) = 16 prefill chunks (the last one yields token 1), then 9 decodes.
  EXPECT_EQ(rb.batches.size(), 16u + 9u);
  int64_t prefilled = 0;
  for (size_t i = 0; i < 16; ++i) prefilled += rb.batches[i].own_tokens;
  EXPECT_EQ(prefilled, 1000);
  // A got a token in every step from its first to now: consecutive step indices.
  const Request* ra = h.sched().Find(a);
  ASSERT_NE(ra, nullptr);
  for (size_t i = 1; i < ra->batches.size(); ++i) {
    EXPECT_EQ(ra->batches[i].step_index, ra->batches[i - 1].step_index + 1);
  }
  h.RunUntilIdle(500);
  EXPECT_EQ(h.finished()[a].n_generated(), 200);
}

TEST(SchedulerTest, PreemptsLatestArrivalWhenBlocksRunOutThenCompletesAll) {
  // 8 blocks = 128 positions. Each request needs 20 + 60 = 80 (5 blocks); 4 of them need 20.
  Harness h(Config(8, 4, 64));
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(h.Submit(Prompt(20, 1000 * (i + 1)), 60));
    h.Advance(1);
  }
  RequestId first_victim = -1;
  for (int i = 0; i < 2000 && h.finished().size() < 4; ++i) {
    const StepPlan p = h.Step();
    if (first_victim < 0 && !p.preempted.empty()) first_victim = p.preempted[0];
  }
  EXPECT_EQ(first_victim, ids[3]);  // the latest arrival gives way first
  ASSERT_EQ(h.finished().size(), 4u);
  int64_t preempted_requests = 0;
  for (RequestId id : ids) {
    const Request& r = h.finished()[id];
    EXPECT_EQ(r.finish_reason, FinishReason::kLength) << id;
    EXPECT_EQ(r.n_generated(), 60);
    for (int64_t g = 0; g < 60; ++g) {
      EXPECT_EQ(r.generated()[static_cast<size_t>(g)], FakeToken(id, g));
    }
    preempted_requests += r.n_preemptions > 0;
  }
  EXPECT_GT(preempted_requests, 0);
  EXPECT_GT(h.sched().stats().preemptions, 0);
  EXPECT_EQ(h.sched().stats().completed, 4);
  EXPECT_TRUE(PoolIsFull(h.sched()));
}

TEST(SchedulerTest, HigherPriorityIsNeverPreempted) {
  Harness h(Config(8, 4, 64));
  const RequestId l1 = h.Submit(Prompt(20, 1000), 60, /*priority=*/0);
  h.Advance(1);
  const RequestId l2 = h.Submit(Prompt(20, 2000), 60, 0);
  h.Advance(1);
  const RequestId hi = h.Submit(Prompt(20, 3000), 60, /*priority=*/5);
  h.RunUntilIdle(2000);
  ASSERT_EQ(h.finished().size(), 3u);
  EXPECT_EQ(h.finished()[hi].n_preemptions, 0);
  EXPECT_GT(h.finished()[l1].n_preemptions + h.finished()[l2].n_preemptions, 0);
  EXPECT_LE(*h.finished()[hi].finished_us, *h.finished()[l2].finished_us);
}

TEST(SchedulerTest, ShortRequestIsNotFailedWhenALongOneGrows) {
  Harness h(Config(16, 4, 64));  // 256 positions
  const RequestId longr = h.Submit(Prompt(40, 1), 200);
  for (int i = 0; i < 150; ++i) h.Step();  // long request holds ~190 positions
  const RequestId shortr = h.Submit(Prompt(5, 7000), 5);
  h.RunUntilIdle(1000);
  EXPECT_EQ(h.finished()[longr].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.finished()[shortr].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.sched().stats().errored, 0);
}

TEST(SchedulerTest, CancelWhileWaitingNeverRuns) {
  Harness h(Config(16, 1, 64));
  const RequestId a = h.Submit(Prompt(4), 50);
  h.Step();
  const RequestId b = h.Submit(Prompt(4, 500), 50);
  h.Step();
  EXPECT_EQ(h.sched().Find(b)->state, RequestState::kWaiting);  // max_running 1
  EXPECT_TRUE(h.sched().Cancel(b));
  EXPECT_FALSE(h.sched().Cancel(b));
  EXPECT_EQ(h.sched().Find(b), nullptr);
  const StepPlan p = h.Step();
  ASSERT_EQ(p.cancelled.size(), 1u);
  EXPECT_EQ(p.cancelled[0].id, b);
  EXPECT_EQ(p.cancelled[0].finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(p.cancelled[0].batches.empty());
  EXPECT_EQ(h.sched().stats().waiting_tokens, 0);
  EXPECT_TRUE(h.sched().Cancel(a));
  h.Step();
  EXPECT_TRUE(PoolIsFull(h.sched()));
  EXPECT_EQ(h.sched().stats().cancelled, 2);
}

TEST(SchedulerTest, CancelWhilePrefillingFreesBlocksAtOnce) {
  Harness h(Config(32, 4, 16));
  const RequestId c = h.Submit(Prompt(200), 10);
  h.Step();
  h.Step();
  EXPECT_EQ(h.sched().Find(c)->state, RequestState::kPrefilling);
  EXPECT_EQ(h.sched().Find(c)->n_computed, 32);
  EXPECT_EQ(h.sched().block_manager().stats().blocks_used, 2);
  EXPECT_TRUE(h.sched().Cancel(c));
  EXPECT_TRUE(PoolIsFull(h.sched()));  // immediately, not at the next step
  const StepPlan p = h.Step();
  ASSERT_EQ(p.cancelled.size(), 1u);
  EXPECT_EQ(p.cancelled[0].n_computed, 32);
  EXPECT_TRUE(p.entries.empty());
}

TEST(SchedulerTest, CancelWhileDecodingFreesBlocksWithinOneStep) {
  Harness h(Config(32, 4, 64));
  const RequestId a = h.Submit(Prompt(30), 100);
  const RequestId b = h.Submit(Prompt(30, 900), 100);
  for (int i = 0; i < 5; ++i) h.Step();
  EXPECT_EQ(h.sched().Find(a)->state, RequestState::kDecoding);
  EXPECT_TRUE(h.sched().Cancel(a));
  StepPlan p = h.Step();
  ASSERT_EQ(p.cancelled.size(), 1u);
  EXPECT_EQ(p.cancelled[0].n_generated(), 5);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].id, b);
  EXPECT_TRUE(h.sched().Cancel(b));
  h.Step();
  EXPECT_TRUE(PoolIsFull(h.sched()));
}

TEST(SchedulerTest, CancelWhilePreempted) {
  Harness h(Config(8, 4, 64));
  for (int i = 0; i < 4; ++i) {
    h.Submit(Prompt(20, 1000 * (i + 1)), 60);
    h.Advance(1);
  }
  RequestId victim = -1;
  for (int i = 0; i < 200 && victim < 0; ++i) {
    const StepPlan p = h.Step();
    if (!p.preempted.empty()) victim = p.preempted[0];
  }
  ASSERT_GE(victim, 0);
  ASSERT_EQ(h.sched().Find(victim)->state, RequestState::kPreempted);
  EXPECT_TRUE(h.sched().Cancel(victim));
  const StepPlan p = h.Step();
  ASSERT_EQ(p.cancelled.size(), 1u);
  EXPECT_EQ(p.cancelled[0].id, victim);
  h.RunUntilIdle(2000);
  EXPECT_EQ(h.sched().stats().completed, 3);
  EXPECT_EQ(h.sched().stats().cancelled, 1);
  EXPECT_TRUE(PoolIsFull(h.sched()));
}

TEST(SchedulerTest, CancelBetweenScheduleAndUpdateIgnoresItsResult) {
  auto s = Scheduler::Create(Config(16, 4, 64));
  ASSERT_TRUE(s.ok());
  Scheduler& sched = **s;
  NewRequest nr;
  nr.prompt_tokens = Prompt(10);
  nr.max_tokens = 5;
  const RequestId id = *sched.Submit(nr);
  const StepPlan p = sched.Schedule(0);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_TRUE(sched.Cancel(id));
  const std::vector<StepResult> results = {{id, 42, FinishReason::kNone, ""}};
  EXPECT_TRUE(sched.Update(results, 1).empty());
  const StepPlan next = sched.Schedule(2);
  ASSERT_EQ(next.cancelled.size(), 1u);
  EXPECT_EQ(next.cancelled[0].n_generated(), 0);
  EXPECT_TRUE(PoolIsFull(sched));
  EXPECT_TRUE(sched.CheckInvariants().ok());
}

std::vector<RequestId> AdmissionOrder(Harness& h) {
  h.RunUntilIdle(1000);
  std::vector<std::pair<int64_t, RequestId>> order;
  for (auto& [id, r] : h.finished()) order.push_back({*r.first_scheduled_us, id});
  std::sort(order.begin(), order.end());
  std::vector<RequestId> ids;
  for (auto& o : order) ids.push_back(o.second);
  return ids;
}

TEST(SchedulerTest, EdfWithinPriorityOrdersAdmissions) {
  for (QueueOrder order : {QueueOrder::kFcfs, QueueOrder::kEdfWithinPriority}) {
    SchedulerConfig c = Config(32, 1, 64);  // one at a time: admission order is visible
    c.queue_order = order;
    Harness h(c);
    const RequestId r1 = h.Submit(Prompt(3), 2, 0, 1'000'000'000);
    h.Advance(1);
    const RequestId r2 = h.Submit(Prompt(3), 2, 0, 500'000'000);
    h.Advance(1);
    const RequestId r3 = h.Submit(Prompt(3), 2, 1, std::nullopt);
    h.Advance(1);
    const RequestId r4 = h.Submit(Prompt(3), 2, 0, std::nullopt);
    h.Advance(1);
    const RequestId r5 = h.Submit(Prompt(3), 2, 1, 900'000'000);
    const std::vector<RequestId> got = AdmissionOrder(h);
    if (order == QueueOrder::kFcfs) {
      EXPECT_EQ(got, (std::vector<RequestId>{r1, r2, r3, r4, r5}));
    } else {
      // Priority 1 first (deadline before none), then priority 0 by deadline, none last.
      EXPECT_EQ(got, (std::vector<RequestId>{r5, r3, r2, r1, r4}));
    }
  }
}

TEST(SchedulerTest, QueuePolicyCanBeSwappedBetweenSteps) {
  Harness h(Config(32, 1, 64));
  const RequestId r1 = h.Submit(Prompt(3), 2, 0, 9'000'000);
  const RequestId r2 = h.Submit(Prompt(3), 2, 0, 1'000'000);
  EXPECT_STREQ(h.sched().queue_policy().name(), "fcfs");
  h.sched().SetQueuePolicy(MakeQueuePolicy(QueueOrder::kEdfWithinPriority));
  EXPECT_EQ(AdmissionOrder(h), (std::vector<RequestId>{r2, r1}));
}

TEST(SchedulerTest, ExpiredDeadlineWhileWaitingIsAnErrorAndNeverRuns) {
  Harness h(Config(32, 1, 64), /*step_us=*/1000);
  const RequestId a = h.Submit(Prompt(4), 30);
  const RequestId b = h.Submit(Prompt(4, 50), 5, 0, /*deadline_us=*/5000);
  const RequestId c = h.Submit(Prompt(4, 90), 5, 0, /*deadline_us=*/1'000'000'000);
  RequestId expired = -1;
  int64_t expired_at = -1;
  while (h.finished().size() < 3) {
    const int64_t now = h.now_us();
    const StepPlan p = h.Step();
    if (!p.expired.empty()) {
      expired = p.expired[0].id;
      expired_at = now;
    }
  }
  EXPECT_EQ(expired, b);
  EXPECT_EQ(expired_at, 5000);  // the first Schedule with now >= deadline
  const Request& rb = h.finished()[b];
  EXPECT_EQ(rb.finish_reason, FinishReason::kDeadline);
  EXPECT_EQ(KindOf(rb.finish_reason), FinishKind::kError);
  EXPECT_NE(rb.error_message.find("deadline"), std::string::npos);
  EXPECT_TRUE(rb.batches.empty());
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.finished()[c].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.sched().stats().expired, 1);
  EXPECT_EQ(h.sched().stats().errored, 1);
}

TEST(SchedulerTest, SubmitRejectsWhatCanNeverFitAndWhenTheQueueIsFull) {
  SchedulerConfig c = Config(4, 1, 64);  // 64-token pool
  c.max_waiting = 3;
  c.max_waiting_tokens = 100;
  c.max_seq_tokens = 60;
  Harness h(c);
  EXPECT_EQ(h.TrySubmit({}, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.TrySubmit(Prompt(3), 0).status().code(), StatusCode::kInvalidArgument);
  auto too_big = h.TrySubmit(Prompt(50), 15);  // 65 > 64
  EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_big.status().message().find("capacity of 64"), std::string::npos);
  EXPECT_EQ(h.TrySubmit(Prompt(50), 14).status().code(), StatusCode::kOutOfRange);  // > 60
  EXPECT_EQ(h.TrySubmit(Prompt(3), INT64_MAX).status().code(), StatusCode::kOutOfRange);

  ASSERT_TRUE(h.TrySubmit(Prompt(40), 10).ok());
  ASSERT_TRUE(h.TrySubmit(Prompt(40), 10).ok());
  auto tokens_full = h.TrySubmit(Prompt(30), 10);  // 80 + 30 > 100 queued tokens
  EXPECT_EQ(tokens_full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(tokens_full.status().message().find("queue full"), std::string::npos);
  ASSERT_TRUE(h.TrySubmit(Prompt(10), 10).ok());
  auto count_full = h.TrySubmit(Prompt(1), 1);  // 3 requests already queued
  EXPECT_EQ(count_full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(count_full.status().message().find("max_waiting 3"), std::string::npos);
  EXPECT_EQ(h.sched().stats().rejected_queue_full, 2);
  EXPECT_EQ(h.sched().stats().rejected_invalid, 5);

  h.Step();  // admits one, which makes room
  EXPECT_TRUE(h.TrySubmit(Prompt(1), 1).ok());
  h.RunUntilIdle(1000);
  EXPECT_EQ(h.sched().stats().completed, 4);  // every accepted request completes
}

TEST(SchedulerTest, SecondRequestSharingALongPrefixReportsCachedTokens) {
  Harness h(Config(64, 4, 256));
  const std::vector<int32_t> a = Prompt(100);
  const RequestId ra = h.Submit(a, 5);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[ra].n_cached_tokens, 0);
  // Same first 80 tokens (5 blocks), then a different tail of 10.
  std::vector<int32_t> b(a.begin(), a.begin() + 80);
  for (int i = 0; i < 10; ++i) b.push_back(-1 - i);
  const RequestId rb = h.Submit(b, 5);
  const StepPlan p = h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 80);
  EXPECT_EQ(p.entries[0].end_pos, 90);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[rb].n_cached_tokens, 80);
  const BlockManagerStats s = h.sched().block_manager().stats();
  EXPECT_EQ(s.prefix_hit_tokens, 80);
  EXPECT_EQ(s.prefix_lookup_tokens, 100 + 90);
}

// A model whose sliding-window layers keep per-sequence K/V beside the blocks: the same
// shared prefix is computed again from position 0.
TEST(SchedulerTest, WithoutPrefixCachingASharedPrefixIsRecomputed) {
  SchedulerConfig cfg = Config(64, 4, 256);
  cfg.prefix_caching = false;
  Harness h(cfg);
  const std::vector<int32_t> a = Prompt(100);
  const RequestId ra = h.Submit(a, 5);
  h.RunUntilIdle(100);
  std::vector<int32_t> b(a.begin(), a.begin() + 80);
  for (int i = 0; i < 10; ++i) b.push_back(-1 - i);
  const RequestId rb = h.Submit(b, 5);
  const StepPlan p = h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 0);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[ra].n_cached_tokens, 0);
  EXPECT_EQ(h.finished()[rb].n_cached_tokens, 0);
  EXPECT_EQ(h.sched().block_manager().stats().prefix_hit_tokens, 0);
}

// An embedding pooled over every position: the request computes its whole prompt although
// the cache holds it, and its blocks are not registered twice.
TEST(SchedulerTest, ARequestThatMustNotReuseThePrefixComputesEveryPosition) {
  Harness h(Config(64, 4, 256));
  const std::vector<int32_t> a = Prompt(100);
  h.Submit(a, 5);
  h.RunUntilIdle(100);
  h.set_reuse_prefix(false);
  const RequestId rb = h.Submit(a, 1);
  const StepPlan p = h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 0);
  EXPECT_EQ(p.entries[0].end_pos, 100);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[rb].n_cached_tokens, 0);
  EXPECT_EQ(h.sched().block_manager().stats().prefix_hit_tokens, 0);
  // The cache still serves a later request that may reuse it.
  h.set_reuse_prefix(true);
  const RequestId rc = h.Submit(a, 1);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[rc].n_cached_tokens, 96);
}

TEST(SchedulerTest, ConcurrentIdenticalPromptsShareBlocksButComputeTheLastToken) {
  Harness h(Config(64, 4, 256));
  const RequestId d = h.Submit(Prompt(64), 40);
  h.Step();
  h.Step();
  const RequestId c = h.Submit(Prompt(64), 40);
  const StepPlan p = h.Step();
  const StepEntry* e = EntryOf(p, c);
  ASSERT_NE(e, nullptr);
  // 64 tokens = 4 full blocks, capped at floor(63 / 16) = 3: positions 48..63 recomputed.
  EXPECT_EQ(e->start_pos, 48);
  EXPECT_EQ(e->end_pos, 64);
  const auto td = h.sched().block_manager().Table(d);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(e->block_table[static_cast<size_t>(i)], td[static_cast<size_t>(i)]);
    EXPECT_EQ(h.sched().block_manager().RefCount(td[static_cast<size_t>(i)]), 2);
  }
  EXPECT_NE(e->block_table[3], td[3]);
  h.RunUntilIdle(200);
  EXPECT_EQ(h.finished()[c].n_cached_tokens, 48);
  EXPECT_EQ(h.finished()[c].finish_reason, FinishReason::kLength);
}

TEST(SchedulerTest, LoweringMaxRunningPausesWithoutPreempting) {
  Harness h(Config(64, 4, 64));
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(h.Submit(Prompt(8, 100 * i), 30));
    h.Advance(1);
  }
  h.Step();
  h.Step();
  EXPECT_FALSE(h.sched().SetKnobs({0, 64}).ok());
  EXPECT_FALSE(h.sched().SetKnobs({2, 0}).ok());
  ASSERT_TRUE(h.sched().SetKnobs({2, 64}).ok());
  for (int i = 0; i < 5; ++i) {
    const StepPlan p = h.Step();
    ASSERT_EQ(p.entries.size(), 2u);
    EXPECT_EQ(p.entries[0].id, ids[0]);  // the two earliest arrivals keep running
    EXPECT_EQ(p.entries[1].id, ids[1]);
    EXPECT_TRUE(p.preempted.empty());
  }
  ASSERT_TRUE(h.sched().SetKnobs({4, 64}).ok());
  EXPECT_EQ(h.Step().entries.size(), 4u);
  h.RunUntilIdle(200);
  EXPECT_EQ(h.sched().stats().completed, 4);
  EXPECT_EQ(h.sched().stats().preemptions, 0);
}

TEST(SchedulerTest, EngineFaultFailsOnlyThatRequest) {
  Harness h(Config(64, 4, 64));
  const RequestId a = h.Submit(Prompt(8, 10), 20);
  const RequestId b = h.Submit(Prompt(8, 20), 20);
  const RequestId c = h.Submit(Prompt(8, 30), 20);
  h.Step();
  h.Step();
  h.FailNext(b);
  h.RunUntilIdle(200);
  EXPECT_EQ(h.finished()[b].finish_reason, FinishReason::kError);
  EXPECT_EQ(h.finished()[b].error_message, "injected fault");
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.finished()[c].finish_reason, FinishReason::kLength);
  EXPECT_TRUE(PoolIsFull(h.sched()));
}

TEST(SchedulerTest, CallerStopRuleAndMissingTokens) {
  Harness h(Config(64, 4, 64));
  const RequestId a = h.Submit(Prompt(8), 20);
  h.set_stop_rule([a](RequestId id, int32_t, int64_t n) { return id == a && n == 3; });
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[a].finish_reason, FinishReason::kStop);
  EXPECT_EQ(h.finished()[a].n_generated(), 3);

  // An engine that reports nothing for a sequence that needed a token fails that one only.
  auto s = Scheduler::Create(Config(16, 4, 64));
  ASSERT_TRUE(s.ok());
  NewRequest nr;
  nr.prompt_tokens = Prompt(4);
  nr.max_tokens = 3;
  const RequestId x = *(*s)->Submit(nr);
  const RequestId y = *(*s)->Submit(nr);
  ASSERT_EQ((*s)->Schedule(0).entries.size(), 2u);
  const std::vector<StepResult> only_y = {{y, 7, FinishReason::kNone, ""}};
  const std::vector<Request> done = (*s)->Update(only_y, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, x);
  EXPECT_EQ(done[0].finish_reason, FinishReason::kError);
  EXPECT_NE(done[0].error_message.find("no token"), std::string::npos);
  EXPECT_EQ((*s)->Find(y)->n_generated(), 1);
}

// Random load: arrivals from shared stems, cancels at random phases, stop rules, knob and
// policy changes, deadlines, a pool far smaller than the offered load. Every accepted request
// must end exactly once and the pool must come back full.
TEST(SchedulerTest, RandomLoadEveryRequestEndsExactlyOnce) {
  SchedulerConfig c = Config(40, 6, 48);  // 640-token pool
  c.max_waiting = 24;
  c.max_waiting_tokens = 4000;
  Harness h(c, 1000);
  std::mt19937 rng(2024);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  h.set_stop_rule([](RequestId id, int32_t token, int64_t) { return (token + id) % 23 == 0; });
  int64_t rejected = 0;
  for (int step = 0; step < 3000; ++step) {
    if (pick(0, 2) == 0) {
      std::vector<int32_t> prompt;
      const int stem = pick(0, 3);
      for (int i = 0, n = pick(0, 120); i < n; ++i) prompt.push_back(stem * 1000 + i);
      for (int i = 0, n = pick(1, 60); i < n; ++i) prompt.push_back(pick(0, 9));
      std::optional<int64_t> deadline;
      if (pick(0, 4) == 0) deadline = h.now_us() + pick(1, 40) * 1000;
      rejected += !h.TrySubmit(prompt, pick(1, 80), pick(0, 2), deadline).ok();
    }
    if (pick(0, 9) == 0 && h.n_submitted() > 0) {
      h.sched().Cancel(pick(1, static_cast<int>(h.n_submitted())));
    }
    if (pick(0, 49) == 0) {
      ASSERT_TRUE(h.sched().SetKnobs({pick(1, 8), pick(8, 64)}).ok());
    }
    if (pick(0, 99) == 0) {
      h.sched().SetQueuePolicy(MakeQueuePolicy(
          pick(0, 1) == 0 ? QueueOrder::kFcfs : QueueOrder::kEdfWithinPriority));
    }
    h.Step();
    if (::testing::Test::HasFailure()) return;
  }
  ASSERT_TRUE(h.sched().SetKnobs({6, 48}).ok());
  h.RunUntilIdle(20000);
  const SchedulerStats s = h.sched().stats();
  EXPECT_EQ(static_cast<int64_t>(h.finished().size()), h.n_submitted());
  EXPECT_EQ(s.completed + s.errored + s.cancelled, s.submitted);
  EXPECT_EQ(h.finished_count(FinishKind::kCompleted), s.completed);
  EXPECT_EQ(h.finished_count(FinishKind::kCancelled), s.cancelled);
  EXPECT_EQ(s.errored, s.expired);  // the fake engine never fails here
  EXPECT_EQ(s.rejected_queue_full + s.rejected_invalid, rejected);
  EXPECT_TRUE(PoolIsFull(h.sched()));
  // The load did exercise the interesting paths.
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.cancelled, 0);
  EXPECT_GT(s.expired, 0);
  EXPECT_GT(h.sched().block_manager().stats().prefix_hit_tokens, 0);
  EXPECT_GT(h.sched().block_manager().stats().evictions, 0);
}

}  // namespace
}  // namespace lifeline
