#include "engine/kernels/matmul_driver.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "base/check.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/ref/vec_dot_ref.h"

namespace lifeline::kernels {
namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs a
// few microseconds, more than the work itself (tiny models, the logits of a 64-wide model).
constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;
// Quantizing fewer values than this is not worth a pool round trip.
constexpr int64_t kMinValuesParallelQuantize = int64_t{1} << 15;
// Row-tile chunks per thread for the dynamic split (see RunMatmul).
constexpr int64_t kChunksPerThread = 8;
// Activation bytes per token chunk: small enough to stay in L2 next to the weight tile.
constexpr int64_t kTokenChunkBytes = int64_t{256} << 10;

// Approximate bytes the tile kernels read per activation value, for chunk sizing.
int64_t ActBytesPerValue(ActFormat f) {
  switch (f) {
    case ActFormat::kF32:
    case ActFormat::kF16: return 4;
    case ActFormat::kQ8_0:
    case ActFormat::kQ8_1:
    case ActFormat::kBf16: return 2;
    case ActFormat::kQ8_K: return 1;
  }
  return 4;
}

void ScalarTileFn(GgmlType type, const uint8_t* w, uint64_t row_bytes, int nr,
                  const QuantizedActs& acts, int64_t t0, int nt, float* y, int64_t ldy) {
  for (int t = 0; t < nt; ++t) {
    const ActRow a = acts.Row(t0 + t);
    for (int r = 0; r < nr; ++r) {
      y[t * ldy + r] = ref::VecDot(type, w + r * row_bytes, a, acts.cols());
    }
  }
}

template <GgmlType kType>
void ScalarTileT(const uint8_t* w, uint64_t row_bytes, int nr, const QuantizedActs& acts,
                 int64_t t0, int nt, float* y, int64_t ldy) {
  ScalarTileFn(kType, w, row_bytes, nr, acts, t0, nt, y, ldy);
}

// One thread's share: row tiles [rt0, rt1) of max_rows rows each, all tokens.
void RunSlab(const TileKernel& k, const WeightMatrix& w, const QuantizedActs& acts,
             int64_t rt0, int64_t rt1, float* y) {
  const int64_t n_tokens = acts.n_tokens();
  const int64_t chunk_raw =
      kTokenChunkBytes / std::max<int64_t>(1, w.cols * ActBytesPerValue(acts.format()));
  const int64_t chunk = std::max<int64_t>(k.max_tokens, chunk_raw / k.max_tokens * k.max_tokens);
  const int64_t r_end = std::min(w.rows, rt1 * k.max_rows);
  for (int64_t tc = 0; tc < n_tokens; tc += chunk) {
    const int64_t tc_end = std::min(n_tokens, tc + chunk);
    for (int64_t r = rt0 * k.max_rows; r < r_end; r += k.max_rows) {
      const int nr = static_cast<int>(std::min<int64_t>(k.max_rows, r_end - r));
      const uint8_t* wr = w.data + static_cast<uint64_t>(r) * w.row_bytes;
      for (int64_t t = tc; t < tc_end; t += k.max_tokens) {
        const int nt = static_cast<int>(std::min<int64_t>(k.max_tokens, tc_end - t));
        k.fn(wr, w.row_bytes, nr, acts, t, nt, y + t * w.rows + r, w.rows);
      }
    }
  }
}

// The packed path: threads take tiles of kGemmRows rows from a shared counter, pack each
// into their own scratch once and run every token past it.
void RunGemm(const GemmKernel& g, const WeightMatrix& w, const QuantizedActs& acts,
             int64_t useful_threads, float* y, ComputePool& pool) {
  const int64_t n_tiles = (w.rows + kGemmRows - 1) / kGemmRows;
  const uint64_t scratch_bytes = g.packed_bytes(w.cols);
  std::atomic<int64_t> next_tile{0};
  auto work = [&] {
    std::vector<uint8_t> packed(scratch_bytes + 64);
    uint8_t* p = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
    for (;;) {
      const int64_t tile = next_tile.fetch_add(1, std::memory_order_relaxed);
      if (tile >= n_tiles) break;
      const int64_t r0 = tile * kGemmRows;
      const int nr = static_cast<int>(std::min<int64_t>(kGemmRows, w.rows - r0));
      g.pack(w.data + static_cast<uint64_t>(r0) * w.row_bytes, w.row_bytes, nr, w.cols, p);
      g.run(p, nr, acts, 0, acts.n_tokens(), y + r0, w.rows);
    }
  };
  if (useful_threads <= 1) {
    work();
    return;
  }
  pool.Run([&](int ith, int) {
    if (ith < useful_threads) work();
  });
}

}  // namespace

