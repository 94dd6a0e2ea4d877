// ComputePool: Split covers [0, n) exactly; every thread index runs exactly once per Run;
// many back-to-back Runs (the decode loop's pattern) neither lose nor repeat work; no wake-up
// is lost when a run starts while a worker goes to sleep.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/compute_pool.h"

#include "base/cpu_affinity.h"

namespace lifeline {
namespace {

TEST(ComputePoolSplit, CoversRangeContiguouslyWithoutOverlap) {
  for (int64_t n : {0, 1, 2, 3, 7, 8, 100, 1001}) {
    for (int nth : {1, 2, 3, 4, 7, 16}) {
      int64_t expect_begin = 0;
      for (int ith = 0; ith < nth; ++ith) {
        int64_t b, e;
        ComputePool::Split(n, ith, nth, &b, &e);
        EXPECT_EQ(b, expect_begin) << "n=" << n << " nth=" << nth << " ith=" << ith;
        EXPECT_LE(b, e);
        EXPECT_LE(e, n);
        // Balanced: no slab is more than one ceil-share.
        EXPECT_LE(e - b, (n + nth - 1) / nth);
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, n) << "n=" << n << " nth=" << nth;
    }
  }
}

TEST(ComputePool, EveryThreadIndexRunsOncePerRun) {
  for (int n_threads : {1, 2, 3, 5}) {
    ComputePool pool(n_threads);
    EXPECT_EQ(pool.n_threads(), n_threads);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n_threads));
    std::atomic<int> bad_nth{0};
    std::set<std::thread::id> ids;
    std::mutex mu;
    pool.Run([&](int ith, int nth) {
      if (nth != n_threads) bad_nth.fetch_add(1);
      hits[ith].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    for (int i = 0; i < n_threads; ++i) EXPECT_EQ(hits[i].load(), 1) << i;
    EXPECT_EQ(bad_nth.load(), 0);
    EXPECT_EQ(static_cast<int>(ids.size()), n_threads) << "each index on its own thread";
  }
}

TEST(ComputePool, NonPositiveThreadCountMeansOne) {
  ComputePool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  int calls = 0;
  pool.Run([&](int ith, int nth) {
    EXPECT_EQ(ith, 0);
    EXPECT_EQ(nth, 1);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ComputePool, ManyRunsInARow) {
  ComputePool pool(3);
  constexpr int kRuns = 3000;
  std::vector<int64_t> per_thread(3, 0);  // each slot written only by its own ith
  int64_t total = 0;
  for (int run = 0; run < kRuns; ++run) {
    std::vector<int64_t> out(30, -1);
    pool.Run([&](int ith, int nth) {
      int64_t b, e;
      ComputePool::Split(30, ith, nth, &b, &e);
      for (int64_t i = b; i < e; ++i) out[i] = i + run;
      ++per_thread[ith];
    });
    // Run returned: every write of this run must be visible.
    for (int64_t i = 0; i < 30; ++i) {
      ASSERT_EQ(out[i], i + run) << "run " << run;
      total += out[i];
    }
  }
  for (int64_t c : per_thread) EXPECT_EQ(c, kRuns);
  EXPECT_EQ(total, int64_t{kRuns} * (29 * 30 / 2) + int64_t{30} * (int64_t{kRuns} * (kRuns - 1) / 2));
}

// Runs separated by pauses long enough for workers to leave the spin and sleep.
TEST(ComputePool, WakesSleepingWorkers) {
  ComputePool pool(2);
  for (int run = 0; run < 3; ++run) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::atomic<int> n{0};
    pool.Run([&](int, int) { n.fetch_add(1); });
    EXPECT_EQ(n.load(), 2);
  }
}

// Pauses around the length of the workers' spin (tens to hundreds of microseconds) make runs
// start while a worker is deciding to sleep, the window in which a wake-up can be lost. A
// lost wake-up would leave Run waiting for ever: each run has a deadline, and a missed one
// fails the test and ends the process rather than hanging the suite. (Checked: a Run that
// never notifies fails here within the deadline.)
TEST(ComputePool, NoWakeUpLostNearTheSpinToSleepEdge) {
  ComputePool pool(3);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pause_us(0, 400);
  for (int run = 0; run < 400; ++run) {
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
    std::atomic<int> n{0};
    auto done = std::async(std::launch::async, [&] {
      pool.Run([&](int, int) { n.fetch_add(1); });
    });
    if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "run " << run << " never finished: a worker missed its wake-up";
      std::fflush(nullptr);
      std::_Exit(1);
    }
    ASSERT_EQ(n.load(), 3) << "run " << run;
  }
}

#if defined(__linux__)
// Pinned: worker ith runs bound to pin_cpus[ith], and the thread calling Run() (compute thread
// 0) is bound to pin_cpus[0] from its first Run(); unpinned pools leave affinity alone.
TEST(ComputePool, PinnedThreadsRunOnTheirListedCpu) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  // Reverse order so thread i's CPU is not simply CPU i; with one allowed CPU both share it.
  const std::vector<int> cpus = {allowed.back(), allowed.front()};
  std::vector<std::vector<int>> seen(2);
  std::thread owner([&] {
    ComputePool pool(2, cpus);
    EXPECT_EQ(pool.pin_cpus(), cpus);
    pool.Run([&](int ith, int) { seen[static_cast<size_t>(ith)] = CurrentThreadCpus(); });
    EXPECT_EQ(pool.pinned_threads(), 2);
  });
  owner.join();
  EXPECT_EQ(seen[0], (std::vector<int>{cpus[0]}));
  EXPECT_EQ(seen[1], (std::vector<int>{cpus[1]}));

  std::vector<std::vector<int>> free_seen(2);
  ComputePool unpinned(2);
  unpinned.Run([&](int ith, int) { free_seen[static_cast<size_t>(ith)] = CurrentThreadCpus(); });
  EXPECT_EQ(unpinned.pinned_threads(), 0);
  EXPECT_EQ(free_seen[0], allowed);
  EXPECT_EQ(free_seen[1], allowed);
}
#endif

}  // namespace
}  // namespace lifeline
