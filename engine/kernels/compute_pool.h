// Fork-join compute pool: n_threads - 1 persistent workers plus the calling thread. Run(fn)
// calls fn(ith, nth) on every thread and returns when all are done. Workers spin briefly on
// the generation counter (pause, then sched_yield so oversubscribed cores still make
// progress), then sleep on a condition variable, so an idle pool costs nothing and a busy
// decode loop pays no wake-up latency between ops.
//
// Pinning (asked for with a CPU list, off by default): worker ith binds itself to cpus[ith]
// when it starts, and the thread that calls Run() is compute thread 0 and binds itself to
// cpus[0] on its first Run(); pinned_threads() says how many bindings the OS accepted.
//
// Ownership: owned by the caller (one per engine loop). Thread-safety: Run() must be called
// from one thread at a time (the owner); fn must not call Run() re-entrantly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lifeline {

class ComputePool {
 public:
  // pin_cpus: empty (no pinning) or at least n_threads CPU ids (base/cpu_affinity.h
  // ResolvePinCpus builds and checks one).
  explicit ComputePool(int n_threads, std::vector<int> pin_cpus = {});
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  int n_threads() const { return n_threads_; }
  const std::vector<int>& pin_cpus() const { return pin_cpus_; }
  // Threads bound so far (workers at start, the owner at its first Run()).
  int pinned_threads() const { return pinned_.load(std::memory_order_acquire); }
  void Run(const std::function<void(int ith, int nth)>& fn);

  // Splits [0, n) into nth contiguous slabs; returns thread ith's [begin, end).
  static void Split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
    const int64_t per = (n + nth - 1) / nth;
    *begin = per * ith < n ? per * ith : n;
    *end = *begin + per < n ? *begin + per : n;
  }

 private:
  void WorkerLoop(int ith);

  int n_threads_;
  std::vector<int> pin_cpus_;
  bool owner_pin_tried_ = false;  // touched by the owner thread only
  std::atomic<int> pinned_{0};
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace lifeline
