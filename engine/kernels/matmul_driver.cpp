#include "engine/kernels/matmul_driver.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "base/check.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/glu.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/op_profile.h"
#include "engine/kernels/ref/vec_dot_ref.h"

namespace lifeline::kernels {
namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs a
// few microseconds, more than the work itself (tiny models, the logits of a 64-wide model).
constexpr int64_t kMinMacsPerThread = int64_t{1} << 16;
// Quantizing fewer values than this is not worth a pool round trip.
constexpr int64_t kMinValuesParallelQuantize = int64_t{1} << 15;
// Row chunks per thread for the dynamic split (see RunGroupTiles), and the row multiple
// chunk boundaries keep (a multiple of every tile kernel's max_rows).
constexpr int64_t kChunksPerThread = 8;
constexpr int64_t kChunkQuantumRows = 16;
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

// w: the first of nr / 16 interleaved groups.
template <GgmlType kType>
void ScalarInterleavedTileT(const uint8_t* w, uint64_t row_bytes, int nr,
                            const QuantizedActs& acts, int64_t t0, int nt, float* y, int64_t ldy) {
  const WeightMatrix m{kType, w, nr, acts.cols(), row_bytes, WeightLayout::kInterleaved16};
  std::vector<uint8_t> row(row_bytes);
  for (int r = 0; r < nr; ++r) {
    DeinterleaveRow(m, r, row.data());
    ScalarTileFn(kType, row.data(), row_bytes, 1, acts, t0, nt, y + r, ldy);
  }
}

// Rows [r0, r1) of w (r0 a multiple of k.max_rows, or the rows run one by one in the last
// partial tile), all tokens.
void RunRows(const TileKernel& k, const WeightMatrix& w, const QuantizedActs& acts, int64_t r0,
             int64_t r1, float* y, int64_t ldy) {
  const int64_t n_tokens = acts.n_tokens();
  const int64_t chunk_raw =
      kTokenChunkBytes / std::max<int64_t>(1, w.cols * ActBytesPerValue(acts.format()));
  const int64_t chunk = std::max<int64_t>(k.max_tokens, chunk_raw / k.max_tokens * k.max_tokens);
  const int64_t r_end = std::min(w.rows, r1);
  if (k.any_rows && n_tokens <= k.max_tokens) {  // one token tile: no weight reuse to arrange
    if (r0 < r_end) {
      k.fn(w.data + static_cast<uint64_t>(r0) * w.row_bytes, w.row_bytes,
           static_cast<int>(r_end - r0), acts, 0, static_cast<int>(n_tokens), y + r0, ldy);
    }
    return;
  }
  for (int64_t tc = 0; tc < n_tokens; tc += chunk) {
    const int64_t tc_end = std::min(n_tokens, tc + chunk);
    for (int64_t r = r0; r < r_end; r += k.max_rows) {
      const int nr = static_cast<int>(std::min<int64_t>(k.max_rows, r_end - r));
      const uint8_t* wr = w.data + static_cast<uint64_t>(r) * w.row_bytes;
      for (int64_t t = tc; t < tc_end; t += k.max_tokens) {
        const int nt = static_cast<int>(std::min<int64_t>(k.max_tokens, tc_end - t));
        k.fn(wr, w.row_bytes, nr, acts, t, nt, y + t * ldy + r, ldy);
      }
    }
  }
}

// 64-byte aligned view of a per-thread buffer that grows to the largest request and is kept
// for the thread's life: prefill calls would otherwise map and fault in megabytes of fresh
// pages per matmul. Decode never touches these buffers.
uint8_t* ThreadScratch(std::vector<uint8_t>& buf, uint64_t bytes) {
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  return buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
}

uint64_t RoundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

bool HasGemm(const GemmKernel& g, const WeightMatrix& w) {
  const bool packs = w.layout == WeightLayout::kRows ? g.pack != nullptr
                                                     : g.pack_interleaved != nullptr;
  return packs && (g.run != nullptr || g.run_group != nullptr);
}

// The packed path: threads take tiles of kGemmRows rows from a shared counter, pack each
// into their own scratch once and run every token past it. With a token-interleaved kernel
// (g.run_group) the activations are first packed once per call, in groups, split over the
// threads; every tile then streams the groups in order (one sequential stream).
void RunGemm(const GemmKernel& g, const WeightMatrix& w, const QuantizedActs& acts,
             int64_t useful_threads, float* y, int64_t ldy, ComputePool& pool) {
  const int64_t n_tiles = (w.rows + kGemmRows - 1) / kGemmRows;
  const uint64_t scratch_bytes = g.packed_bytes(w.cols);
  const int64_t n_tokens = acts.n_tokens();
  const bool grouped = g.run_group != nullptr;
  const int64_t group_tokens = grouped ? g.group_tokens : 1;
  const int64_t n_groups = (n_tokens + group_tokens - 1) / group_tokens;
  const uint64_t group_bytes = grouped ? RoundUp64(g.act_group_bytes(w.cols)) : 0;
  static thread_local std::vector<uint8_t> act_buf;
  uint8_t* packed_acts =
      grouped ? ThreadScratch(act_buf, group_bytes * static_cast<uint64_t>(n_groups)) : nullptr;
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t gi = g0; gi < g1; ++gi) {
      const int64_t t0 = gi * group_tokens;
      const int nt = static_cast<int>(std::min<int64_t>(group_tokens, n_tokens - t0));
      g.pack_acts(acts, t0, nt, packed_acts + static_cast<uint64_t>(gi) * group_bytes);
    }
  };
  // With a two-tile kernel a thread takes tiles in pairs: each activation quad it loads then
  // serves 32 rows (one broadcast, two vpdpbusd), halving the activation loads per product.
  const int64_t take = grouped && g.run_group2 != nullptr ? 2 : 1;
  const uint64_t tile_stride = RoundUp64(scratch_bytes);
  std::atomic<int64_t> next_tile{0};
  auto work = [&] {
    static thread_local std::vector<uint8_t> w_buf;
    uint8_t* p = ThreadScratch(w_buf, tile_stride * static_cast<uint64_t>(take));
    for (;;) {
      const int64_t tile0 = next_tile.fetch_add(take, std::memory_order_relaxed);
      if (tile0 >= n_tiles) break;
      const int64_t tile1 = std::min(n_tiles, tile0 + take);
      for (int64_t tile = tile0; tile < tile1; ++tile) {
        const int64_t r0 = tile * kGemmRows;
        const int nr = static_cast<int>(std::min<int64_t>(kGemmRows, w.rows - r0));
        const uint8_t* wr = w.data + static_cast<uint64_t>(r0) * w.row_bytes;
        uint8_t* pt = p + static_cast<uint64_t>(tile - tile0) * tile_stride;
        if (w.layout == WeightLayout::kRows) {
          g.pack(wr, w.row_bytes, nr, w.cols, pt);
        } else {  // rows % 16 == 0: nr == kGemmRows
          g.pack_interleaved(wr, w.row_bytes, w.cols, pt);
        }
        if (!grouped) g.run(pt, nr, acts, 0, n_tokens, y + r0, ldy);
      }
      if (!grouped) continue;
      const int64_t r0 = tile0 * kGemmRows;
      const int nr_last = static_cast<int>(std::min<int64_t>(kGemmRows, w.rows - (tile1 - 1) * kGemmRows));
      for (int64_t gi = 0; gi < n_groups; ++gi) {
        const int64_t t0 = gi * group_tokens;
        const int nt = static_cast<int>(std::min<int64_t>(group_tokens, n_tokens - t0));
        const uint8_t* pa = packed_acts + static_cast<uint64_t>(gi) * group_bytes;
        if (tile1 - tile0 == 2) {  // the first tile of a pair is whole
          g.run_group2(p, p + tile_stride, nr_last, pa, nt, w.cols, y + t0 * ldy + r0, ldy);
        } else {
          g.run_group(p, nr_last, pa, nt, w.cols, y + t0 * ldy + r0, ldy);
        }
      }
    }
  };
  if (useful_threads <= 1) {
    if (grouped) pack_groups(0, n_groups);
    work();
    return;
  }
  if (grouped) {
    pool.Run([&](int ith, int nth) {
      int64_t g0, g1;
      ComputePool::Split(n_groups, ith, nth, &g0, &g1);
      pack_groups(g0, g1);
    });
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
  k.any_rows = true;  // ScalarTileFn loops over any nr
  switch (type) {
    case GgmlType::kF32: k.fn = &ScalarTileT<GgmlType::kF32>; break;
    case GgmlType::kF16: k.fn = &ScalarTileT<GgmlType::kF16>; break;
    case GgmlType::kBF16: k.fn = &ScalarTileT<GgmlType::kBF16>; break;
    case GgmlType::kQ4_0: k.fn = &ScalarTileT<GgmlType::kQ4_0>; break;
    case GgmlType::kQ4_1: k.fn = &ScalarTileT<GgmlType::kQ4_1>; break;
    case GgmlType::kQ5_0: k.fn = &ScalarTileT<GgmlType::kQ5_0>; break;
    case GgmlType::kQ5_1: k.fn = &ScalarTileT<GgmlType::kQ5_1>; break;
    case GgmlType::kQ8_0: k.fn = &ScalarTileT<GgmlType::kQ8_0>; break;
    case GgmlType::kIQ4_NL: k.fn = &ScalarTileT<GgmlType::kIQ4_NL>; break;
    case GgmlType::kQ2_K: k.fn = &ScalarTileT<GgmlType::kQ2_K>; break;
    case GgmlType::kQ3_K: k.fn = &ScalarTileT<GgmlType::kQ3_K>; break;
    case GgmlType::kQ4_K: k.fn = &ScalarTileT<GgmlType::kQ4_K>; break;
    case GgmlType::kQ5_K: k.fn = &ScalarTileT<GgmlType::kQ5_K>; break;
    case GgmlType::kQ6_K: k.fn = &ScalarTileT<GgmlType::kQ6_K>; break;
    default: k.fn = nullptr; break;
  }
  return k;
}

