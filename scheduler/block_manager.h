// BlockManager: the books of a paged, prefix-cached KV pool. It hands out block ids, keeps
// one block table per sequence (block i holds positions [i * kKvBlockTokens, (i+1) *
// kKvBlockTokens), the engine's layout: base/kv_block.h), reference-counts blocks shared between sequences, and remembers full blocks
// by content so a later sequence with the same prefix reuses them instead of recomputing.
// It never touches K/V bytes: the engine turns a block table into addresses in its KV memory.
//
// Block life cycle. A block is in exactly one of three places:
//   free       - holds nothing useful; handed out first. Free blocks are recycled (used
//                before: LIFO, most recently freed first) or fresh (never handed out: in id
//                order, block 0 first).
//   evictable  - unreferenced but holds a full, cached block; kept on an LRU list so a later
//                prefix match can revive it; taken (and forgotten by the cache) least recently
//                released first.
// Allocation order: recycled free blocks; then, while more than cache_reserve_blocks blocks
// are evictable, the LRU evictable one; then a fresh block; then any evictable one. A fresh
// block is memory the KV pool has never touched (the engine's KV mapping is resident only
// where written), so with a finite reserve the blocks ever used -- the pool's resident
// memory -- level off at the peak of blocks in use plus the reserve, instead of growing with
// every distinct prompt until the whole pool is resident. Unlimited reserve (the default):
// the prefix cache keeps everything until the fresh blocks run out.
//   in use     - referenced by >= 1 block table (refcount = number of tables holding it).
//
// Prefix cache. A full block is identified by hash(parent hash, its kKvBlockTokens token ids),
// a chain hash, so equal hashes mean "same tokens after the same prefix" with overwhelming
// probability. Never on the hash alone, though: a cached block also stores its token ids and
// the registration id of its parent block, and a lookup compares both, so even a forced
// collision (the hash hook in tests) cannot share a block with different content.
//
// Copy-on-write rule. Only full blocks are ever cached or shared, so nobody writes into a
// shared block: a sequence that reuses a prefix continues in fresh blocks. The last, partially
// filled block of a sequence is never shared. And a match never covers the last token it was
// given: the hit is capped at floor((n_tokens - 1) / kKvBlockTokens) blocks, so the engine always
// computes at least the final position and gets its logits. (A prompt of exactly 2 full blocks
// therefore reuses 1 block and recomputes the 16 positions of the second.)
//
// Ownership: owns all tables and block metadata; borrows nothing. Token spans passed in are
// read during the call only.
// Thread-safety: none. One owner (the engine loop's scheduler) calls everything.
// Failure: running out of blocks is an expected outcome (Allocate returns false and changes
// nothing). Misuse (matching into a sequence that already has blocks, committing a block the
// sequence does not have) is a Status; the books stay consistent. CheckInvariants reports any
// inconsistency as kInternal, naming the block and the broken rule.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/kv_block.h"
#include "scheduler/prefix_mirror.h"
#include "base/status.h"

namespace lifeline {

using BlockId = int32_t;
// The key of a sequence's block table (the scheduler uses request ids).
using SeqKey = int64_t;

// Chain hash of one full block: parent_hash is the hash of the previous block of the sequence
// (kRootBlockHash for the first block).
using BlockHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens);
inline constexpr uint64_t kRootBlockHash = 0;
// The default BlockHashFn: a seeded 64-bit mix per token (splitmix64 finalizer), length last.
uint64_t HashBlockTokens(uint64_t parent_hash, std::span<const int32_t> tokens);

// What ProbePrefix found; valid until the next mutating call.
struct PrefixProbe {
  int64_t n_blocks = 0;        // cached full blocks that prefix the tokens (after the cap)
  int64_t n_tokens = 0;        // n_blocks * kKvBlockTokens: positions that need no compute
  int64_t n_unreferenced = 0;  // of those, blocks now evictable (attaching them uses them up)
};

