// Paged KV bookkeeping, kept apart from the KV memory (kv_storage.h).
//
// The forward pass reads a sequence's KV through a SeqKv: a block table (entry i is the block
// holding positions [16 i, 16 i + 16), base/kv_block.h) and the positions already valid. Who
// owns the blocks is the caller's business: the server's BlockManager
// (scheduler/block_manager.h, prefix-cached and shared) or, for one-process uses (`lifeline
// run`, benchmarks, tests), KvSequenceTable here -- a free list of block ids and one private
// table per sequence. A context uses one or the other, never both (ContextOptions::
// caller_owns_blocks), so the same memory never has two free lists.
//
// The sliding-window layers' tables (KvWindowTable) are the engine's own in every case: they
// index a separate store whose blocks are released as the window passes.
//
// Ownership: KvSequenceTable owns its KvBlockPool and the tables. Thread-safety: none; one
// owner (the engine loop) calls everything.
// Failure: running out of blocks is an expected outcome (Reserve returns false, Allocate
// returns nullopt); an unknown sequence id is InvalidArgument; freeing a block twice is a
// programming error (LL_CHECK).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/model/kv_storage.h"

namespace lifeline {

using SeqId = int32_t;

// One sequence's KV as a forward pass sees it. `blocks` must cover every position the batch
// writes (KvBlocksFor(n_tokens + the sequence's tokens in the batch) entries); positions
// [0, n_tokens) hold valid K/V before the batch. Borrowed for the duration of one Eval.
struct SeqKv {
  SeqId seq = 0;
  std::span<const int32_t> blocks;
  int64_t n_tokens = 0;
};

class KvBlockPool {
 public:
  explicit KvBlockPool(int32_t n_blocks);

  std::optional<int32_t> Allocate();
  void Free(int32_t block);

  int32_t n_blocks() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

 private:
  // Note: a LIFO stack rather than a FIFO queue, so a just-freed block (still in cache) is
  // handed out first.
  std::vector<int32_t> free_;    // ids of free blocks
  std::vector<uint8_t> in_use_;  // [n_blocks] 1 while allocated (catches double frees)
};

// One sequence's view of the cache: positions [0, n_tokens) hold valid K/V.
struct KvSequence {
  std::vector<int32_t> blocks;  // block table: blocks[p / kKvBlockTokens] holds position p
  int64_t n_tokens = 0;
};

class KvSequenceTable {
 public:
  explicit KvSequenceTable(int32_t n_blocks) : pool_(n_blocks) {}

  // A new, empty sequence. Costs no blocks until tokens are reserved.
  SeqId Create();
  // Frees the sequence and all of its blocks.
  Status Release(SeqId seq);
  const KvSequence* Find(SeqId seq) const;
  int64_t n_sequences() const { return static_cast<int64_t>(seqs_.size()); }

  // Blocks that must be allocated for `seq` to cover positions [0, n_positions).
  int64_t BlocksNeeded(SeqId seq, int64_t n_positions) const;
  // Allocates blocks so positions [0, n_positions) of `seq` have a home. All or nothing:
  // returns false (allocating nothing) when the pool has too few free blocks.
  bool Reserve(SeqId seq, int64_t n_positions);
  // Marks positions [0, n_tokens) valid; they must be reserved.
  void SetLength(SeqId seq, int64_t n_tokens);
  // Forgets positions >= n_tokens and frees the blocks no longer needed.
  Status Truncate(SeqId seq, int64_t n_tokens);
  // The view a forward pass takes (valid until the next call that changes `seq`).
  SeqKv View(SeqId seq) const;

  const KvBlockPool& pool() const { return pool_; }

 private:
  KvSequence* FindMutable(SeqId seq);

  KvBlockPool pool_;
  std::unordered_map<SeqId, KvSequence> seqs_;
  SeqId next_id_ = 0;
};

// The block tables of the sliding-window layers. Positional like KvSequenceTable's (logical
// block p / 16 holds position p), but a layer with a window of W positions never reads a
// position more than W - 1 before the one it computes, so once a sequence's next position is
// n, blocks that end before n - W + 1 are returned to the pool and their entries become -1
// (the attention kernels take the window as a bound and never read them). A sequence then
// holds about W + one step of positions here, whatever its length.
//
// Ownership: owns its pool and tables, keyed by the ids KvSequenceTable hands out.
// Thread-safety: none (one owner). Failure: running out of blocks is an expected outcome
// (Reserve returns false); rewinding into released positions is InvalidArgument; an
// unknown sequence is a programming error (LL_CHECK) since LlamaContext keeps both tables in
// step.
class KvWindowTable {
 public:
  KvWindowTable(int32_t n_blocks, int64_t window);

  void Create(SeqId seq);
  void Release(SeqId seq);
  bool Has(SeqId seq) const { return seqs_.count(seq) != 0; }
  int64_t window() const { return window_; }

  // Blocks `seq` needs so positions [0, n_positions) have a home (released ones excluded).
  int64_t BlocksNeeded(SeqId seq, int64_t n_positions) const;
  // All or nothing, as KvSequenceTable::Reserve.
  bool Reserve(SeqId seq, int64_t n_positions);
  // Positions [0, n_tokens) are written; releases the blocks no later position will read.
  void Advance(SeqId seq, int64_t n_tokens);
  // Forgets positions >= n_tokens; InvalidArgument when the window before n_tokens was
  // already released (the positions must be recomputed from the start).
  Status Truncate(SeqId seq, int64_t n_tokens);
  // The table: entry i is logical block i's physical block, -1 once released.
  const int32_t* blocks(SeqId seq) const;
  int64_t length(SeqId seq) const;  // positions written
  // Logical blocks before this one are released.
  int64_t first_held(SeqId seq) const;

  const KvBlockPool& pool() const { return pool_; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int64_t n_tokens = 0;
    int64_t first_held = 0;
  };
  Seq& Get(SeqId seq);
  const Seq& Get(SeqId seq) const;
  int64_t AttnFirstVisibleBlock(int64_t pos) const;

  KvBlockPool pool_;
  int64_t window_;
  std::unordered_map<SeqId, Seq> seqs_;
};

}  // namespace lifeline