TileKernel ScalarInterleavedTile(GgmlType type) {
  TileKernel k;
  k.max_rows = kInterleaveRows;
  k.max_tokens = 4;
  k.any_rows = true;
  switch (type) {
    case GgmlType::kQ4_0: k.fn = &ScalarInterleavedTileT<GgmlType::kQ4_0>; break;
    case GgmlType::kQ4_1: k.fn = &ScalarInterleavedTileT<GgmlType::kQ4_1>; break;
    case GgmlType::kQ5_0: k.fn = &ScalarInterleavedTileT<GgmlType::kQ5_0>; break;
    case GgmlType::kQ5_1: k.fn = &ScalarInterleavedTileT<GgmlType::kQ5_1>; break;
    case GgmlType::kQ8_0: k.fn = &ScalarInterleavedTileT<GgmlType::kQ8_0>; break;
    case GgmlType::kQ4_K: k.fn = &ScalarInterleavedTileT<GgmlType::kQ4_K>; break;
    case GgmlType::kQ5_K: k.fn = &ScalarInterleavedTileT<GgmlType::kQ5_K>; break;
    case GgmlType::kQ6_K: k.fn = &ScalarInterleavedTileT<GgmlType::kQ6_K>; break;
    case GgmlType::kQ2_K: k.fn = &ScalarInterleavedTileT<GgmlType::kQ2_K>; break;
    case GgmlType::kQ3_K: k.fn = &ScalarInterleavedTileT<GgmlType::kQ3_K>; break;
    case GgmlType::kIQ4_NL: k.fn = &ScalarInterleavedTileT<GgmlType::kIQ4_NL>; break;
    case GgmlType::kF16: k.fn = &ScalarInterleavedTileT<GgmlType::kF16>; break;
    case GgmlType::kBF16: k.fn = &ScalarInterleavedTileT<GgmlType::kBF16>; break;
    default: k.fn = nullptr; break;
  }
  return k;
}

