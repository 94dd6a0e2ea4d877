#include "bench/bandwidth_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "engine/kernels/compute_pool.h"

namespace lifeline {
namespace {

// Eight independent accumulators so the loop is limited by loads, not by an add chain;
// -O3 vectorises it at the baseline ISA (and wider where the build allows).
uint64_t SumSlab(const uint64_t* p, int64_t n) {
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] ^= p[i + j];
  }
  for (; i < n; ++i) acc[0] ^= p[i];
  uint64_t s = 0;
  for (uint64_t a : acc) s ^= a;
  return s;
}

}  // namespace

BandwidthResult MeasureReadBandwidth(ComputePool& pool, uint64_t buffer_bytes, int reps) {
  BandwidthResult r;
  const int64_t n_words = static_cast<int64_t>(buffer_bytes / sizeof(uint64_t));
  r.buffer_bytes = static_cast<uint64_t>(n_words) * sizeof(uint64_t);
  r.reps = reps;
  std::vector<uint64_t> buf(static_cast<size_t>(n_words));
  // First touch from the pool's threads, so pages land near the threads that read them.
  pool.Run([&](int ith, int nth) {
    int64_t b, e;
    ComputePool::Split(n_words, ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  });
  std::vector<double> gbs;
  std::atomic<uint64_t> sink{0};
  for (int rep = 0; rep < reps + 1; ++rep) {  // first pass is a warm-up
    const auto t0 = std::chrono::steady_clock::now();
    pool.Run([&](int ith, int nth) {
      int64_t b, e;
      ComputePool::Split(n_words, ith, nth, &b, &e);
      sink.fetch_xor(SumSlab(buf.data() + b, e - b), std::memory_order_relaxed);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) gbs.push_back(static_cast<double>(r.buffer_bytes) / s / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  r.median_gb_per_s = gbs[gbs.size() / 2];
  r.max_gb_per_s = gbs.back();
  r.checksum = sink.load();  // returned so the reads stay observable
  return r;
}

}  // namespace lifeline
