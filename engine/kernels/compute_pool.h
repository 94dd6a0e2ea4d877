// Fork-join compute pool: n_threads - 1 persistent workers plus the calling thread. Run(fn)
// calls fn(ith, nth) on every thread and returns when all are done. Workers spin briefly on
// the generation counter (pause, then sched_yield so oversubscribed cores still make
// progress), then sleep on a condition variable, so an idle pool costs nothing and a busy
// decode loop pays no wake-up latency between ops.
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
  explicit ComputePool(int n_threads);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  int n_threads() const { return n_threads_; }
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
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace lifeline
