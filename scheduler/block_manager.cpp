#include "scheduler/block_manager.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace lifeline {
namespace {

// splitmix64 finalizer: a bijective 64-bit mix with full avalanche.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kBlockHashSeed = 0x6c69666c696e6521ULL;  // arbitrary, fixed
constexpr uint64_t kTokenSalt = 0x9e3779b97f4a7c15ULL;

std::string BlockName(BlockId b) { return "block " + std::to_string(b); }

}  // namespace

uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const int32_t> tokens) {
  uint64_t h = Mix64(parent_hash ^ kBlockHashSeed);
  for (int32_t t : tokens) h = Mix64(h ^ (uint64_t{static_cast<uint32_t>(t)} + kTokenSalt));
  return Mix64(h ^ static_cast<uint64_t>(tokens.size()));
}

BlockManager::BlockManager(int32_t n_blocks, BlockHashFn hash_fn) : hash_fn_(hash_fn) {
  LL_CHECK(n_blocks >= 1);
  LL_CHECK(hash_fn != nullptr);
  blocks_.resize(static_cast<size_t>(n_blocks));
  // Fresh blocks go out in id order, block 0 first (readable test expectations).
}

BlockId BlockManager::FindCached(uint64_t hash, uint64_t parent_entry_id,
                                 std::span<const int32_t> tokens) const {
  auto [lo, hi] = index_.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.parent_entry_id == parent_entry_id &&
        std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
      return it->second;
    }
  }
  return -1;
}

void BlockManager::WalkPrefix(std::span<const int32_t> tokens, std::vector<Hit>* hits) const {
  if (tokens.empty() || !prefix_caching_) return;
  // Copy-on-write cap: never cover the last token (its logits must be computed).
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(kKvBlockTokens);
  uint64_t parent_hash = kRootBlockHash;
  uint64_t parent_entry = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    auto chunk = tokens.subspan(i * static_cast<size_t>(kKvBlockTokens),
                                static_cast<size_t>(kKvBlockTokens));
    const uint64_t h = hash_fn_(parent_hash, chunk);
    const BlockId b = FindCached(h, parent_entry, chunk);
    if (b < 0) break;
    hits->push_back({b, h});
    parent_hash = h;
    parent_entry = blocks_[static_cast<size_t>(b)].entry_id;
  }
}

PrefixProbe BlockManager::ProbePrefix(std::span<const int32_t> tokens) const {
  std::vector<Hit> hits;
  WalkPrefix(tokens, &hits);
  PrefixProbe probe;
  probe.n_blocks = static_cast<int64_t>(hits.size());
  probe.n_tokens = probe.n_blocks * kKvBlockTokens;
  for (const Hit& h : hits) {
    if (blocks_[static_cast<size_t>(h.block)].place == Place::kEvictable) ++probe.n_unreferenced;
  }
  return probe;
}

Result<int64_t> BlockManager::MatchPrefix(SeqKey seq, std::span<const int32_t> tokens) {
  Seq& s = seqs_[seq];
  if (!s.blocks.empty()) {
    return InvalidArgument("MatchPrefix: sequence " + std::to_string(seq) + " already has " +
                           std::to_string(s.blocks.size()) +
                           " blocks; a prefix can only be attached to an empty sequence");
  }
  std::vector<Hit> hits;
  WalkPrefix(tokens, &hits);
  for (const Hit& h : hits) {
    Block& b = blocks_[static_cast<size_t>(h.block)];
    if (b.place == Place::kEvictable) {
      lru_.erase(b.lru_pos);
      b.place = Place::kInUse;
    }
    ++b.refcount;
    s.blocks.push_back(h.block);
    s.last_hash = h.hash;
    s.last_entry_id = b.entry_id;
  }
  s.n_committed = static_cast<int64_t>(hits.size());
  const int64_t hit_tokens = s.n_committed * kKvBlockTokens;
  prefix_lookup_tokens_ += static_cast<int64_t>(tokens.size());
  prefix_hit_tokens_ += hit_tokens;
  return hit_tokens;
}

int64_t BlockManager::BlocksNeeded(SeqKey seq, int64_t n_positions) const {
  auto it = seqs_.find(seq);
  const int64_t have = it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.blocks.size());
  return std::max<int64_t>(0, KvBlocksFor(n_positions) - have);
}

void BlockManager::Uncache(BlockId block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  auto [lo, hi] = index_.equal_range(b.hash);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == block) {
      index_.erase(it);
      if (mirror_ != nullptr) mirror_->Remove(b.hash);
      break;
    }
  }
  b.cached = false;
  b.hash = 0;
  b.entry_id = 0;
  b.parent_entry_id = 0;
  b.tokens.clear();
}