namespace {
// ScalarInterleavedTile per type id, built once (the driver keeps pointers to tiles).
const TileKernel& ScalarInterleaved(GgmlType type) {
  static const auto* table = [] {
    auto* t = new TileKernel[kMaxTypeId + 1];
    for (uint32_t id = 0; id <= kMaxTypeId; ++id) {
      if (const auto traits = GetTypeTraits(id)) t[id] = ScalarInterleavedTile(traits->type);
    }
    return t;
  }();
  return table[static_cast<uint32_t>(type)];
}
}  // namespace

uint32_t InterleavedTypes(const MatmulImpl& impl) {
  uint32_t bits = 0;
  for (uint32_t id = 0; id <= kMaxTypeId; ++id) {
    if (impl.tiles_interleaved[id].fn != nullptr) bits |= 1u << id;
  }
  return bits;
}

MatmulImpl MakeScalarImpl() {
  MatmulImpl impl;
  impl.isa = IsaLevel::kScalar;
  for (uint32_t id = 0; id <= kMaxTypeId; ++id) {
    const auto traits = GetTypeTraits(id);
    if (traits && ref::HasVecDot(traits->type)) impl.tiles[id] = ScalarTile(traits->type);
  }
  for (auto& q : impl.quantize) q = &ref::QuantizeToken;
  impl.silu_glu = &ref::SiluGlu;
  impl.gelu_glu = &ref::GeluTanhGlu;
  return impl;
}

