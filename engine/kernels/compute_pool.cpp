#include "engine/kernels/compute_pool.h"

#include <utility>

#include "base/check.h"
#include "base/cpu_affinity.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LL_CPU_RELAX() _mm_pause()
#else
#define LL_CPU_RELAX() ((void)0)
#endif

namespace lifeline {
namespace {
// Waiting is staged: a short pause-spin (wake-up within nanoseconds for back-to-back ops of a
// forward pass), then spinning with sched_yield so that an oversubscribed machine (more
// threads than free cores: other processes, or a pool larger than the core count) lets the
// threads that still have work run, and finally (workers only) sleeping on the condition
// variable so an idle pool costs nothing.
// Note: pure pause-spinning was measured at milliseconds per Run with 3 threads on 2 cores,
// because a spinning thread held the core the last worker needed.
constexpr int kPauseSpins = 2000;   // ~10-20 us
constexpr int kYieldSpins = 200;    // ~50-200 us more, then sleep

inline void SpinWait(int spin) {
  if (spin < kPauseSpins) {
    LL_CPU_RELAX();
  } else {
    std::this_thread::yield();
  }
}
}  // namespace

ComputePool::ComputePool(int n_threads, std::vector<int> pin_cpus)
    : n_threads_(n_threads < 1 ? 1 : n_threads), pin_cpus_(std::move(pin_cpus)) {
  LL_CHECK(pin_cpus_.empty() || static_cast<int>(pin_cpus_.size()) >= n_threads_);
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i] {
      if (!pin_cpus_.empty() && PinCurrentThread(pin_cpus_[static_cast<size_t>(i)])) {
        pinned_.fetch_add(1, std::memory_order_acq_rel);
      }
      WorkerLoop(i);
    });
  }
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ComputePool::Run(const std::function<void(int, int)>& fn) {
  if (!owner_pin_tried_) {
    owner_pin_tried_ = true;
    if (!pin_cpus_.empty() && PinCurrentThread(pin_cpus_[0])) {
      pinned_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  fn(0, n_threads_);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0;) {
    SpinWait(spin);
    if (spin < kPauseSpins) ++spin;  // then keep yielding until the last worker is done
  }
  job_ = nullptr;
}

void ComputePool::WorkerLoop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kPauseSpins + kYieldSpins; ++spin) {
      SpinWait(spin);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(ith, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace lifeline