std::vector<uint64_t> BlockManager::ChainHashes(std::span<const int32_t> tokens,
                                               int64_t max_blocks) const {
  std::vector<uint64_t> out;
  const int64_t n = std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size()) / kKvBlockTokens);
  uint64_t h = kRootBlockHash;
  for (int64_t i = 0; i < n; ++i) {
    h = hash_fn_(h, tokens.subspan(static_cast<size_t>(i * kKvBlockTokens), kKvBlockTokens));
    out.push_back(h);
  }
  return out;
}

BlockId BlockManager::TakeBlock() {
  BlockId id;
  const bool fresh_left = next_fresh_ < n_blocks();
  const bool cache_over_reserve =
      cache_reserve_blocks_ >= 0 && static_cast<int64_t>(lru_.size()) > cache_reserve_blocks_;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (fresh_left && !cache_over_reserve) {
    id = next_fresh_++;
  } else {
    LL_CHECK(!lru_.empty());
    id = lru_.front();
    lru_.pop_front();
    // Note: descendants of an evicted block keep their entries but become unreachable (their
    // parent entry id is never issued again); they age out of the LRU list like any other.
    if (on_evict_) {
      const Block& b = blocks_[static_cast<size_t>(id)];
      on_evict_(id, b.hash, b.tokens);
    }
    Uncache(id);
    ++evictions_;
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  b.place = Place::kInUse;
  b.refcount = 1;
  return id;
}

bool BlockManager::Allocate(SeqKey seq, int64_t n_positions) {
  const int64_t needed = BlocksNeeded(seq, n_positions);
  if (needed > n_available()) return false;
  Seq& s = seqs_[seq];
  for (int64_t i = 0; i < needed; ++i) s.blocks.push_back(TakeBlock());
  return true;
}

void BlockManager::Release(BlockId block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  LL_CHECK(b.place == Place::kInUse && b.refcount > 0);
  if (--b.refcount > 0) return;
  if (b.cached) {
    b.place = Place::kEvictable;
    b.lru_pos = lru_.insert(lru_.end(), block);
  } else {
    b.place = Place::kFree;
    free_.push_back(block);
  }
}

bool BlockManager::Free(SeqKey seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  const std::vector<BlockId>& table = it->second.blocks;
  for (auto b = table.rbegin(); b != table.rend(); ++b) Release(*b);
  seqs_.erase(it);
  return true;
}

Status BlockManager::CommitFullBlock(SeqKey seq, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    return InvalidArgument("CommitFullBlock: unknown sequence " + std::to_string(seq));
  }
  Seq& s = it->second;
  if (tokens.size() != static_cast<size_t>(kKvBlockTokens)) {
    return InvalidArgument("CommitFullBlock: sequence " + std::to_string(seq) + " gave " +
                           std::to_string(tokens.size()) + " tokens, a block holds " +
                           std::to_string(kKvBlockTokens));
  }
  if (s.n_committed >= static_cast<int64_t>(s.blocks.size())) {
    return InvalidArgument("CommitFullBlock: sequence " + std::to_string(seq) +
                           " has no allocated block after its " +
                           std::to_string(s.n_committed) + " committed blocks");
  }
  const BlockId id = s.blocks[static_cast<size_t>(s.n_committed)];
  Block& b = blocks_[static_cast<size_t>(id)];
  // Only matched blocks are shared, and those are committed already.
  LL_CHECK(b.refcount == 1 && !b.cached);
  const uint64_t h = hash_fn_(s.last_hash, tokens);
  const BlockId twin = FindCached(h, s.last_entry_id, tokens);
  if (twin >= 0) {
    s.last_entry_id = blocks_[static_cast<size_t>(twin)].entry_id;
  } else {
    b.cached = true;
    b.hash = h;
    b.entry_id = next_entry_id_++;
    b.parent_entry_id = s.last_entry_id;
    b.tokens.assign(tokens.begin(), tokens.end());
    index_.emplace(h, id);
    if (mirror_ != nullptr) mirror_->Add(h);
    s.last_entry_id = b.entry_id;
  }
  s.last_hash = h;
  ++s.n_committed;
  return Status::Ok();
}

Status BlockManager::CommitFullBlocks(SeqKey seq, std::span<const int32_t> tokens,
                                      int64_t n_computed) {
  if (n_computed < 0 || static_cast<int64_t>(tokens.size()) < n_computed) {
    return InvalidArgument("CommitFullBlocks: n_computed " + std::to_string(n_computed) +
                           " outside [0, " + std::to_string(tokens.size()) + "] tokens given");
  }
  const int64_t full = n_computed / kKvBlockTokens;
  for (int64_t i = CommittedBlocks(seq); i < full; ++i) {
    LL_RETURN_IF_ERROR(CommitFullBlock(
        seq, tokens.subspan(static_cast<size_t>(i * kKvBlockTokens),
                            static_cast<size_t>(kKvBlockTokens))));
  }
  return Status::Ok();
}