void QuantizeActs(const MatmulImpl& impl, ActFormat format, const float* x, int64_t n_tokens,
                  int64_t cols, QuantizedActs& acts, ComputePool& pool, const Prologue& prologue) {
  acts.Reset(format, n_tokens, cols, x);
  const QuantizeTokenFn quantize =
      format == ActFormat::kF32 ? nullptr : impl.quantize[static_cast<int>(format)];
  if (quantize == nullptr && prologue.fn == nullptr) return;  // f32: borrowed as is
  // Token by token, so a row the prologue just wrote is quantized while it is in L1.
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (prologue.fn != nullptr) prologue.fn(prologue.ctx, t, t + 1);
      if (quantize != nullptr) quantize(x + t * cols, acts, t);
    }
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

namespace {

// The pool owner's activation scratch, reused by every product it runs (a decode step runs
// a hundred or more; allocating per call showed up as malloc/free in profiles). One per
// thread: several engines may own pools on different threads.
QuantizedActs& ActScratch() {
  thread_local QuantizedActs acts;
  return acts;
}

void RunEpilogueAll(const MatmulGroup& g) {
  if (g.epilogue == nullptr) return;
  if (g.row_aligned) {
    g.epilogue(g.epilogue_ctx, -1, 0, g.w[0].rows);
  } else {
    for (int i = 0; i < g.n; ++i) g.epilogue(g.epilogue_ctx, i, 0, g.w[i].rows);
  }
}

}  // namespace

