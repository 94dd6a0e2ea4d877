#include "engine/model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lifeline {

void AttentionScratch::Resize(const AttentionShape& shape) {
  k_rows.resize(static_cast<size_t>(kKvBlockTokens * shape.head_dim_k));
  v_rows.resize(static_cast<size_t>(kKvBlockTokens * shape.head_dim_v));
  scores.resize(static_cast<size_t>(kKvBlockTokens));
  run_max.resize(static_cast<size_t>(shape.n_group));
  run_denom.resize(static_cast<size_t>(shape.n_group));
}

namespace {

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Loads slots [0, n_slots) of one block, restricted to one KV head, into f32 rows.
void LoadBlock(const KvStorage& kv, int64_t layer, int32_t block, int64_t n_slots,
               int64_t kv_head, const AttentionShape& s, AttentionScratch& sc) {
  const int64_t elem = KvTypeBytes(kv.type());
  const int64_t k_off = kv_head * s.head_dim_k * elem;
  const int64_t v_off = kv_head * s.head_dim_v * elem;
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    kv.LoadRow(kv.K(layer, block, slot) + k_off, sc.k_rows.data() + slot * s.head_dim_k,
               s.head_dim_k);
    kv.LoadRow(kv.V(layer, block, slot) + v_off, sc.v_rows.data() + slot * s.head_dim_v,
               s.head_dim_v);
  }
}

// Folds one block into query head j's running softmax state and accumulator.
void AccumulateBlock(const float* qj, float* oj, int64_t n_slots, int64_t j,
                     const AttentionShape& s, AttentionScratch& sc) {
  float block_max = -std::numeric_limits<float>::infinity();
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    const float score = Dot(qj, sc.k_rows.data() + slot * s.head_dim_k, s.head_dim_k) * s.scale;
    sc.scores[static_cast<size_t>(slot)] = score;
    block_max = std::max(block_max, score);
  }
  const float old_max = sc.run_max[static_cast<size_t>(j)];
  const float new_max = std::max(old_max, block_max);
  // exp(-inf) == 0 clears the (empty) state on the first block.
  const float correction = std::exp(old_max - new_max);
  float denom = sc.run_denom[static_cast<size_t>(j)] * correction;
  for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] *= correction;
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    const float p = std::exp(sc.scores[static_cast<size_t>(slot)] - new_max);
    denom += p;
    const float* v = sc.v_rows.data() + slot * s.head_dim_v;
    for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] += p * v[d];
  }
  sc.run_max[static_cast<size_t>(j)] = new_max;
  sc.run_denom[static_cast<size_t>(j)] = denom;
}

}  // namespace

void AttendKvGroup(const KvStorage& kv, int64_t layer, const int32_t* blocks, int64_t n_kv,
                   int64_t kv_head, const float* q, float* out, const AttentionShape& s,
                   AttentionScratch& sc) {
  for (int64_t j = 0; j < s.n_group; ++j) {
    sc.run_max[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity();
    sc.run_denom[static_cast<size_t>(j)] = 0.0f;
  }
  std::fill(out, out + s.n_group * s.head_dim_v, 0.0f);
  const int64_t n_blocks = (n_kv + kKvBlockTokens - 1) / kKvBlockTokens;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t n_slots = std::min<int64_t>(kKvBlockTokens, n_kv - b * kKvBlockTokens);
    LoadBlock(kv, layer, blocks[b], n_slots, kv_head, s, sc);
    for (int64_t j = 0; j < s.n_group; ++j) {
      AccumulateBlock(q + j * s.head_dim_k, out + j * s.head_dim_v, n_slots, j, s, sc);
    }
  }
  for (int64_t j = 0; j < s.n_group; ++j) {
    const float inv = 1.0f / sc.run_denom[static_cast<size_t>(j)];
    float* oj = out + j * s.head_dim_v;
    for (int64_t d = 0; d < s.head_dim_v; ++d) oj[d] *= inv;
  }
}

}  // namespace lifeline
