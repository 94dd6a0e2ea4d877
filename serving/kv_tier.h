// HostKvTier: the prefix cache's second tier, in host RAM below the KV pool (the scheduler's
// BlockTier, scheduler/block_tier.h). When the pool evicts a cached full block, the block's
// K/V over every layer (KvStorage::CopyBlockOut: one opaque run in the pool's storage type)
// is copied here, keyed by its chain hash and kept with its token ids and a checksum; when a
// returning prompt's prefix continues past what the pool holds, the scheduler restores the
// blocks from here into fresh pool blocks (a memcpy per block instead of a prefill of 16
// positions). A conversation whose history was pushed out of the pool by other conversations
// therefore comes back at copy speed, not at prefill speed.
//
// Bounded: at most capacity_bytes of block bytes (plus a small per-entry overhead); least
// recently stored-or-restored entries go first, so a conversation that keeps returning keeps
// its blocks. A restored block stays here too (it is in the pool again, but the next eviction
// then costs nothing to keep). Restores compare the token ids and the checksum (a corrupted
// entry is dropped and counted, never loaded).
//
// Q8 copies (`q8_copies`, `serve --prefix-cache-ram-q8`): a pool of F16 (or F32) blocks is
// kept in RAM as Q8_0 -- 34 bytes per 32 values instead of 64 (128) -- so the same
// capacity holds 1.9x (3.8x) the blocks; a restore dequantizes back into the pool's type. The
// copy is lossy (Q8_0's error, as `--kv-type q8_0` has in the pool itself): a restored prefix
// gives logits close to, not equal to, a recomputed one. A pool already in Q8_0 is copied as
// it is. The disk tier always holds the pool's own bytes.
//
// With a disk store below it (kv_disk_store.h), every block the pool evicts is also queued for
// a file, a block found only on disk is read, verified and restored (and kept in RAM again),
// and Persist writes the blocks still cached in the pool at shutdown, so a restarted server
// finds its conversations on disk.
//
// Ownership: borrows the KvStorage (the engine's, outliving the tier); owns its copies and
// the disk store.
// Thread-safety: none; the engine loop's thread calls everything (the scheduler calls
// OnEvict / Holds / Restore from Schedule, Stats from the snapshot on the same thread).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model/kv_storage.h"
#include "scheduler/block_tier.h"
#include "serving/kv_disk_store.h"
#include "serving/kv_tier_stats.h"

namespace lifeline::serving {

class HostKvTier final : public BlockTier {
 public:
  // capacity_bytes >= 0 (0 keeps nothing in RAM); disk may be null; q8_copies: keep F16 / F32
  // blocks as Q8_0 in RAM (above).
  HostKvTier(KvStorage* storage, uint64_t capacity_bytes,
             std::unique_ptr<KvDiskStore> disk = nullptr, bool q8_copies = false);
  // Bytes one RAM copy takes (the block's, or its Q8_0 form's).
  uint64_t copy_bytes() const { return copy_bytes_; }

  // Writes a block still cached in the pool to the disk store (no-op without one): for the
  // pool's contents at shutdown. Then Flush waits for the writes.
  void Persist(BlockId block, uint64_t hash, std::span<const int32_t> tokens,
               bool wait_for_room = false);
  void Flush();
  const KvDiskStore* disk() const { return disk_.get(); }

  void OnEvict(BlockId block, uint64_t hash, std::span<const int32_t> tokens) override;
  bool Holds(uint64_t hash, std::span<const int32_t> tokens) const override;
  bool Restore(uint64_t hash, std::span<const int32_t> tokens, BlockId into) override;

  KvTierStats Stats() const;
  // Test hook: flips one byte of the entry's copy (a corrupted RAM page, as a disk tier's
  // file could be); false when there is no such entry.
  bool CorruptForTest(uint64_t hash);

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::unique_ptr<uint8_t[]> bytes;
    uint64_t checksum = 0;
    std::list<uint64_t>::iterator lru_pos;  // in lru_, most recent at the back
  };
  const Entry* Find(uint64_t hash, std::span<const int32_t> tokens) const;
  void Drop(std::unordered_map<uint64_t, Entry>::iterator it);
  void Touch(Entry& e, uint64_t hash);

  // Keeps a RAM copy of the block bytes `raw` (the pool's type), capacity allowing.
  void Keep(uint64_t hash, std::span<const int32_t> tokens, const uint8_t* raw);
  // The pool's bytes <-> a RAM copy (identity, or Q8_0 of the values).
  void Pack(const uint8_t* raw, uint8_t* copy);
  void Unpack(const uint8_t* copy, uint8_t* raw);

  KvStorage* storage_;
  uint64_t capacity_bytes_;
  std::unique_ptr<KvDiskStore> disk_;
  std::unique_ptr<uint8_t[]> scratch_;  // one block in the pool's type
  uint64_t block_bytes_;
  // Q8 copies: the values per block (F16 or F32 in the pool), in 32-value Q8_0 blocks; 0 = off.
  int64_t q8_values_ = 0;
  uint64_t copy_bytes_;
  std::vector<float> floats_;  // one block's values, for Pack / Unpack
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // hashes, least recent first
  KvTierStats stats_;
};

// A 64-bit checksum of a byte run (FNV-1a over 8-byte words, the tail byte by byte).
uint64_t KvBlockChecksum(std::span<const uint8_t> bytes);

}  // namespace lifeline::serving