struct BlockManagerStats {
  int32_t blocks_total = 0;
  int32_t blocks_free = 0;
  int32_t blocks_evictable = 0;
  int32_t blocks_used = 0;            // referenced by >= 1 table
  int32_t blocks_cached = 0;          // registered in the prefix cache (used or evictable)
  int64_t prefix_lookup_tokens = 0;   // tokens offered to MatchPrefix
  int64_t prefix_hit_tokens = 0;      // of those, served from cached blocks
  int64_t evictions = 0;              // cached blocks forgotten to satisfy an allocation
  int32_t blocks_touched = 0;         // blocks ever handed out (the rest were never used)
};

class BlockManager {
 public:
  // n_blocks >= 1 (checked; a programming error otherwise). hash_fn: a test hook (forced
  // collisions).
  explicit BlockManager(int32_t n_blocks, BlockHashFn hash_fn = &HashBlockTokens);

  // Evictable blocks the prefix cache may keep before allocations reuse them rather than
  // take fresh (never used) blocks; < 0: unlimited (fresh blocks always first).
  void SetCacheReserve(int64_t blocks) { cache_reserve_blocks_ = blocks; }

  // Called with each cached block an allocation evicts, before the block is handed out again
  // (a tier below the pool copies it: block_tier.h): its id, chain hash and token ids.
  using EvictionObserver =
      std::function<void(BlockId block, uint64_t hash, std::span<const int32_t> tokens)>;
  void SetEvictionObserver(EvictionObserver observer) { on_evict_ = std::move(observer); }
  // The chain hashes of the first `max_blocks` full blocks of `tokens` (fewer when `tokens`
  // holds fewer full blocks), with this manager's hash function.
  std::vector<uint64_t> ChainHashes(std::span<const int32_t> tokens, int64_t max_blocks) const;
  // The most leading blocks of `n_tokens` tokens a match may cover (the copy-on-write rule:
  // never the last token).
  static int64_t MaxPrefixBlocks(int64_t n_tokens) {
    return n_tokens > 0 ? (n_tokens - 1) / kKvBlockTokens : 0;
  }

