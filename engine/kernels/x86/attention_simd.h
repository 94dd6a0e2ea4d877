// The SIMD attention kernel's skeleton, shared by x86/attention_avx2.cpp and
// x86/attention_avx512.cpp. Each includer supplies an `Isa` policy (vector width, row loads,
// block scores, softmax step, V accumulation) compiled with its own flags. Everything here
// is in an anonymous namespace so that no copy compiled for one ISA can be picked by the
// linker for another; for the same reason it calls no std:: algorithm templates (their
// out-of-line instances are shared across files) and uses plain loops instead.
//
// Per call (one KV head, a tile of consecutive query tokens x n_group heads):
//   - q rows are copied once into zero-padded f32 rows (width rounded up to whole vectors);
//   - positions are walked in steps of Isa::kStepSlots (16 for AVX2, 64 for AVX-512) at
//     fixed boundaries (multiples of the step), each position read through its own KV block;
//     a step's K and V rows of this head are converted once to zero-padded f32 rows (F16 via
//     F16C, Q8_0 by scale x int8);
//   - every query row that sees the step computes its scores (one lane per position),
//     soft-caps them when asked, masks the causally invisible positions (and those before a
//     sliding window), updates its running max and denominator (online softmax), and folds
//     p . V into its f32 accumulator;
//   - with a sliding window nothing before the block of the tile's first visible position is
//     read: earlier blocks may already belong to another sequence.
//   - the accumulators are divided by the denominators and written out.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "engine/kernels/attention_kernels.h"

namespace lifeline::kernels {
namespace {

inline int64_t MinI(int64_t a, int64_t b) { return a < b ? a : b; }

// KV blocks whose rows are prefetched ahead of the block being read. In decode the cache
// rows were written one token ago and the weights streamed since have evicted them: without
// prefetch each K/V row load waited on DRAM (85 % of this kernel's time in a decode profile
// of the 110M model; 11 % of all decode time there).
constexpr int64_t kPrefetchBlocks = 2;

// Query rows whose steps are interleaved (AttendSimd's block loop).
constexpr int kChunkRows = 4;

// One cache line into L1. Inline asm, not _mm_prefetch: GCC 12 deleted the intrinsic's loops
// below as dead code (their only effect is the prefetch), leaving no prefetch at all.
inline void PrefetchLine(const uint8_t* p) {
  __asm__ volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(p)));
}

// Every cache line of n rows of row_bytes, stride apart: one run when they are contiguous
// (the KV storage's layout), else row by row.
inline void PrefetchRows(const uint8_t* p, uint64_t stride, int64_t row_bytes, int64_t n) {
  if (stride == static_cast<uint64_t>(row_bytes)) {
    row_bytes *= n;
    n = 1;
  }
  for (int64_t r = 0; r < n; ++r, p += stride) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(row_bytes);
    for (uintptr_t line = first; line < end; line += 64) {
      PrefetchLine(reinterpret_cast<const uint8_t*>(line));
    }
  }
}

