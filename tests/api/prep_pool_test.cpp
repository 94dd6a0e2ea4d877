// PrepPool (api/prep_pool.h): jobs run on the pool's threads, the queue is bounded,
// Shutdown hands every job that never ran a `run = false` call, and a job that throws does
// not take a thread down. Jobs block on latches the test opens; nothing waits on a clock
// except the generous upper bound of WaitFor.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/prep_pool.h"

namespace lifeline::api {
namespace {

using namespace std::chrono_literals;

// A gate jobs wait at until the test opens it.
class Latch {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(PrepPoolTest, RunsJobsOnItsOwnThreads) {
  PrepPool pool(2, 8);
  std::atomic<int> ran{0};
  std::atomic<bool> on_caller{false};
  const std::thread::id caller = std::this_thread::get_id();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(pool.TryPost([&](bool run) {
      EXPECT_TRUE(run);
      if (std::this_thread::get_id() == caller) on_caller = true;
      ++ran;
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return ran.load() == 6; }));
  EXPECT_FALSE(on_caller.load());
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().idle(); }));
  EXPECT_EQ(pool.Stats().threads, 2);
  EXPECT_EQ(pool.Stats().rejected, 0u);
}

// Beyond the jobs running, at most max_queued wait; the next is refused (and counted), and
// once a thread is free again jobs are taken as before.
TEST(PrepPoolTest, RefusesAJobWhenTheQueueIsFull) {
  PrepPool pool(1, 2);
  Latch latch;
  std::atomic<int> ran{0};
  auto blocking = [&](bool run) {
    if (run) latch.Wait();
    ++ran;
  };
  ASSERT_TRUE(pool.TryPost(blocking));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().running == 1; }));
  EXPECT_TRUE(pool.TryPost(blocking));
  EXPECT_TRUE(pool.TryPost(blocking));
  EXPECT_EQ(pool.Stats().queued, 2u);
  EXPECT_FALSE(pool.TryPost(blocking));
  EXPECT_FALSE(pool.TryPost(blocking));
  EXPECT_EQ(pool.Stats().rejected, 2u);
  EXPECT_EQ(pool.Stats().queued, 2u);
  latch.Open();
  ASSERT_TRUE(WaitFor([&] { return ran.load() == 3; }));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().idle(); }));
  EXPECT_TRUE(pool.TryPost(blocking));
  ASSERT_TRUE(WaitFor([&] { return ran.load() == 4; }));
}

// With no queue at all, a job is taken only while a thread is idle.
TEST(PrepPoolTest, AZeroQueueTakesOneJobPerIdleThread) {
  PrepPool pool(2, 0);
  Latch latch;
  auto blocking = [&](bool run) {
    if (run) latch.Wait();
  };
  EXPECT_TRUE(pool.TryPost(blocking));
  EXPECT_TRUE(pool.TryPost(blocking));
  EXPECT_FALSE(pool.TryPost(blocking));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().running == 2; }));
  EXPECT_FALSE(pool.TryPost(blocking));
  latch.Open();
}

// Shutdown: the jobs still queued are called with run = false (so each can still answer its
// request), the running one finishes with run = true, and nothing is taken afterwards.
TEST(PrepPoolTest, ShutdownCallsQueuedJobsWithRunFalseAndWaitsForTheRunningOne) {
  PrepPool pool(1, 4);
  Latch latch;
  std::mutex mu;
  std::vector<std::pair<int, bool>> calls;  // (job, run)
  auto job = [&](int id) {
    return [&, id](bool run) {
      if (run && id == 0) latch.Wait();
      std::lock_guard lock(mu);
      calls.emplace_back(id, run);
    };
  };
  ASSERT_TRUE(pool.TryPost(job(0)));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().running == 1; }));
  ASSERT_TRUE(pool.TryPost(job(1)));
  ASSERT_TRUE(pool.TryPost(job(2)));
  std::thread stopper([&] { pool.Shutdown(); });
  // The queued jobs are abandoned before Shutdown waits for the running one.
  EXPECT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return calls.size() == 2;
  }));
  {
    std::lock_guard lock(mu);
    if (calls.size() == 2) {
      EXPECT_EQ(calls[0], std::make_pair(1, false));
      EXPECT_EQ(calls[1], std::make_pair(2, false));
    }
  }
  EXPECT_FALSE(pool.TryPost(job(3)));  // shut down: refused, never called
  latch.Open();
  stopper.join();
  std::lock_guard lock(mu);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], std::make_pair(0, true));
  pool.Shutdown();  // idempotent
  EXPECT_EQ(pool.Stats().threads, 0);
}

// A job that throws is dropped; the thread goes on with the next job, and an abandoned job
// that throws does not stop Shutdown from calling the others.
TEST(PrepPoolTest, AnExceptionFromAJobIsSwallowedAndTheThreadCarriesOn) {
  PrepPool pool(1, 8);
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.TryPost([](bool) { throw std::runtime_error("job failed"); }));
  ASSERT_TRUE(pool.TryPost([](bool) { throw 42; }));
  ASSERT_TRUE(pool.TryPost([&](bool run) { ran += run ? 1 : 0; }));
  ASSERT_TRUE(WaitFor([&] { return ran.load() == 1; }));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().idle(); }));

  Latch latch;
  std::atomic<int> abandoned{0};
  ASSERT_TRUE(pool.TryPost([&](bool run) {
    if (run) latch.Wait();
  }));
  ASSERT_TRUE(WaitFor([&] { return pool.Stats().running == 1; }));
  ASSERT_TRUE(pool.TryPost([](bool) { throw std::runtime_error("abandoned and failed"); }));
  ASSERT_TRUE(pool.TryPost([&](bool run) { abandoned += run ? 0 : 1; }));
  std::thread stopper([&] { pool.Shutdown(); });
  EXPECT_TRUE(WaitFor([&] { return abandoned.load() == 1; }));
  latch.Open();
  stopper.join();
}

TEST(PrepPoolTest, MetricsTextNamesTheGauges) {
  PrepStats s;
  s.threads = 2;
  s.queued = 3;
  s.running = 1;
  s.rejected = 7;
  const std::string text = PrepMetricsText(s);
  EXPECT_NE(text.find("lifeline_prep_threads 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lifeline_prep_queued 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lifeline_prep_running 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lifeline_prep_rejected_total 7\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace lifeline::api
