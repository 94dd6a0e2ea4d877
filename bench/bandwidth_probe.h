// Measures this machine's sustained DRAM read bandwidth: every pool thread streams its own
// slab of a buffer much larger than the last-level cache (huge pages, software prefetch,
// 256-bit loads where the CPU has AVX2: the way the decode kernels stream weights) and folds
// it into a checksum (so the reads cannot be optimised away). The decode roofline is this
// figure divided by the bytes of weights read per token.
//
// Ownership: allocates and frees its buffer per call. Thread-safety: uses the caller's pool.
#pragma once

#include <cstdint>

namespace lifeline {

class ComputePool;

struct BandwidthResult {
  double median_gb_per_s = 0;  // 1 GB = 1e9 bytes
  double max_gb_per_s = 0;
  uint64_t buffer_bytes = 0;
  int reps = 0;
  uint64_t checksum = 0;  // of the bytes read; meaningless, but keeps the reads alive
};

BandwidthResult MeasureReadBandwidth(ComputePool& pool, uint64_t buffer_bytes = 1ull << 30,
                                     int reps = 5);

}  // namespace lifeline