inline void Fill(float* p, int64_t n, float v) {
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

template <class Isa>
void AttendSimd(const AttnKvView& kv, const AttnShape& s, const AttnTile& tile,
                AttnScratch& scratch) {
  LL_CHECK(kv.block_tokens >= 1 && kv.block_tokens <= kAttnMaxBlockTokens);
  LL_CHECK(s.n_group >= 1 && s.head_dim_k >= 1 && s.head_dim_v >= 1);
  LL_CHECK(tile.n_tokens >= 0 && tile.pos0 >= 0 && s.window >= 0);
  if (tile.n_tokens == 0) return;
  constexpr int64_t W = Isa::kLanes;
  constexpr int64_t S = Isa::kStepSlots;  // positions per step, a multiple of 16
  const int64_t hk = (s.head_dim_k + W - 1) / W * W;
  const int64_t hv = (s.head_dim_v + W - 1) / W * W;
  const int64_t rows = tile.n_tokens * s.n_group;
  const int64_t bt = kv.block_tokens;

  // Scratch: K step [S][hk], V step [S][hv], q rows [rows][hk], accumulators [rows][hv],
  // running max and denominator [rows], step probabilities [kChunkRows][S], and with
  // Isa::kTransposedK the K step transposed per 16 positions, [S / 16][hk][16].
  constexpr bool kT = Isa::kTransposedK;
  const size_t n_floats = static_cast<size_t>(S * (hk + hv) + rows * (hk + hv + 2) +
                                              kChunkRows * S + (kT ? S * hk : 0));
  float* kf = scratch.Grow(n_floats);
  float* vf = kf + S * hk;
  float* qs = vf + S * hv;
  float* acc = qs + rows * hk;
  float* run_max = acc + rows * hv;
  float* run_den = run_max + rows;
  float* p = run_den + rows;
  float* kft = p + kChunkRows * S;  // kTransposedK only
  Fill(acc, rows * hv, 0.0f);
  for (int64_t i = 0; i < tile.n_tokens; ++i) {
    for (int64_t j = 0; j < s.n_group; ++j) {
      const int64_t r = i * s.n_group + j;
      const float* q = tile.q + i * tile.q_token_stride + j * s.head_dim_k;
      std::memcpy(qs + r * hk, q, static_cast<size_t>(s.head_dim_k) * sizeof(float));
      Fill(qs + r * hk + s.head_dim_k, hk - s.head_dim_k, 0.0f);
      run_max[r] = -__builtin_inff();
      run_den[r] = 0.0f;
    }
  }

  const int64_t last_pos = tile.pos0 + tile.n_tokens - 1;
  // Positions the kernel may read: from the first block the tile's first token sees (the
  // window's earlier blocks may already belong to another sequence).
  const int64_t read_first = AttnFirstVisible(tile.pos0, s.window) / bt * bt;
  const int64_t k_bytes = AttnKvHeadBytes(kv.type, s.head_dim_k);
  const int64_t v_bytes = AttnKvHeadBytes(kv.type, s.head_dim_v);
  // Steps cover positions [k S, (k + 1) S): fixed boundaries, so a token's online softmax
  // goes through the same steps whatever tile it is computed in.
  const int64_t step_first = read_first / S;
  const int64_t n_steps = last_pos / S + 1;
  // Every cache line of positions [p0, p1)'s K and V rows, block by block.
  auto prefetch = [&](int64_t p0, int64_t p1) {
    for (int64_t pos = p0; pos < p1;) {
      const int64_t b = pos / bt;
      const int64_t n = MinI(p1, (b + 1) * bt) - pos;
      const uint64_t block = static_cast<uint64_t>(kv.blocks[b]);
      const uint64_t slot = static_cast<uint64_t>(pos - b * bt);
      PrefetchRows(kv.k_head + block * kv.k_block_bytes + slot * kv.k_row_bytes, kv.k_row_bytes,
                   k_bytes, n);
      PrefetchRows(kv.v_head + block * kv.v_block_bytes + slot * kv.v_row_bytes, kv.v_row_bytes,
                   v_bytes, n);
      pos += n;
    }
  };
  auto step_range = [&](int64_t k, int64_t* p0, int64_t* p1) {
    *p0 = k * S > read_first ? k * S : read_first;
    *p1 = MinI((k + 1) * S, last_pos + 1);
  };
  constexpr int64_t kPrefetchSteps = (kPrefetchBlocks * 16 + S - 1) / S;
  for (int64_t k = step_first; k < MinI(step_first + kPrefetchSteps, n_steps); ++k) {
    int64_t p0, p1;
    step_range(k, &p0, &p1);
    prefetch(p0, p1);
  }
  for (int64_t k = step_first; k < n_steps; ++k) {
    if (k + kPrefetchSteps < n_steps) {
      int64_t p0, p1;
      step_range(k + kPrefetchSteps, &p0, &p1);
      prefetch(p0, p1);
    }
    const int64_t first = k * S;
    const int64_t n_slots = MinI(S, last_pos + 1 - first);
    int64_t load0, load1;
    step_range(k, &load0, &load1);
    // K / V rows the first step does not load (before the tile's first visible block, past
    // the last position) are zeroed: their lanes are masked, but zeros keep stale NaN/Inf
    // scratch bytes out of the arithmetic (a masked p of 0 times an Inf is NaN). Later steps
    // start on their first position and leave only rows past the last position, which hold
    // rows loaded by an earlier step.
    if (k == step_first) {
      Fill(kf, (load0 - first) * hk, 0.0f);
      Fill(vf, (load0 - first) * hv, 0.0f);
      Fill(kf + (load1 - first) * hk, (S - (load1 - first)) * hk, 0.0f);
      Fill(vf + (load1 - first) * hv, (S - (load1 - first)) * hv, 0.0f);
    }
    for (int64_t pos = load0; pos < load1; ++pos) {
      const int64_t b = pos / bt;
      const uint64_t block = static_cast<uint64_t>(kv.blocks[b]);
      const uint64_t slot = static_cast<uint64_t>(pos - b * bt);
      const int64_t i = pos - first;
      Isa::LoadRow(kv.type, kv.k_head + block * kv.k_block_bytes + slot * kv.k_row_bytes,
                   kf + i * hk, s.head_dim_k, hk);
      Isa::LoadRow(kv.type, kv.v_head + block * kv.v_block_bytes + slot * kv.v_row_bytes,
                   vf + i * hv, s.head_dim_v, hv);
    }
    // Transposed, each dimension's 16 keys are one vector: a row's scores are then lanes of
    // FMAs with no horizontal reduction, and the chunk's rows share each K load.
    const int n_groups16 = static_cast<int>((n_slots + 15) / 16);
    if constexpr (kT) {
      for (int g = 0; g < n_groups16; ++g) Isa::Transpose16(kf + 16 * g * hk, hk, kft + 16 * g * hk);
    }
    // Tokens before this step's first position do not see it. The rows that see the step go
    // through in chunks of kChunkRows, each stage (scores, softmax, p . V) over the whole
    // chunk before the next: one row's three stages form a long chain of dependent latencies
    // (horizontal reductions, the exp, the V accumulation chains), and consecutive rows'
    // chains only overlap when they sit close together in the instruction stream. Every
    // row's arithmetic is the same as alone, so results do not depend on the tile.
    const int64_t i0 = first > tile.pos0 ? first - tile.pos0 : 0;
    int64_t chunk_r[kChunkRows];
    int chunk_lo[kChunkRows], chunk_valid[kChunkRows];
    int n_chunk = 0;
    auto flush = [&] {
      if constexpr (kT) {
        const float* q_rows[kChunkRows];
        for (int c = 0; c < n_chunk; ++c) q_rows[c] = qs + chunk_r[c] * hk;
        Isa::ScoresT(q_rows, n_chunk, kft, hk, n_groups16, p);
      } else {
        for (int c = 0; c < n_chunk; ++c) Isa::Scores(qs + chunk_r[c] * hk, kf, hk, p + c * S);
      }
      float corr[kChunkRows];
      for (int c = 0; c < n_chunk; ++c) {
        const int64_t r = chunk_r[c];
        corr[c] = Isa::Softmax(p + c * S, chunk_lo[c], chunk_valid[c], s.scale, s.softcap,
                               &run_max[r], &run_den[r]);
      }
      float* acc_rows[kChunkRows];
      for (int c = 0; c < n_chunk; ++c) acc_rows[c] = acc + chunk_r[c] * hv;
      Isa::AccumulateVRows(acc_rows, p, vf, chunk_valid, n_chunk, hv, corr);
      n_chunk = 0;
    };
    for (int64_t i = i0; i < tile.n_tokens; ++i) {
      const int n_valid = static_cast<int>(MinI(n_slots, tile.pos0 + i - first + 1));
      // Positions before the token's window: [0, lo) are masked; a step wholly before it is
      // skipped for this token (later tokens of the tile may still see it).
      const int64_t first_visible = AttnFirstVisible(tile.pos0 + i, s.window);
      const int lo = first_visible > first ? static_cast<int>(first_visible - first) : 0;
      if (lo >= n_valid) continue;
      for (int64_t j = 0; j < s.n_group; ++j) {
        chunk_r[n_chunk] = i * s.n_group + j;
        chunk_lo[n_chunk] = lo;
        chunk_valid[n_chunk] = n_valid;
        if (++n_chunk == kChunkRows) flush();
      }
    }
    flush();
  }

  for (int64_t i = 0; i < tile.n_tokens; ++i) {
    for (int64_t j = 0; j < s.n_group; ++j) {
      const int64_t r = i * s.n_group + j;
      const float inv = 1.0f / run_den[r];
      float* out = tile.out + i * tile.out_token_stride + j * s.head_dim_v;
      const float* a = acc + r * hv;
      for (int64_t d = 0; d < s.head_dim_v; ++d) out[d] = a[d] * inv;
    }
  }
}

template <class Isa>
void ExpRowSimd(const float* x, float* y, int64_t n) {
  constexpr int64_t W = Isa::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Isa::ExpStore(x + i, y + i);
  if (i < n) {
    float tx[W] = {}, ty[W];
    std::memcpy(tx, x + i, static_cast<size_t>(n - i) * sizeof(float));
    Isa::ExpStore(tx, ty);
    std::memcpy(y + i, ty, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// Constants of the exp polynomial: x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite split of
// ln2 so n * kLn2Hi is exact), then exp(r) by its Taylor series to degree 7 (truncation error
// below 5e-9 relative) and 2^n by the exponent field.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860682030941723e-6f;
constexpr float kExpLo = -87.0f;  // exp(-87) ~ 1.6e-38 is still a normal float
constexpr float kExpHi = 88.0f;
constexpr float kC2 = 1.0f / 2, kC3 = 1.0f / 6, kC4 = 1.0f / 24, kC5 = 1.0f / 120,
                kC6 = 1.0f / 720, kC7 = 1.0f / 5040;

}  // namespace
}  // namespace lifeline::kernels
