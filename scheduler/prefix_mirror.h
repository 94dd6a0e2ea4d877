// PrefixMirror: which full blocks the prefix cache holds, readable from any thread.
//
// The prefix cache (BlockManager's index) belongs to the engine loop's thread; admission runs
// on the prep threads, before a request reaches that loop, and priced every prompt token as
// if none were cached -- so a returning conversation whose 1,000-token history sits in the
// cache was refused for a prefill it would not run. The block manager tells the mirror of each
// block hash it starts and stops caching; LeadingHits walks a prompt's hash chain against it.
// The answer is an estimate (a block may be evicted, or another request may cache one, before
// this request is scheduled); the engine loop's own lookup stays the truth.
//
// Thread-safety: Add / Remove from the engine thread, LeadingHits from any (a shared mutex).
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <span>
#include <unordered_map>

#include "base/kv_block.h"

namespace lifeline {

class PrefixMirror {
 public:
  using HashFn = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens);

  void Add(uint64_t hash);
  void Remove(uint64_t hash);
  // Prompt positions the cache holds at the start of `tokens`: full blocks whose chain hashes
  // (hash_fn from `root`) are all cached, never covering the last token (its logits are
  // computed, as the block manager's own walk caps it).
  int64_t LeadingHits(std::span<const int32_t> tokens, HashFn hash_fn, uint64_t root) const;
  int64_t size() const;

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, int32_t> count_;  // hash -> cached blocks with it
};

}  // namespace lifeline
