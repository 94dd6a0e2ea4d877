// LlamaModel::RepackMatrices: the load-time copy of matrices into the row-interleaved layout
// the SIMD decode kernels stream (engine/kernels/interleave.h).
#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/kernels/interleave.h"
#include "engine/model/llama_model.h"

namespace lifeline {

// Every matrix used only in products (not token_embd, whose rows the embedding lookup reads,
// nor a classifier tied to it) is copied once into the interleaved layout when the kernel
// table has SIMD kernels for its type. All copies share one anonymous mapping asking for
// transparent huge pages: 2 MiB pages make the copy fault a few hundred times instead of
// ~150 000 times for a 600 MB model, and the decode stream misses the TLB far less. The copy
// runs on every core; afterwards the file pages of the copied matrices are released (they
// would otherwise stay in the process's resident set next to the copies).
//
// With fuse_gate_up, a layer's gate and up (same type and shape) become one matrix whose
// 16-row groups alternate (LlamaLayerWeights::w_gate_up). Why: the gate+up product was the
// slowest per byte of a decode step, because each piece of rows a thread takes switches
// between two weight streams; measured (1.1B, tg64, two threads, per-product timing) the
// same rows walked as two contiguous matrices streamed 8-14 % faster (Q4_0 46.6 -> 50.5
// GB/s, Q4_K_M 43.6 -> 49.9 under the same neighbour load), while finer alternation between
// the two matrices (every 16-128 rows) was slower still. With this fusion the product read
// 63-64 GB/s where the two row-aligned matrices read 57-60 (1.1B Q4_K_M, alternating, same
// minutes); two binaries alternated, 6 rounds of tg64: 1.1B Q4_K_M 1.07x in a quiet hour,
// 1.02x in a busier one, Q4_0 1.05x, Q8_0 1.03x, 110M Q8_0 1.00x.
Status LlamaModel::RepackMatrices(bool fuse_gate_up) {
  // One copy: `a` alone, or `a` and `b` (same type and shape) alternating group by group.
  struct Copy {
    WeightMatrix* a;
    WeightMatrix* b;
    WeightMatrix* fused;  // where the fused matrix goes (b != nullptr)
    uint64_t offset;
  };
  const auto asked = [&](const WeightMatrix& w) {
    return (kernels_->interleaved_types >> static_cast<uint32_t>(w.type) & 1u) != 0 &&
           kernels::CanInterleave(w);
  };
  std::vector<Copy> todo;
  // One FFN (dense, an expert, the shared expert): gate and up fused when both are asked.
  const auto add_ffn = [&](WeightMatrix& gate, WeightMatrix& up, WeightMatrix& down,
                           WeightMatrix& gate_up) {
    const bool pair = fuse_gate_up && asked(gate) && asked(up) && gate.type == up.type &&
                      gate.rows == up.rows && gate.cols == up.cols;
    if (pair) {
      todo.push_back({&gate, &up, &gate_up, 0});
    } else {
      for (WeightMatrix* w : {&gate, &up}) {
        if (asked(*w)) todo.push_back({w, nullptr, nullptr, 0});
      }
    }
    if (asked(down)) todo.push_back({&down, nullptr, nullptr, 0});
  };
  for (LlamaLayerWeights& l : weights_.layers) {
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo}) {
      if (asked(*w)) todo.push_back({w, nullptr, nullptr, 0});
    }
    add_ffn(l.w_gate, l.w_up, l.w_down, l.w_gate_up);
    for (FfnWeights& e : l.experts) add_ffn(e.w_gate, e.w_up, e.w_down, e.w_gate_up);
    add_ffn(l.shexp.w_gate, l.shexp.w_up, l.shexp.w_down, l.shexp.w_gate_up);
  }
  if (!weights_.output_tied && asked(weights_.output)) {
    todo.push_back({&weights_.output, nullptr, nullptr, 0});
  }
  if (todo.empty()) return Status::Ok();

  const auto bytes_of = [](const WeightMatrix& w) {
    return static_cast<uint64_t>(w.rows) * w.row_bytes;
  };
  uint64_t total = 0;
  for (Copy& c : todo) {
    c.offset = total;
    total += ((c.b == nullptr ? 1 : 2) * bytes_of(*c.a) + 63) / 64 * 64;
  }
  LL_ASSIGN_OR_RETURN(repacked_, HugePageBuffer::Allocate(total));

  const unsigned n_threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  auto work = [&](unsigned ith) {
    for (const Copy& c : todo) {
      const int64_t groups = c.a->rows / kernels::kInterleaveRows;
      const int64_t g0 = groups * ith / n_threads, g1 = groups * (ith + 1) / n_threads;
      if (g0 >= g1) continue;
      uint8_t* dst = repacked_.data() + c.offset;
      if (c.b == nullptr) {
        kernels::InterleaveRows(*c.a, dst, g0, g1);
        continue;
      }
      const uint64_t group_bytes = kernels::kInterleaveRows * c.a->row_bytes;
      kernels::InterleaveRows(*c.a, dst, g0, g1, 2 * group_bytes);
      kernels::InterleaveRows(*c.b, dst + group_bytes, g0, g1, 2 * group_bytes);
    }
  };
  std::vector<std::thread> threads;
  unsigned started = 1;
  try {
    for (; started < n_threads; ++started) threads.emplace_back(work, started);
  } catch (const std::system_error&) {
    // No more threads available: this thread does the rest of the slabs itself.
  }
  for (unsigned t = started; t < n_threads; ++t) work(t);
  work(0);
  for (std::thread& t : threads) t.join();

  for (const Copy& c : todo) {
    for (WeightMatrix* w : {c.a, c.b}) {
      if (w != nullptr) file_->ReleasePages(w->data, bytes_of(*w));
    }
    if (c.b == nullptr) {
      c.a->data = repacked_.data() + c.offset;
      c.a->layout = WeightLayout::kInterleaved16;
      continue;
    }
    // gate and up keep describing the file's copy (GGUF row layout); products use the fusion.
    *c.fused = *c.a;
    c.fused->rows = 2 * c.a->rows;
    c.fused->data = repacked_.data() + c.offset;
    c.fused->layout = WeightLayout::kInterleaved16;
  }
  repacked_bytes_ = total;
  return Status::Ok();
}

}  // namespace lifeline