std::span<const BlockId> BlockManager::Table(SeqKey seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return {};
  return it->second.blocks;
}

int64_t BlockManager::CommittedBlocks(SeqKey seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.n_committed;
}

int32_t BlockManager::RefCount(BlockId block) const {
  LL_CHECK(block >= 0 && block < n_blocks());
  return blocks_[static_cast<size_t>(block)].refcount;
}

std::span<const int32_t> BlockManager::CachedTokens(BlockId block) const {
  LL_CHECK(block >= 0 && block < n_blocks());
  return blocks_[static_cast<size_t>(block)].tokens;
}

BlockManagerStats BlockManager::stats() const {
  BlockManagerStats s;
  s.blocks_total = n_blocks();
  s.blocks_free = static_cast<int32_t>(free_.size()) + (n_blocks() - next_fresh_);
  s.blocks_touched = next_fresh_;
  s.blocks_evictable = static_cast<int32_t>(lru_.size());
  s.blocks_used = s.blocks_total - s.blocks_free - s.blocks_evictable;
  s.blocks_cached = static_cast<int32_t>(index_.size());
  s.prefix_lookup_tokens = prefix_lookup_tokens_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.evictions = evictions_;
  return s;
}

Status BlockManager::CheckInvariants() const {
  const size_t n = blocks_.size();
  std::vector<int32_t> holders(n, 0);
  for (const auto& [key, s] : seqs_) {
    std::vector<BlockId> sorted = s.blocks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return Internal("sequence " + std::to_string(key) + " holds a block twice");
    }
    for (BlockId b : s.blocks) {
      if (b < 0 || static_cast<size_t>(b) >= n) {
        return Internal("sequence " + std::to_string(key) + " holds out-of-range " +
                        BlockName(b));
      }
      ++holders[static_cast<size_t>(b)];
    }
    if (s.n_committed > static_cast<int64_t>(s.blocks.size())) {
      return Internal("sequence " + std::to_string(key) + " committed " +
                      std::to_string(s.n_committed) + " blocks but holds " +
                      std::to_string(s.blocks.size()));
    }
  }
  std::vector<uint8_t> seen(n, 0);  // 1 = free (recycled or fresh), 2 = on the LRU list
  for (BlockId b : free_) {
    if (seen[static_cast<size_t>(b)] != 0) return Internal(BlockName(b) + " listed twice");
    if (b >= next_fresh_) return Internal(BlockName(b) + " is recycled but was never used");
    seen[static_cast<size_t>(b)] = 1;
  }
  for (size_t i = static_cast<size_t>(next_fresh_); i < n; ++i) seen[i] = 1;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const BlockId b = *it;
    if (seen[static_cast<size_t>(b)] != 0) return Internal(BlockName(b) + " listed twice");
    seen[static_cast<size_t>(b)] = 2;
    if (blocks_[static_cast<size_t>(b)].lru_pos != it) {
      return Internal(BlockName(b) + " has a stale LRU position");
    }
  }
  size_t n_cached = 0;
  for (size_t i = 0; i < n; ++i) {
    const Block& b = blocks_[i];
    const std::string name = BlockName(static_cast<BlockId>(i));
    if (b.refcount != holders[i]) {
      return Internal(name + " has refcount " + std::to_string(b.refcount) + " but " +
                      std::to_string(holders[i]) + " tables hold it");
    }
    const Place expected = seen[i] == 1   ? Place::kFree
                           : seen[i] == 2 ? Place::kEvictable
                                          : Place::kInUse;
    if (b.place != expected) return Internal(name + " is on the wrong list for its state");
    if ((b.place == Place::kInUse) != (b.refcount > 0)) {
      return Internal(name + " in use iff referenced is violated");
    }
    if (b.place == Place::kEvictable && !b.cached) {
      return Internal(name + " is evictable but not cached");
    }
    if (b.place == Place::kFree && b.cached) return Internal(name + " is free but cached");
    if (b.cached) {
      ++n_cached;
      if (b.tokens.size() != static_cast<size_t>(kKvBlockTokens)) {
        return Internal(name + " is cached with " + std::to_string(b.tokens.size()) +
                        " tokens");
      }
      int found = 0;
      auto [lo, hi] = index_.equal_range(b.hash);
      for (auto it = lo; it != hi; ++it) found += it->second == static_cast<BlockId>(i);
      if (found != 1) return Internal(name + " appears " + std::to_string(found) +
                                      " times in the hash index");
    }
  }
  if (n_cached != index_.size()) {
    return Internal("hash index has " + std::to_string(index_.size()) + " entries for " +
                    std::to_string(n_cached) + " cached blocks");
  }
  return Status::Ok();
}

}  // namespace lifeline
