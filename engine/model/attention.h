// Causal grouped-query attention of one token over its sequence's paged KV cache, with an
// online softmax over KV blocks (running max and denominator per query head), so no score
// matrix over all positions is ever materialised.
//
// One call handles one KV head and the n_group query heads that share it: each K/V block row
// is converted to f32 once and reused by the whole group.
//
// Ownership: borrows the KvStorage, block table and buffers; AttentionScratch is caller-owned
// (one per worker thread). Thread-safety: concurrent calls are safe with distinct scratch and
// distinct outputs (the cache is only read). Failure: none; callers validate positions and
// block tables before calling.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/kv_storage.h"

namespace lifeline {

struct AttentionShape {
  int64_t n_group = 1;     // query heads per KV head
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;      // applied to q.k (1/sqrt(head_dim_k))
};

struct AttentionScratch {
  std::vector<float> k_rows;  // [kKvBlockTokens, head_dim_k] one block of K for one KV head
  std::vector<float> v_rows;  // [kKvBlockTokens, head_dim_v]
  std::vector<float> scores;  // [kKvBlockTokens]
  std::vector<float> run_max;    // [n_group] running max score per query head
  std::vector<float> run_denom;  // [n_group] running sum of exp(score - run_max)
  void Resize(const AttentionShape& shape);
};

// out = softmax(q . K[0..n_kv) * scale) . V[0..n_kv) for each of the group's query heads.
//   q:   [n_group, head_dim_k] the query heads kv_head * n_group ... + n_group - 1
//   out: [n_group, head_dim_v]
//   blocks: the sequence's block table (at least ceil(n_kv / 16) entries); n_kv >= 1.
void AttendKvGroup(const KvStorage& kv, int64_t layer, const int32_t* blocks, int64_t n_kv,
                   int64_t kv_head, const float* q, float* out, const AttentionShape& shape,
                   AttentionScratch& scratch);

}  // namespace lifeline