namespace {

// The tiled path of a fusable group: one pool round trip for every matrix. Threads take
// chunks of rows from a shared counter rather than one fixed slab each: on a machine shared
// with other work a descheduled thread then delays only the chunk it holds, not half of the
// work. Chunks stay large (a few per thread) so each one streams long contiguous runs of
// weights. Decode (one token tile) is the exception, one slab per thread: see below.
// Results do not depend on who computes which chunk.
void RunGroupTiles(const MatmulGroup& g, const TileKernel* const* k, const QuantizedActs& acts,
                   ComputePool& pool) {
  const int64_t n_tokens = acts.n_tokens();
  // Chunk and piece edges fall on multiples of this many rows of a matrix.
  const int64_t quantum = std::max(kChunkQuantumRows, g.epilogue_rows);
  int64_t total_rows = 0;  // rows walked by the chunk counter
  int64_t all_rows = 0;    // rows of every matrix (the work)
  for (int i = 0; i < g.n; ++i) all_rows += g.w[i].rows;
  total_rows = g.row_aligned ? g.w[0].rows : all_rows;
  if (total_rows == 0) return;
  const int64_t macs = all_rows * acts.cols() * n_tokens;
  const int64_t useful_threads = std::min<int64_t>(
      {pool.n_threads(), std::max<int64_t>(1, macs / kMinMacsPerThread),
       (total_rows + quantum - 1) / quantum});
  const int64_t per_chunk = total_rows / (useful_threads * kChunksPerThread);
  const int64_t chunk_rows = std::max<int64_t>(1, (per_chunk + quantum - 1) / quantum) * quantum;
  // first[i]: index of matrix i's first chunk (concatenated order); first[g.n]: the count.
  int64_t first[MatmulGroup::kMaxMatrices + 1] = {};
  if (g.row_aligned) {
    first[1] = (g.w[0].rows + chunk_rows - 1) / chunk_rows;
  } else {
    for (int i = 0; i < g.n; ++i) first[i + 1] = first[i] + (g.w[i].rows + chunk_rows - 1) / chunk_rows;
  }
  const int64_t n_chunks = g.row_aligned ? first[1] : first[g.n];
  // Rows [r0, r1) of matrix i (of all matrices when row_aligned: i is then ignored) and their
  // epilogue.
  auto do_rows = [&](int i, int64_t r0, int64_t r1) {
    if (g.row_aligned) {
      for (int j = 0; j < g.n; ++j) RunRows(*k[j], g.w[j], acts, r0, r1, g.y[j], g.Ldy(j));
      if (g.epilogue != nullptr) g.epilogue(g.epilogue_ctx, -1, r0, r1);
      return;
    }
    RunRows(*k[i], g.w[i], acts, r0, r1, g.y[i], g.Ldy(i));
    if (g.epilogue != nullptr) g.epilogue(g.epilogue_ctx, i, r0, r1);
  };
  auto do_chunk = [&](int64_t c) {
    if (g.row_aligned) {
      const int64_t r0 = c * chunk_rows;
      do_rows(0, r0, std::min(g.w[0].rows, r0 + chunk_rows));  // i ignored when row_aligned
      return;
    }
    int i = 0;
    while (c >= first[i + 1]) ++i;
    const int64_t r0 = (c - first[i]) * chunk_rows;
    do_rows(i, r0, std::min(g.w[i].rows, r0 + chunk_rows));
  };
  if (useful_threads <= 1) {
    for (int64_t c = 0; c < n_chunks; ++c) do_chunk(c);
    return;
  }
  if (n_tokens <= k[0]->max_tokens) {
    // Decode (one token tile per row): one contiguous slab of the concatenated rows per
    // thread, equal in size, crossing matrix boundaries, each walked front to back (below).
    // Handing out chunks from one shared counter instead made every thread start many cold
    // weight streams whose last prefetches ran into rows another thread computes; at decode
    // sizes (8 chunks per thread made a 110M matrix ~40 KiB a chunk) that cost up to a
    // quarter of Q4_0 decode speed. Prefill keeps the shared counter: it reuses each weight
    // tile across many tokens, so stream edges do not matter there.
    const int n_mats = g.row_aligned ? 1 : g.n;
    int64_t off[MatmulGroup::kMaxMatrices + 1] = {};  // first concatenated row of matrix i
    for (int i = 0; i < n_mats; ++i) off[i + 1] = off[i] + g.w[i].rows;
    // A concatenated row rounded down to a multiple of quantum rows of its own matrix.
    auto align = [&](int64_t b) {
      if (b >= total_rows) return total_rows;
      int i = 0;
      while (b >= off[i + 1]) ++i;
      return off[i] + (b - off[i]) / quantum * quantum;
    };
    // Concatenated rows [c0, c1) split at matrix boundaries.
    auto do_span = [&](int64_t c0, int64_t c1) {
      for (int i = 0; i < n_mats; ++i) {
        const int64_t r0 = std::max<int64_t>(c0, off[i]) - off[i];
        const int64_t r1 = std::min<int64_t>(c1, off[i + 1]) - off[i];
        if (r0 < r1) do_rows(i, r0, r1);  // row_aligned: n_mats == 1, i ignored
      }
    };
    // Each thread walks its own slab front to back in pieces; one that runs out takes pieces
    // from the back of the others' slabs, so a thread that is slowed down (a noisy neighbour
    // on its core, a late wake-up) costs the op only the piece it holds.
    // Measured against fixed slabs, alternating, quiet machine (tg128, two threads): 110M
    // Q8_0 +15-39 %, 1.1B Q8_0 +8-15 %, 110M Q4_0 and 1.1B Q4_0 within noise to +4 %.
    // A piece is about kStealBytes of one matrix's rows (never under kMinStealRows): every
    // piece restarts a weight stream (and a gate+up piece two), whose first units arrive
    // before the software prefetch is ahead of them. Against fixed 64-row pieces, alternating
    // (tg128, two threads): 110M Q8_0 516-551 -> 580-583 tok/s, 110M Q4_0 750-766 -> 823-857,
    // 1.1B Q4_K_M gate+up 59-66 -> 68-70 GB/s (tg 94-102 -> 102-105), 1.1B Q4_0 and Q8_0
    // within noise; 512 KiB pieces were no better than 256.
    constexpr int64_t kStealBytes = 256 * 1024;
    constexpr int64_t kMinStealRows = 64;
    uint64_t max_row_bytes = 1;
    for (int i = 0; i < g.n; ++i) max_row_bytes = std::max(max_row_bytes, g.w[i].row_bytes);
    const int64_t steal_rows = std::max<int64_t>(
        (kMinStealRows + quantum - 1) / quantum * quantum,
        kStealBytes / static_cast<int64_t>(max_row_bytes) / quantum * quantum);
    // Piece sizes shrink as a slab runs out (guided scheduling): a take hands out half of
    // what is left of the slab, at most steal_rows and at least min_rows (~kMinGuidedBytes).
    // The threads then meet in small pieces at the end of a product instead of one waiting
    // for the other's last 256 KiB piece. The owner's pieces stay contiguous, so shrinking
    // costs it a take per piece, not a stream restart. Measured with a temporary timer on
    // both threads (1.1B, tg64, two threads): the mean gap between the threads' finishing
    // times fell from 3.8-5.9 us to 2.3-3.1 us per product (16 / 32 / 128 KiB minimum:
    // 1.9-2.6 / 2.1-2.5 / 2.7-3.9 us); two binaries alternated, 6-8 rounds each, tg64 median
    // ratios 1.1B Q4_0 1.02 / 1.04, Q8_0 1.01 / 1.01, Q4_K_M 1.00.
    constexpr int64_t kMinGuidedBytes = 64 * 1024;
    const int64_t guided_rows =
        kMinGuidedBytes / static_cast<int64_t>(max_row_bytes) / quantum * quantum;
    const int64_t min_rows = std::min<int64_t>(steal_rows, std::max<int64_t>(quantum, guided_rows));
    const uint64_t steal_q = static_cast<uint64_t>(steal_rows / quantum);
    const uint64_t min_q = static_cast<uint64_t>(min_rows / quantum);
    // Front and back of a slab in one atomic word, in quanta of `quantum` rows from b0
    // (front low 32 bits, back high).
    struct alignas(64) Slab {
      std::atomic<uint64_t> fb{0};
      int64_t b0 = 0, b1 = 0;
    };
    constexpr int64_t kMaxSlabs = 64;  // threads beyond this many stay idle in decode
    Slab slabs[kMaxSlabs];
    const int64_t n_slabs = std::min<int64_t>(useful_threads, kMaxSlabs);
    for (int64_t j = 0; j < n_slabs; ++j) {
      slabs[j].b0 = j == 0 ? 0 : align(total_rows * j / n_slabs);
      slabs[j].b1 = j + 1 == n_slabs ? total_rows : align(total_rows * (j + 1) / n_slabs);
      const uint64_t quanta = static_cast<uint64_t>(
          (slabs[j].b1 - slabs[j].b0 + quantum - 1) / quantum);
      slabs[j].fb.store(quanta << 32, std::memory_order_relaxed);
    }
    auto take = [&](Slab& sl, bool from_front, int64_t* c0, int64_t* c1) {
      uint64_t v = sl.fb.load(std::memory_order_relaxed);
      for (;;) {
        const uint64_t front = v & 0xffffffffu, back = v >> 32;
        if (front >= back) return false;
        const uint64_t left = back - front;
        const uint64_t size = std::min(left, std::min(steal_q, std::max(min_q, left / 2)));
        const uint64_t nv = from_front ? v + size : v - (size << 32);
        if (sl.fb.compare_exchange_weak(v, nv, std::memory_order_relaxed)) {
          const uint64_t q0 = from_front ? front : back - size;
          const auto row = [&](uint64_t q) {
            return std::min(sl.b1, align(sl.b0 + static_cast<int64_t>(q) * quantum));
          };
          *c0 = std::max(sl.b0, row(q0));
          *c1 = row(q0 + size);
          return true;
        }
      }
    };
    pool.Run([&](int ith, int) {
      if (ith >= n_slabs) return;
      int64_t c0, c1;
      while (take(slabs[ith], true, &c0, &c1)) do_span(c0, c1);
      for (int64_t j = 1; j < n_slabs; ++j) {
        Slab& other = slabs[(ith + j) % n_slabs];
        while (take(other, false, &c0, &c1)) do_span(c0, c1);
      }
    });
    return;
  }
  std::atomic<int64_t> next_chunk{0};
  pool.Run([&](int ith, int) {
    if (ith >= useful_threads) return;
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_chunks) break;
      do_chunk(c);
    }
  });
}

