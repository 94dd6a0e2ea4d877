// Measures this machine's sustained DRAM read bandwidth: every pool thread streams its own
// slab of a buffer much larger than the last-level cache (huge pages, software prefetch,
// 256-bit loads where the CPU has AVX2: the way the decode kernels stream weights) and folds
// it into a checksum (so the reads cannot be optimised away). The decode roofline is this
// figure divided by the bytes of weights read per token.
//
// BandwidthProbe keeps its buffer between measurements, so a benchmark can sample the
// bandwidth right beside each of its runs (bench-model pairs every tg run with the samples
// taken just before and just after it: on a shared machine the bandwidth drifts by 10-20 %
// within a minute, and a reference measured once, minutes away from a run, moves the share
// of the roofline by as much).
//
// Ownership: the probe owns its buffer and borrows the pool (which must outlive it);
// MeasureReadBandwidth allocates and frees one per call. Thread-safety: one caller at a time,
// on the pool's owner thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/huge_page_buffer.h"
#include "base/status.h"

namespace lifeline {

class ComputePool;

struct BandwidthResult {
  double median_gb_per_s = 0;  // 1 GB = 1e9 bytes
  double max_gb_per_s = 0;
  uint64_t buffer_bytes = 0;
  int reps = 0;
  uint64_t checksum = 0;  // of the bytes read; meaningless, but keeps the reads alive
};

class BandwidthProbe {
 public:
  // Allocates buffer_bytes (> 0; rounded down to 8-byte words) and touches it from the pool's
  // threads, so pages land near the threads that read them.
  static Result<BandwidthProbe> Create(ComputePool& pool, uint64_t buffer_bytes);

  // One pass over the whole buffer by every pool thread, in GB/s (1e9 bytes).
  double MeasurePass();
  // reps + 1 passes, the first a warm-up that is not counted.
  BandwidthResult Measure(int reps);

  uint64_t buffer_bytes() const { return bytes_; }
  uint64_t checksum() const { return checksum_; }

 private:
  BandwidthProbe(ComputePool& pool, HugePageBuffer mem, uint64_t bytes)
      : pool_(&pool), mem_(std::move(mem)), bytes_(bytes) {}

  ComputePool* pool_;
  HugePageBuffer mem_;
  uint64_t bytes_ = 0;
  uint64_t checksum_ = 0;  // of the bytes read; meaningless, but keeps the reads alive
};

// Median (and max) of `reps` passes after one warm-up pass, over a fresh buffer.
BandwidthResult MeasureReadBandwidth(ComputePool& pool, uint64_t buffer_bytes = 1ull << 30,
                                     int reps = 5);

// The median of values (0 when empty); the mean of the middle two for an even count. Shared
// by the probe, bench-model's bandwidth samples and its run summaries (Summarize).
double MedianOf(std::vector<double> values);

}  // namespace lifeline
