// BlockTier: a prefix-cache tier below the KV pool, as the scheduler sees it. When the pool
// evicts a cached full block (its id is about to hold something else), the tier may keep a
// copy of its K/V; when a request's prefix continues past what the pool still holds, the
// scheduler asks the tier for the next blocks of the chain and restores them into fresh pool
// blocks instead of recomputing them. The scheduler knows only chain hashes and token ids;
// the bytes and where they live (RAM, disk) are the tier's business (serving/kv_tier.h).
//
// A block is named by its chain hash (BlockManager's hash of the parent chain and its
// kKvBlockTokens token ids: the same tokens after the same prefix hash the same in any
// process of the same model) and carries its token ids, which a tier compares before it
// restores, so a hash collision cannot load foreign K/V.
//
// Thread-safety: called on the scheduler's (engine loop's) thread only.
#pragma once

#include <cstdint>
#include <span>

namespace lifeline {

using BlockId = int32_t;

class BlockTier {
 public:
  virtual ~BlockTier() = default;
  // Pool block `block` (full, computed, cached under `hash` with `tokens`) is being evicted:
  // keep a copy now if it is worth keeping (its bytes are overwritten after this returns).
  virtual void OnEvict(BlockId block, uint64_t hash, std::span<const int32_t> tokens) = 0;
  // Whether a restore of this block would be attempted (cheap: an index lookup).
  virtual bool Holds(uint64_t hash, std::span<const int32_t> tokens) const = 0;
  // Writes the block's K/V into pool block `into`. False when it is no longer there or fails
  // verification (the tokens, a checksum); the scheduler then computes the block instead.
  virtual bool Restore(uint64_t hash, std::span<const int32_t> tokens, BlockId into) = 0;
};

}  // namespace lifeline