// The epilogue over all rows after products that did not run chunk by chunk, split over
// the pool when there are enough rows.
void RunEpilogueSplit(const MatmulGroup& g, int64_t n_tokens, ComputePool& pool) {
  if (g.epilogue == nullptr) return;
  const int n_mats = g.row_aligned ? 1 : g.n;
  int64_t values = 0;
  for (int i = 0; i < n_mats; ++i) values += g.w[i].rows * n_tokens;
  if (pool.n_threads() == 1 || values < kMinValuesParallelQuantize) {
    RunEpilogueAll(g);
    return;
  }
  // Split in whole multiples of epilogue_rows (MatmulGroup's contract).
  const int64_t unit = std::max<int64_t>(1, g.epilogue_rows);
  pool.Run([&](int ith, int nth) {
    for (int i = 0; i < n_mats; ++i) {
      int64_t u0, u1;
      ComputePool::Split((g.w[i].rows + unit - 1) / unit, ith, nth, &u0, &u1);
      const int64_t r0 = u0 * unit, r1 = std::min(g.w[i].rows, u1 * unit);
      if (r0 < r1) g.epilogue(g.epilogue_ctx, g.row_aligned ? -1 : i, r0, r1);
    }
  });
}

}  // namespace

void MatmulWithStride(MatmulFn matmul, const WeightMatrix& w, const float* x, int64_t n_tokens,
                      float* y, int64_t ldy, ComputePool& pool) {
  if (ldy == w.rows || n_tokens <= 1) {
    matmul(w, x, n_tokens, y, pool);
    return;
  }
  thread_local std::vector<float> dense;
  dense.resize(static_cast<size_t>(n_tokens * w.rows));
  matmul(w, x, n_tokens, dense.data(), pool);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::copy_n(dense.data() + t * w.rows, w.rows, y + t * ldy);
  }
}

