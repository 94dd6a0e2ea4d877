// ParallelFor: runs fn(i) for i in [0, count) on up to `threads` threads (the calling thread
// is one of them). Work items are handed out one at a time, so the result of each item must
// not depend on which thread ran it: callers seed every bootstrap replicate from its index,
// which keeps results identical for any thread count.
//
// Thread-safety: fn must be safe to call concurrently for different i. Failure: none.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "base/cpu_affinity.h"

namespace lifeline::analysis {

// The CPUs this process may run on (its affinity mask), at least 1.
inline int DefaultAnalysisThreads() {
  return std::max<int>(1, static_cast<int>(AllowedCpus().size()));
}

template <typename Fn>
void ParallelFor(int64_t count, int threads, Fn&& fn) {
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(i);
  };
  const int n = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, count)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace lifeline::analysis
