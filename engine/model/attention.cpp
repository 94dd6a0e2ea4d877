#include "engine/model/attention.h"

#include <algorithm>

#include "base/check.h"

namespace lifeline {
namespace {

AttnKvType KernelType(KvType type) {
  switch (type) {
    case KvType::kF16: return AttnKvType::kF16;
    case KvType::kF32: return AttnKvType::kF32;
    case KvType::kQ8_0: return AttnKvType::kQ8_0;
  }
  return AttnKvType::kF16;
}

// Causal cost of a tile: positions read, summed over its tokens, plus a per-token constant
// for the work that does not grow with the position (q copy, output, softmax finish).
int64_t TileCost(int64_t pos0, int64_t n_tokens) {
  return n_tokens * (pos0 + 1) + n_tokens * (n_tokens - 1) / 2 + 16 * n_tokens;
}

}  // namespace

void AttendTile(const AttentionKernels& kernels, const KvStorage& kv, int64_t layer,
                const int32_t* blocks, int64_t kv_head, const AttentionShape& shape,
                const float* q, int64_t q_token_stride, float* out, int64_t out_token_stride,
                int64_t n_tokens, int64_t pos0, AttentionScratch& scratch) {
  // The storage splits rows into heads of its own dims; attention must read heads of the
  // same dims (the model builds both from one config).
  LL_CHECK(KvHeadBytes(kv.type(), shape.head_dim_k) == kv.k_head_bytes() &&
           KvHeadBytes(kv.type(), shape.head_dim_v) == kv.v_head_bytes());
  const KvStorage::HeadLayout k = kv.KHead(layer, kv_head);
  const KvStorage::HeadLayout v = kv.VHead(layer, kv_head);
  AttnKvView view;
  view.type = KernelType(kv.type());
  view.k_head = k.base;
  view.v_head = v.base;
  view.k_row_bytes = k.slot_bytes;
  view.v_row_bytes = v.slot_bytes;
  view.k_block_bytes = k.block_bytes;
  view.v_block_bytes = v.block_bytes;
  view.blocks = blocks;
  view.block_tokens = kKvBlockTokens;
  const AttnShape s{shape.n_group,  shape.head_dim_k, shape.head_dim_v,
                    shape.scale,    shape.softcap,    shape.window};
  AttnTile tile;
  tile.q = q;
  tile.q_token_stride = q_token_stride;
  tile.out = out;
  tile.out_token_stride = out_token_stride;
  tile.n_tokens = n_tokens;
  tile.pos0 = pos0;
  kernels.attend(view, s, tile, scratch.kernel);
}

void AttendKvGroup(const KvStorage& kv, int64_t layer, const int32_t* blocks, int64_t n_kv,
                   int64_t kv_head, const float* q, float* out, const AttentionShape& shape,
                   AttentionScratch& scratch) {
  AttendTile(AttentionKernelsFor(IsaLevel::kScalar), kv, layer, blocks, kv_head, shape, q,
             shape.n_group * shape.head_dim_k, out, shape.n_group * shape.head_dim_v, 1,
             n_kv - 1, scratch);
}

int64_t AttentionTileTokens(int64_t n_group) {
  // 128 query rows: a tile converts (and, AVX-512, transposes) every K/V row it reads once,
  // so larger tiles spread that over more rows. 1.1B Q8_0 pp512 `--profile-ops`, alternated
  // twice: the attention stage 323-335 ms over 66 layer calls at 64 rows, 297-299 at 128,
  // 288-301 at 256 (no better, and fewer items to balance over the threads).
  return std::max<int64_t>(1, 128 / std::max<int64_t>(1, n_group));
}

void PlanAttention(std::span<const AttentionRun> runs, int64_t n_head_kv, int64_t tile_tokens,
                   std::vector<AttentionItem>* items) {
  LL_CHECK(tile_tokens >= 1 && n_head_kv >= 1);
  items->clear();
  int64_t cost = 0;
  for (const AttentionRun& r : runs) {
    for (int64_t g = 0; g < n_head_kv; ++g) {
      for (int64_t i = 0; i < r.n_tokens; i += tile_tokens) {
        AttentionItem it;
        it.t0 = r.t0 + i;
        it.n_tokens = std::min(tile_tokens, r.n_tokens - i);
        it.pos0 = r.pos0 + i;
        it.kv_head = g;
        cost += TileCost(it.pos0, it.n_tokens);
        it.cost_end = cost;
        items->push_back(it);
      }
    }
  }
}

void SplitAttentionWork(std::span<const AttentionItem> items, int ith, int nth, int64_t* i0,
                        int64_t* i1) {
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0 || nth <= 1) {
    *i0 = 0;
    *i1 = ith == 0 ? n : 0;
    return;
  }
  const int64_t total = items.back().cost_end;
  // Owner of item k: floor(2 * midpoint * nth / (2 * total)), midpoint doubled to stay in
  // integers. Owners never decrease with k, so each thread's items are contiguous.
  auto owner = [&](int64_t k) {
    const int64_t begin = k == 0 ? 0 : items[static_cast<size_t>(k - 1)].cost_end;
    const int64_t mid2 = begin + items[static_cast<size_t>(k)].cost_end;
    const int64_t o = static_cast<int64_t>(static_cast<__int128>(mid2) * nth / (2 * total));
    return std::min<int64_t>(o, nth - 1);
  };
  // First item whose owner is >= t, by binary search.
  auto first_of = [&](int64_t t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (owner(mid) >= t) hi = mid; else lo = mid + 1;
    }
    return lo;
  };
  *i0 = first_of(ith);
  *i1 = first_of(ith + 1);
}

}  // namespace lifeline