  // Calls fn(block, hash, tokens) for every block in the prefix cache (in use or evictable):
  // what a tier below the pool writes out at shutdown.
  void ForEachCached(const EvictionObserver& fn) const {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].cached) fn(static_cast<BlockId>(i), blocks_[i].hash, blocks_[i].tokens);
    }
  }

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // false: prefixes are never matched (every sequence computes from position 0), for models
  // whose cache holds per-sequence state beside the blocks (sliding-window layers).
  void set_prefix_caching(bool on) { prefix_caching_ = on; }
  // Told of every block hash the cache starts and stops holding (prefix_mirror.h), so other
  // threads can estimate a prompt's hits. Null: none. Set before any block is cached.
  void set_mirror(PrefixMirror* mirror) { mirror_ = mirror; }
  int64_t capacity_tokens() const { return int64_t{n_blocks()} * kKvBlockTokens; }
  // Blocks an allocation can still obtain: free plus evictable.
  int64_t n_available() const {
    return static_cast<int64_t>(free_.size() + lru_.size()) + (n_blocks() - next_fresh_);
  }

  // Longest chain of cached full blocks that prefixes `tokens`, capped by the copy-on-write
  // rule above. No side effects (not even on the counters), so it can be asked every step.
  PrefixProbe ProbePrefix(std::span<const int32_t> tokens) const;
  // Attaches that chain to `seq`, which must have no blocks yet (creating it if new): each
  // hit gains a reference and leaves the evictable list. Returns the cached token count
  // (a multiple of kKvBlockTokens) and counts lookup/hit tokens.
  Result<int64_t> MatchPrefix(SeqKey seq, std::span<const int32_t> tokens);

  // New blocks `seq` needs so positions [0, n_positions) have a home (0 when covered).
  int64_t BlocksNeeded(SeqKey seq, int64_t n_positions) const;
  // Grows `seq`'s table (creating the sequence if new) to cover [0, n_positions). All or
  // nothing: returns false and changes nothing when fewer than BlocksNeeded blocks are
  // available. Takes free blocks first, then evicts least-recently-used cached ones.
  bool Allocate(SeqKey seq, int64_t n_positions);
  // Drops `seq` and its table. Each block loses a reference; one that reaches zero goes to
  // the evictable list if cached, else to the free list. The table is released last block
  // first so that, of one sequence, the deepest blocks (least likely to be matched again,
  // useless without their parents) are evicted first. Returns false for an unknown seq.
  bool Free(SeqKey seq);

  // Registers the next not-yet-committed block of `seq` in the prefix cache; `tokens`
  // are its kKvBlockTokens token ids and the block must be allocated and completely computed.
  // When an identical block (same tokens after the same prefix) is already cached this one
  // stays private (freed normally later) and the sequence chains onto the cached one.
  Status CommitFullBlock(SeqKey seq, std::span<const int32_t> tokens);
  // Commits every full block below n_computed that is not committed yet; `tokens` are the
  // sequence's tokens from position 0 (at least n_computed of them).
  Status CommitFullBlocks(SeqKey seq, std::span<const int32_t> tokens, int64_t n_computed);

  bool HasSeq(SeqKey seq) const { return seqs_.count(seq) != 0; }
  // The block table of `seq` (empty for an unknown seq); valid until the next mutating call.
  std::span<const BlockId> Table(SeqKey seq) const;
  // Full blocks of `seq` registered (or chained onto a cached twin) so far.
  int64_t CommittedBlocks(SeqKey seq) const;
  int32_t RefCount(BlockId block) const;
  // Token ids a cached block holds (empty when the block is not in the prefix cache).
  std::span<const int32_t> CachedTokens(BlockId block) const;

  BlockManagerStats stats() const;
  // Full consistency check (O(blocks + table entries)): refcount == number of tables holding
  // the block, no block twice in a table, free ∪ evictable ∪ in-use = all blocks with no block
  // in two places, evictable blocks are cached, free ones are not, the hash index lists
  // exactly the cached blocks.
  Status CheckInvariants() const;

 private:
  enum class Place : uint8_t { kFree, kEvictable, kInUse };
  struct Block {
    Place place = Place::kFree;
    int32_t refcount = 0;
    bool cached = false;
    uint64_t hash = 0;
    uint64_t entry_id = 0;         // unique per registration; 0 = not registered
    uint64_t parent_entry_id = 0;  // entry of the previous block in the chain; 0 = root
    std::vector<int32_t> tokens;   // [kKvBlockTokens] while cached, for exact comparison
    std::list<BlockId>::iterator lru_pos;
  };
  struct Seq {
    std::vector<BlockId> blocks;
    int64_t n_committed = 0;          // leading blocks committed (or matched)
    uint64_t last_hash = kRootBlockHash;
    uint64_t last_entry_id = 0;       // chain entry of the last committed block
  };
  struct Hit {
    BlockId block;
    uint64_t hash;
  };

  // Walks the cache along `tokens` (capped); fills hits in order.
  void WalkPrefix(std::span<const int32_t> tokens, std::vector<Hit>* hits) const;
  // The cached block with this hash, parent entry and tokens; -1 when none.
  BlockId FindCached(uint64_t hash, uint64_t parent_entry_id,
                     std::span<const int32_t> tokens) const;
  // One block for an allocation; the caller has checked n_available() > 0.
  BlockId TakeBlock();
  void Uncache(BlockId block);
  void Release(BlockId block);

  BlockHashFn hash_fn_;
  std::vector<Block> blocks_;                           // [n_blocks]
  std::vector<BlockId> free_;                           // LIFO stack of recycled free blocks
  BlockId next_fresh_ = 0;                              // blocks >= this were never handed out
  int64_t cache_reserve_blocks_ = -1;                   // < 0: unlimited
  std::list<BlockId> lru_;                              // evictable, least recent first
  std::unordered_multimap<uint64_t, BlockId> index_;    // chain hash -> cached block
  std::unordered_map<SeqKey, Seq> seqs_;
  uint64_t next_entry_id_ = 1;
  bool prefix_caching_ = true;
  PrefixMirror* mirror_ = nullptr;  // borrowed (outlives the manager)
  int64_t prefix_lookup_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t evictions_ = 0;
  EvictionObserver on_evict_;
};

}  // namespace lifeline
