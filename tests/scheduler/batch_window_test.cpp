// The scheduler's batching window (as Triton's dynamic batcher) and FinishNow, on the fake
// clock of sched_harness.h: admission of new requests is held up to max_queue_delay_us to reach
// a preferred batch size (running + admitted), never longer, never past a deadline's slack,
// never above max_running, and running requests keep decoding meanwhile. Expected step
// counts are derived by hand in the comments.
#include <numeric>

#include <gtest/gtest.h>

#include "sched_harness.h"
#include "scheduler/scheduler.h"

namespace lifeline {
namespace {

using testing::Harness;

SchedulerConfig Config(int32_t max_running) {
  SchedulerConfig c;
  c.n_blocks = 64;  // 1024 tokens: blocks never limit these tests
  c.max_running = max_running;
  c.max_step_tokens = 256;
  return c;
}

std::vector<int32_t> Prompt(int32_t n, int32_t first = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

SchedulerKnobs Window(int32_t max_running, int64_t delay_us, std::vector<int32_t> preferred) {
  SchedulerKnobs k;
  k.max_running = max_running;
  k.max_step_tokens = 256;
  k.max_queue_delay_us = delay_us;
  k.preferred_batch_sizes = std::move(preferred);
  return k;
}

bool Has(const StepPlan& p, RequestId id) {
  for (const StepEntry& e : p.entries) {
    if (e.id == id) return true;
  }
  return false;
}

TEST(BatchWindowTest, SetKnobsValidatesTheWindow) {
  Harness h(Config(8));
  EXPECT_FALSE(h.sched().SetKnobs(Window(8, -1, {})).ok());
  EXPECT_FALSE(h.sched().SetKnobs(Window(8, 1000, {0})).ok());
  EXPECT_FALSE(h.sched().SetKnobs(Window(8, 1000, {4, 4})).ok());
  auto bad = h.sched().SetKnobs(Window(8, 1000, {8, 4}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("preferred_batch_sizes[1]"), std::string::npos);
  EXPECT_TRUE(h.sched().SetKnobs(Window(8, 1000, {2, 4, 64})).ok());  // above max: unreachable
}

TEST(BatchWindowTest, ZeroDelayAdmitsAtOnce) {
  Harness h(Config(8), /*step_us=*/1000);
  ASSERT_TRUE(h.sched().SetKnobs(Window(8, 0, {4})).ok());
  const RequestId a = h.Submit(Prompt(5), 3);
  const StepPlan p = h.Step();
  EXPECT_TRUE(Has(p, a));
  EXPECT_EQ(p.window_wait_us, 0);
  EXPECT_EQ(h.sched().stats().window_waits, 0);
}

TEST(BatchWindowTest, IdleEngineWaitsTheDelayAndNotBeyond) {
  Harness h(Config(8), /*step_us=*/1000);
  ASSERT_TRUE(h.sched().SetKnobs(Window(8, 10'000, {4})).ok());
  const RequestId a = h.Submit(Prompt(5), 3);  // arrives at t = 0
  // Steps at t = 0, 1000, ..., 9000 (10 steps) are held: 1 < 4 and the delay is 10 ms.
  for (int i = 0; i < 10; ++i) {
    const int64_t now = h.now_us();
    const StepPlan p = h.Step();
    ASSERT_TRUE(p.empty()) << "admitted at t=" << now;
    EXPECT_EQ(p.window_wait_us, 10'000 - now);  // the rest of the delay, from its arrival
  }
  // t = 10000: the oldest has waited the whole delay; it goes alone.
  const StepPlan p = h.Step();
  EXPECT_TRUE(Has(p, a));
  EXPECT_EQ(p.window_wait_us, 0);
  EXPECT_EQ(h.sched().stats().window_waits, 1);   // one hold ...
  EXPECT_EQ(h.sched().stats().window_held_steps, 10);  // ... over ten steps
  h.RunUntilIdle(50);
  EXPECT_EQ(h.sched().stats().completed, 1);
}

TEST(BatchWindowTest, PreferredSizeDispatchesAsSoonAsItIsReached) {
  Harness h(Config(8), /*step_us=*/1000);
  ASSERT_TRUE(h.sched().SetKnobs(Window(8, 1'000'000, {3, 6})).ok());
  const RequestId a = h.Submit(Prompt(5, 10), 3);
  const RequestId b = h.Submit(Prompt(5, 20), 3);
  EXPECT_TRUE(h.Step().empty());  // 2 < 3: held (the delay is a second)
  EXPECT_TRUE(h.Step().empty());
  const RequestId c = h.Submit(Prompt(5, 30), 3);
  const StepPlan p = h.Step();  // 3 reached: all three in one batch
  EXPECT_EQ(p.entries.size(), 3u);
  EXPECT_TRUE(Has(p, a) && Has(p, b) && Has(p, c));
  EXPECT_EQ(p.window_wait_us, 0);
}

TEST(BatchWindowTest, RunningRequestsKeepDecodingWhileNewOnesWait) {
  Harness h(Config(8), /*step_us=*/1000);
  const RequestId a = h.Submit(Prompt(5, 10), 50);
  const RequestId b = h.Submit(Prompt(5, 20), 50);
  h.Step();  // both admitted (no window yet)
  ASSERT_TRUE(h.sched().SetKnobs(Window(8, 5'000, {4})).ok());
  const RequestId c = h.Submit(Prompt(5, 30), 50);  // t = 1000; 2 running + 1 = 3 < 4
  for (int i = 0; i < 5; ++i) {  // t = 1000 .. 5000: held, a and b decode in every step
    const StepPlan p = h.Step();
    EXPECT_TRUE(Has(p, a) && Has(p, b));
    EXPECT_FALSE(Has(p, c)) << "step " << i;
    EXPECT_GT(p.window_wait_us, 0);
  }
  const RequestId d = h.Submit(Prompt(5, 40), 50);  // t = 6000 > delay: would dispatch anyway
  (void)d;
  const StepPlan p = h.Step();
  EXPECT_TRUE(Has(p, c));
  // A fourth arrival while running reaches the preferred size at once.
  Harness h2(Config(8), 1000);
  const RequestId x = h2.Submit(Prompt(5, 10), 50);
  const RequestId y = h2.Submit(Prompt(5, 20), 50);
  h2.Step();
  ASSERT_TRUE(h2.sched().SetKnobs(Window(8, 1'000'000, {4})).ok());
  const RequestId z1 = h2.Submit(Prompt(5, 30), 50);
  const StepPlan held = h2.Step();
  EXPECT_FALSE(Has(held, z1));
  EXPECT_TRUE(Has(held, x) && Has(held, y));
  const RequestId z2 = h2.Submit(Prompt(5, 40), 50);
  const StepPlan go = h2.Step();  // 2 running + 2 new = 4
  EXPECT_TRUE(Has(go, z1) && Has(go, z2));
}

TEST(BatchWindowTest, NeverWaitsForMoreThanMaxRunning) {
  Harness h(Config(4), /*step_us=*/1000);
  // The preferred size 8 is above the max batch: the max batch (4) is the target instead.
  ASSERT_TRUE(h.sched().SetKnobs(Window(4, 1'000'000, {8})).ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(h.Submit(Prompt(5, 10 * i), 3));
  EXPECT_TRUE(h.Step().empty());  // 3 < 4
  for (int i = 3; i < 6; ++i) ids.push_back(h.Submit(Prompt(5, 10 * i), 3));
  const StepPlan p = h.Step();  // 6 waiting, a full batch of 4 goes, never more
  EXPECT_EQ(p.entries.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Has(p, ids[static_cast<size_t>(i)]));
}

TEST(BatchWindowTest, ADeadlineInsideTheWindowIsNotHeld) {
  Harness h(Config(8), /*step_us=*/1000);
  ASSERT_TRUE(h.sched().SetKnobs(Window(8, 100'000, {4})).ok());
  // Deadline 50 ms away, the window would hold it 100 ms: admitted at once.
  const RequestId a = h.Submit(Prompt(5), 3, 0, /*deadline_us=*/50'000);
  EXPECT_TRUE(Has(h.Step(), a));

  Harness h2(Config(8), 1000);
  ASSERT_TRUE(h2.sched().SetKnobs(Window(8, 100'000, {4})).ok());
  // Deadline 1.05 s away: the window alone fits (held) ...
  const RequestId b = h2.Submit(Prompt(20), 3, 0, /*deadline_us=*/1'050'000);
  EXPECT_FALSE(Has(h2.Step(), b));
  // ... but not with 20 tokens x 50 ms of prefill: 1.05 s - 0.099 s left < 1 s.
  h2.sched().SetServiceEstimate(50'000);
  EXPECT_TRUE(Has(h2.Step(), b));
}

TEST(BatchWindowTest, FinishNowEndsARunningRequestAndFreesItsBlocks) {
  Harness h(Config(8), 1000);
  const RequestId a = h.Submit(Prompt(20), 40);
  const RequestId b = h.Submit(Prompt(20, 500), 40);
  for (int i = 0; i < 4; ++i) h.Step();  // prefill + 3 decodes: 4 tokens generated
  const int32_t used_before = h.sched().block_manager().stats().blocks_used;
  std::optional<Request> r = h.sched().FinishNow(a, FinishReason::kLength, h.now_us());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->n_generated(), 4);
  EXPECT_EQ(h.sched().Find(a), nullptr);
  EXPECT_LT(h.sched().block_manager().stats().blocks_used, used_before);
  EXPECT_TRUE(h.sched().CheckInvariants().ok());
  EXPECT_EQ(h.sched().stats().completed, 1);
  EXPECT_FALSE(h.sched().FinishNow(a, FinishReason::kLength, h.now_us()).has_value());
  EXPECT_FALSE(h.sched().FinishNow(b, FinishReason::kNone, h.now_us()).has_value());
  h.RunUntilIdle(100);  // the other request is unaffected
  EXPECT_EQ(h.finished()[b].n_generated(), 40);
}

}  // namespace
}  // namespace lifeline
