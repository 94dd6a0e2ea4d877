// Fused causal attention kernels over a paged K/V cache, one table per instruction-set level.
//
// One call handles one KV head of one sequence and a run of consecutive query tokens of that
// sequence (a "tile"): token i of the tile sits at position pos0 + i and sees positions
// [0, pos0 + i], or with a sliding window of W positions [max(0, pos0 + i - W + 1), pos0 + i]
// (the window is a bound on the loop and the mask: blocks wholly before the tile's first
// visible position are never read, so their memory may already belong to someone else). Each of its n_group query heads (grouped-query attention) shares the KV
// head. The kernel walks the sequence's KV blocks once per tile: every K/V block row is
// converted to f32 once and reused by all tokens x group heads of the tile, scores go
// through an online softmax (running max and denominator per query row), and no score matrix
// over all positions is ever materialised.
//
// The cache layout is passed as raw pointers and strides, so this layer does not know the
// model's KV bookkeeping: K row of (block id b, slot s) for this KV head is at
//   k_head + b * k_block_bytes + s * k_row_bytes
// and holds head_dim_k values in the element type (F32, F16, or Q8_0 as below).
//
// Q8_0 rows: a head's values are cut into ceil(head_dim / 32) blocks of 34 bytes, as ggml's
// block_q8_0 (f16 scale d, then 32 int8 q; value = d * q). When head_dim is not a multiple of
// 32 the last block is partly used (the unused bytes are zero).
//
// Levels: kScalar is the portable reference twin (per query row, std::exp); kAvx2 (AVX2 + FMA
// + F16C) and kAvx512 use a polynomial exp (AttnExpMaxRelError) and SIMD dots; tests hold
// them to the reference with named tolerances.
//
// Ownership: borrows everything; AttnScratch is caller-owned, one per thread, and grows to
// the largest tile seen (no allocation in steady state). Thread-safety: concurrent calls are
// safe with distinct scratch and distinct outputs (the cache is only read).
// Failure: none; callers validate shapes (head dims >= 1, block_tokens in [1, 16], the
// block table covers pos0 + n_tokens positions). Violations abort via LL_CHECK.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/kernel_table.h"

namespace lifeline {

enum class AttnKvType : uint8_t { kF32, kF16, kQ8_0 };

// Q8_0 block: 32 values, f16 scale + 32 int8.
inline constexpr int64_t kAttnQ8BlockElems = 32;
inline constexpr int64_t kAttnQ8BlockBytes = 34;
// Largest KV block (positions per block) the kernels accept: one AVX-512 lane per position.
inline constexpr int64_t kAttnMaxBlockTokens = 16;

// Bytes one KV head's row of head_dim values takes in the given type.
int64_t AttnKvHeadBytes(AttnKvType type, int64_t head_dim);

// Largest relative error of the SIMD levels' exp over [-87, 0] (the only range the softmax
// feeds it: scores minus their running max), against a correctly rounded exp. Measured by
// the parity test over a dense grid; the Taylor polynomial's truncation error alone is 5e-9.
inline constexpr float AttnExpMaxRelError = 2e-7f;

struct AttnKvView {
  AttnKvType type = AttnKvType::kF16;
  const uint8_t* k_head = nullptr;  // this layer's K buffer, offset to this KV head
  const uint8_t* v_head = nullptr;
  uint64_t k_block_bytes = 0;  // stride between physical blocks
  uint64_t v_block_bytes = 0;
  uint64_t k_row_bytes = 0;  // stride between slots of a block
  uint64_t v_row_bytes = 0;
  const int32_t* blocks = nullptr;  // the sequence's block table: logical -> physical block
  int64_t block_tokens = 16;        // positions per block, 1..kAttnMaxBlockTokens
};

struct AttnShape {
  int64_t n_group = 1;  // query heads per KV head
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;  // applied to q.k
  // > 0: scores are soft-capped, s = softcap * tanh(scale * q.k / softcap) (Gemma 2).
  float softcap = 0.0f;
  // > 0: sliding window, a query at position p sees positions p - window + 1 ... p.
  int64_t window = 0;
};

// First position a query at `pos` sees under `window` (0: no window).
inline int64_t AttnFirstVisible(int64_t pos, int64_t window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

struct AttnTile {
  // q of token i, group head j: q + i * q_token_stride + j * head_dim_k (floats).
  const float* q = nullptr;
  int64_t q_token_stride = 0;
  // out of token i, group head j: out + i * out_token_stride + j * head_dim_v.
  float* out = nullptr;
  int64_t out_token_stride = 0;
  int64_t n_tokens = 0;
  int64_t pos0 = 0;  // position of token 0; token i sees [0, pos0 + i]
};

// Per-thread working memory of the kernels (f32 K/V of one block, running softmax state).
struct AttnScratch {
  std::vector<float> buf;
  // Out of line (attention_ref.cpp, baseline ISA): the vector's code must not be instantiated
  // inside the AVX files, where the linker could pick an AVX copy for every caller.
  float* Grow(size_t n_floats);
};

struct AttentionKernels {
  IsaLevel isa = IsaLevel::kScalar;
  void (*attend)(const AttnKvView& kv, const AttnShape& shape, const AttnTile& tile,
                 AttnScratch& scratch) = nullptr;
  // y[i] = exp(x[i]) for x[i] in [-87, 0] (the softmax's range); the scalar level is std::exp.
  // Exposed for the accuracy test.
  void (*exp_row)(const float* x, float* y, int64_t n) = nullptr;
};

// The table for min(requested, DetectIsa()).
const AttentionKernels& AttentionKernelsFor(IsaLevel requested);

}  // namespace lifeline
