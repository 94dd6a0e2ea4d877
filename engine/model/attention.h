// Causal grouped-query attention over a sequence's paged KV cache: the glue between the
// model's KvStorage / block tables and the fused kernels of engine/kernels/attention_kernels.h
// (online softmax over KV blocks, no score matrix over all positions).
//
// Work is cut into items of (a tile of consecutive query tokens of one sequence, one KV
// head): the kernel converts each K/V block of the head once per tile and reuses it for all
// tokens x n_group query heads of the tile. PlanAttention builds the items of a step and
// SplitAttentionWork hands each thread a contiguous run of them with about equal causal
// cost (a token at position p reads p + 1 positions, so later tokens cost more).
//
// Ownership: borrows the KvStorage, block tables and buffers; AttentionScratch is
// caller-owned (one per worker thread). Thread-safety: concurrent calls are safe with
// distinct scratch and distinct outputs (the cache is only read). Failure: none; callers
// validate positions and block tables before calling.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/attention_kernels.h"
#include "engine/model/kv_storage.h"

namespace lifeline {

struct AttentionShape {
  int64_t n_group = 1;     // query heads per KV head
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;      // applied to q.k (1/sqrt(head_dim_k), or the family's own)
  float softcap = 0.0f;    // > 0: scores soft-capped, softcap * tanh(s / softcap)
  int64_t window = 0;      // > 0: sliding window (positions p - window + 1 ... p)
};

struct AttentionScratch {
  AttnScratch kernel;  // grows to the largest tile seen
  // Kept for callers that size scratch up front; the kernels grow their own buffer.
  void Resize(const AttentionShape&) {}
};

// A tile of consecutive query tokens of one sequence against one KV head.
//   q:   token i, group head j at q + i * q_token_stride + j * head_dim_k (the group's heads
//        are kv_head * n_group ... + n_group - 1 of the token's query row)
//   out: token i, group head j at out + i * out_token_stride + j * head_dim_v
//   Token i is at position pos0 + i and sees positions [0, pos0 + i] (with a window, the last
//   `window` of them); blocks covers them (entries before the window are never read).
void AttendTile(const AttentionKernels& kernels, const KvStorage& kv, int64_t layer,
                const int32_t* blocks, int64_t kv_head, const AttentionShape& shape,
                const float* q, int64_t q_token_stride, float* out, int64_t out_token_stride,
                int64_t n_tokens, int64_t pos0, AttentionScratch& scratch);

// One token (n_kv = its position + 1) through the scalar reference kernel.
//   q:   [n_group, head_dim_k] the query heads kv_head * n_group ... + n_group - 1
//   out: [n_group, head_dim_v]
void AttendKvGroup(const KvStorage& kv, int64_t layer, const int32_t* blocks, int64_t n_kv,
                   int64_t kv_head, const float* q, float* out, const AttentionShape& shape,
                   AttentionScratch& scratch);

// A run of consecutive batch entries [t0, t0 + n_tokens) of one sequence, at positions
// pos0, pos0 + 1, ...
struct AttentionRun {
  int64_t t0 = 0;
  int64_t n_tokens = 0;
  int64_t pos0 = 0;
};

struct AttentionItem {
  int64_t t0 = 0;        // first batch entry of the tile
  int64_t n_tokens = 0;  // tile length
  int64_t pos0 = 0;
  int64_t kv_head = 0;
  int64_t cost_end = 0;  // cumulative cost of the items up to and including this one
};

// Query tokens per tile: about 128 query rows (tokens x group heads), at least one token.
int64_t AttentionTileTokens(int64_t n_group);

// Items for every run x KV head x tile (KV head outer within a run, so a thread's run of
// items reuses one head's K/V from cache). Replaces *items.
void PlanAttention(std::span<const AttentionRun> runs, int64_t n_head_kv, int64_t tile_tokens,
                   std::vector<AttentionItem>* items);

// Thread ith of nth takes items [*i0, *i1): contiguous, and an item goes to the thread whose
// equal share of the total cost holds the item's cost midpoint.
void SplitAttentionWork(std::span<const AttentionItem> items, int ith, int nth, int64_t* i0,
                        int64_t* i1);

}  // namespace lifeline
