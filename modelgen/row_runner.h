// Runs a per-row job over a tensor's rows on a ComputePool, in contiguous slabs per thread.
// Small tensors run on the calling thread: waking the pool costs more than the work (norms,
// biases, tiny test models), and the result doesn't depend on how rows are split.
//
// Thread-safety: `fn` is called concurrently from the pool's threads with disjoint row ranges.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/kernels/compute_pool.h"

namespace lifeline::modelgen {

// Below this many elements a tensor is processed on the calling thread.
inline constexpr int64_t kMinParallelElems = int64_t{1} << 16;

// fn(begin_row, end_row) for [0, rows) split over the pool (or once, inline).
inline void RunRows(ComputePool* pool, int64_t rows, int64_t row_elems,
                    const std::function<void(int64_t, int64_t)>& fn) {
  if (pool->n_threads() == 1 || rows < 2 || rows * row_elems < kMinParallelElems) {
    fn(0, rows);
    return;
  }
  pool->Run([&](int ith, int nth) {
    int64_t begin = 0, end = 0;
    ComputePool::Split(rows, ith, nth, &begin, &end);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace lifeline::modelgen