void RunMatmulGroup(const MatmulImpl& impl, const MatmulGroup& g, const float* x,
                    int64_t n_tokens, ComputePool& pool) {
  LL_CHECK(g.n >= 1 && g.n <= MatmulGroup::kMaxMatrices);
  LL_CHECK(g.epilogue_rows >= 0 && g.epilogue_rows % kChunkQuantumRows == 0);
  for (int i = 0; i < g.n; ++i) LL_CHECK(g.ldy[i] == 0 || g.ldy[i] >= g.w[i].rows);
  const int64_t cols = g.w[0].cols;
  const ActFormat format = ActFormatFor(g.w[0].type);
  const TileKernel* k[MatmulGroup::kMaxMatrices] = {};
  bool fusable = true;
  for (int i = 0; i < g.n; ++i) {
    LL_CHECK(g.w[i].cols == cols);
    LL_CHECK(!g.row_aligned || g.w[i].rows == g.w[0].rows);
    const auto id = static_cast<uint32_t>(g.w[i].type);
    k[i] = id <= kMaxTypeId ? &impl.tiles[id] : nullptr;
    if (g.w[i].layout == WeightLayout::kInterleaved16) {
      LL_CHECK(g.w[i].rows % kInterleaveRows == 0);
      k[i] = id <= kMaxTypeId && impl.tiles_interleaved[id].fn != nullptr
                 ? &impl.tiles_interleaved[id]
                 : &ScalarInterleaved(g.w[i].type);
    }
    if (k[i] == nullptr || k[i]->fn == nullptr || ActFormatFor(g.w[i].type) != format) {
      fusable = false;
    }
  }
  if (!fusable) {
    // Each matrix on its own, with its best kernel (or the reference one when it has none).
    if (g.prologue != nullptr && n_tokens > 0) g.prologue(g.prologue_ctx, 0, n_tokens);
    for (int i = 0; i < g.n; ++i) {
      if (k[i] != nullptr && k[i]->fn != nullptr) {
        MatmulGroup one;
        one.n = 1;
        one.w[0] = g.w[i];
        one.y[0] = g.y[i];
        one.ldy[0] = g.ldy[i];
        RunMatmulGroup(impl, one, x, n_tokens, pool);
      } else {
        MatmulWithStride(ReferenceKernels().matmul, g.w[i], x, n_tokens, g.y[i], g.Ldy(i), pool);
      }
    }
    if (n_tokens > 0) RunEpilogueSplit(g, n_tokens, pool);
    return;
  }
  if (n_tokens == 0) return;
  LL_CHECK(cols % ActBlockElems(format) == 0);

  QuantizedActs& acts = ActScratch();
  {
    const OpStageTimer timer("activation quantization (+ fused RMSNorm)");
    QuantizeActs(impl, format, x, n_tokens, cols, acts, pool, Prologue{g.prologue, g.prologue_ctx});
  }

  bool any_gemm = false;
  for (int i = 0; i < g.n; ++i) {
    const GemmKernel& gk = impl.gemm[static_cast<uint32_t>(g.w[i].type)];
    any_gemm = any_gemm || (HasGemm(gk, g.w[i]) && n_tokens >= gk.min_tokens);
  }
  if (!any_gemm) {
    RunGroupTiles(g, k, acts, pool);
    return;
  }
  // Long prompts: the packed GEMM per matrix (its own pool round trip each; the quantized
  // activations are still shared), then the epilogue.
  for (int i = 0; i < g.n; ++i) {
    const WeightMatrix& w = g.w[i];
    if (w.rows == 0) continue;
    const GemmKernel& gk = impl.gemm[static_cast<uint32_t>(w.type)];
    if (HasGemm(gk, w) && n_tokens >= gk.min_tokens) {
      const int64_t macs = w.rows * w.cols * n_tokens;
      const int64_t n_tiles = (w.rows + kGemmRows - 1) / kGemmRows;
      const int64_t threads = std::min<int64_t>(
          {pool.n_threads(), n_tiles, std::max<int64_t>(1, macs / kMinMacsPerThread)});
      RunGemm(gk, w, acts, threads, g.y[i], g.Ldy(i), pool);
    } else {
      MatmulGroup one;
      one.n = 1;
      one.w[0] = w;
      one.y[0] = g.y[i];
      one.ldy[0] = g.ldy[i];
      const TileKernel* ki[1] = {k[i]};
      RunGroupTiles(one, ki, acts, pool);
    }
  }
  RunEpilogueSplit(g, n_tokens, pool);
}