TileKernel ScalarTile(GgmlType type) {
  TileKernel k;
  k.max_rows = 4;
  k.max_tokens = 4;
  switch (type) {
    case GgmlType::kF32: k.fn = &ScalarTileT<GgmlType::kF32>; break;
    case GgmlType::kF16: k.fn = &ScalarTileT<GgmlType::kF16>; break;
    case GgmlType::kBF16: k.fn = &ScalarTileT<GgmlType::kBF16>; break;
    case GgmlType::kQ4_0: k.fn = &ScalarTileT<GgmlType::kQ4_0>; break;
    case GgmlType::kQ4_1: k.fn = &ScalarTileT<GgmlType::kQ4_1>; break;
    case GgmlType::kQ5_0: k.fn = &ScalarTileT<GgmlType::kQ5_0>; break;
    case GgmlType::kQ5_1: k.fn = &ScalarTileT<GgmlType::kQ5_1>; break;
    case GgmlType::kQ8_0: k.fn = &ScalarTileT<GgmlType::kQ8_0>; break;
    case GgmlType::kQ2_K: k.fn = &ScalarTileT<GgmlType::kQ2_K>; break;
    case GgmlType::kQ3_K: k.fn = &ScalarTileT<GgmlType::kQ3_K>; break;
    case GgmlType::kQ4_K: k.fn = &ScalarTileT<GgmlType::kQ4_K>; break;
    case GgmlType::kQ5_K: k.fn = &ScalarTileT<GgmlType::kQ5_K>; break;
    case GgmlType::kQ6_K: k.fn = &ScalarTileT<GgmlType::kQ6_K>; break;
    default: k.fn = nullptr; break;
  }
  return k;
}

MatmulImpl MakeScalarImpl() {
  MatmulImpl impl;
  impl.isa = IsaLevel::kScalar;
  for (uint32_t id = 0; id <= kMaxTypeId; ++id) {
    const auto traits = GetTypeTraits(id);
    if (traits && ref::HasVecDot(traits->type)) impl.tiles[id] = ScalarTile(traits->type);
  }
  for (auto& q : impl.quantize) q = &ref::QuantizeToken;
  return impl;
}

void QuantizeActs(const MatmulImpl& impl, ActFormat format, const float* x, int64_t n_tokens,
                  int64_t cols, QuantizedActs& acts, ComputePool& pool) {
  acts.Reset(format, n_tokens, cols, x);
  if (format == ActFormat::kF32) return;  // borrowed as is
  const QuantizeTokenFn quantize = impl.quantize[static_cast<int>(format)];
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) quantize(x + t * cols, acts, t);
  };
  if (pool.n_threads() == 1 || n_tokens < 2 || n_tokens * cols < kMinValuesParallelQuantize) {
    run(0, n_tokens);
    return;
  }
  pool.Run([&](int ith, int nth) {
    int64_t t0, t1;
    ComputePool::Split(n_tokens, ith, nth, &t0, &t1);
    run(t0, t1);
  });
}

void RunMatmul(const MatmulImpl& impl, const WeightMatrix& w, const float* x, int64_t n_tokens,
               float* y, ComputePool& pool) {
  const auto type_id = static_cast<uint32_t>(w.type);
  const TileKernel* k = type_id <= kMaxTypeId ? &impl.tiles[type_id] : nullptr;
  if (k == nullptr || k->fn == nullptr) {
    ReferenceKernels().matmul(w, x, n_tokens, y, pool);
    return;
  }
  if (w.rows == 0 || n_tokens == 0) return;
  LL_CHECK(w.cols % ActBlockElems(ActFormatFor(w.type)) == 0);

  QuantizedActs acts;  // per-call scratch
  QuantizeActs(impl, ActFormatFor(w.type), x, n_tokens, w.cols, acts, pool);

  const int64_t macs = w.rows * w.cols * n_tokens;
  const GemmKernel& g = impl.gemm[type_id];
  if (g.run != nullptr && n_tokens >= g.min_tokens) {
    const int64_t n_tiles = (w.rows + kGemmRows - 1) / kGemmRows;
    const int64_t threads =
        std::min<int64_t>({pool.n_threads(), n_tiles, std::max<int64_t>(1, macs / kMinMacsPerThread)});
    RunGemm(g, w, acts, threads, y, pool);
    return;
  }
  const int64_t n_row_tiles = (w.rows + k->max_rows - 1) / k->max_rows;
  const int64_t useful_threads =
      std::min<int64_t>({pool.n_threads(), n_row_tiles, std::max<int64_t>(1, macs / kMinMacsPerThread)});
  if (useful_threads <= 1) {
    RunSlab(*k, w, acts, 0, n_row_tiles, y);
    return;
  }
  // Threads take chunks of row tiles from a shared counter rather than one fixed slab each:
  // on a machine shared with other work a descheduled thread then delays only the chunk it
  // holds, not half of the matrix. Chunks stay large (a few per thread) so each one streams
  // long contiguous runs of weights. Results do not depend on who computes which chunk.
  const int64_t chunk_tiles = std::max<int64_t>(1, n_row_tiles / (useful_threads * kChunksPerThread));
  const int64_t n_chunks = (n_row_tiles + chunk_tiles - 1) / chunk_tiles;
  std::atomic<int64_t> next_chunk{0};
  pool.Run([&](int ith, int) {
    if (ith >= useful_threads) return;
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_chunks) break;
      RunSlab(*k, w, acts, c * chunk_tiles, std::min(n_row_tiles, (c + 1) * chunk_tiles), y);
    }
  });
}

}  // namespace lifeline::kernels