void RunMatmul(const MatmulImpl& impl, const WeightMatrix& w, const float* x, int64_t n_tokens,
               float* y, ComputePool& pool) {
  MatmulGroup g;
  g.n = 1;
  g.w[0] = w;
  g.y[0] = y;
  RunMatmulGroup(impl, g, x, n_tokens, pool);
}

}  // namespace lifeline::kernels

namespace lifeline {

namespace {

void RunMatmulGroupUntimed(const KernelTable& table, const MatmulGroup& g, const float* x,
                           int64_t n_tokens, ComputePool& pool) {
  if (table.matmul_group != nullptr) {
    table.matmul_group(g, x, n_tokens, pool);
    return;
  }
  if (n_tokens == 0) return;
  if (g.prologue != nullptr) g.prologue(g.prologue_ctx, 0, n_tokens);
  for (int i = 0; i < g.n; ++i) {
    kernels::MatmulWithStride(table.matmul, g.w[i], x, n_tokens, g.y[i], g.Ldy(i), pool);
  }
  if (g.epilogue == nullptr) return;
  if (g.row_aligned) {
    g.epilogue(g.epilogue_ctx, -1, 0, g.w[0].rows);
  } else {
    for (int i = 0; i < g.n; ++i) g.epilogue(g.epilogue_ctx, i, 0, g.w[i].rows);
  }
}

}  // namespace

void RunMatmulGroup(const KernelTable& table, const MatmulGroup& g, const float* x,
                    int64_t n_tokens, ComputePool& pool) {
  OpProfile* profile = CurrentOpProfile();
  if (profile == nullptr) {
    RunMatmulGroupUntimed(table, g, x, n_tokens, pool);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  RunMatmulGroupUntimed(table, g, x, n_tokens, pool);
  profile->Add(g, n_tokens,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace lifeline
