// KvDiskStore: the prefix cache's disk tier (`serve --prefix-cache-dir DIR
// --prefix-cache-disk-mib N`), under the RAM tier (kv_tier.h). Each KV block is one file,
// DIR/<model identity>/<chain hash>.kvb, written by a background thread (the engine thread only
// queues the copy) to a temporary name and renamed into place, so a reader never sees half a
// file. A file holds a header (magic, format version, the model identity, the chain hash, the
// token count and the block's byte count), the block's token ids, its K/V bytes and a checksum
// of all of it. Found again after a restart: the constructor indexes the files already there.
//
// Content-addressed by the model's identity (its file's size and sampled contents, the KV
// storage type and shape: kv_tier.h's ModelKvIdentity) and the chain hash: another model's
// files live in another folder, and a file whose header names another identity, hash, token
// count or size, whose tokens differ from the asked ones, whose checksum fails, or which is
// truncated, is refused, counted and deleted -- never loaded.
//
// Bounded: at most capacity_bytes of files; the least recently written or read go first. The
// write queue is bounded too (a write that finds it full is dropped and counted: the block is
// only not kept).
//
// Ownership: owns its writer thread (joined by the destructor, after the queued writes).
// Thread-safety: every method may be called from any one thread (the engine loop); the writer
// thread shares the index under a mutex. Failure: I/O errors are counted, never thrown.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace lifeline::serving {

struct KvDiskStats {
  uint64_t capacity_bytes = 0;
  uint64_t bytes = 0;        // bytes of block files held now
  int64_t files = 0;         // block files held now
  int64_t found_at_start = 0;  // files indexed when the store opened
  int64_t written = 0;
  int64_t read = 0;          // blocks read back (restored)
  int64_t dropped = 0;       // files deleted for capacity
  int64_t rejected = 0;      // files refused (corrupt, truncated, foreign) and deleted
  int64_t write_errors = 0;  // writes that failed (disk full, permissions)
  int64_t queue_full = 0;    // writes dropped because the queue was full
};

// A model file's identity for the disk tier: its size and its first and last MiB hashed (a
// re-quantized or different file gets other folders; hashing all of a multi-GiB file at every
// start would cost seconds). 0 when the file cannot be read.
uint64_t ModelFileIdentity(const std::filesystem::path& path);
// The identity the store's folder is named by: the file's, the KV storage type and the
// block's byte count (which follows the layer count and the KV heads' dims).
uint64_t ModelKvIdentity(uint64_t file_identity, int kv_type, uint64_t block_bytes);

class KvDiskStore {
 public:
  // Opens (creating it) DIR/<identity hex>; indexes the block files already there. Errors:
  // the folder cannot be created or read.
  static Result<std::unique_ptr<KvDiskStore>> Open(const std::filesystem::path& dir,
                                                   uint64_t model_identity,
                                                   uint64_t block_bytes,
                                                   uint64_t capacity_bytes);
  ~KvDiskStore();
  KvDiskStore(const KvDiskStore&) = delete;
  KvDiskStore& operator=(const KvDiskStore&) = delete;

  // Queues a copy of one block for writing (no-op when a file for the hash exists). A full
  // queue drops the write, or with `wait_for_room` (shutdown) waits for room.
  void Write(uint64_t hash, std::span<const int32_t> tokens, std::span<const uint8_t> bytes,
             bool wait_for_room = false);
  // Whether a file for this hash is indexed (its tokens are checked by Read).
  bool Holds(uint64_t hash) const;
  // Reads and verifies the block into `out` (block_bytes); false when absent or refused.
  bool Read(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out);
  // Waits until every queued write is on disk (tests, shutdown).
  void Flush();

  KvDiskStats Stats() const;
  std::filesystem::path folder() const { return folder_; }
  // The file a block lives in.
  std::filesystem::path PathOf(uint64_t hash) const;

 private:
  KvDiskStore(std::filesystem::path folder, uint64_t identity, uint64_t block_bytes,
              uint64_t capacity_bytes);
  struct Pending {
    uint64_t hash;
    std::vector<int32_t> tokens;
    std::unique_ptr<uint8_t[]> bytes;
  };
  void WriterLoop();
  void WriteFile(const Pending& p);
  void IndexExisting();
  // Under mu_: records a file of `size` bytes as the most recent; evicts over capacity.
  void Insert(uint64_t hash, uint64_t size);
  void Forget(uint64_t hash, bool delete_file);  // under mu_
  void Touch(uint64_t hash);                     // under mu_

  const std::filesystem::path folder_;
  const uint64_t identity_;
  const uint64_t block_bytes_;
  const uint64_t capacity_bytes_;
  const uint64_t file_bytes_;  // header + tokens + block bytes + checksum

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Pending> queue_;
  bool writing_ = false;
  bool stop_ = false;
  struct Entry {
    uint64_t size = 0;
    std::list<uint64_t>::iterator lru_pos;
  };
  std::unordered_map<uint64_t, Entry> index_;
  std::list<uint64_t> lru_;  // least recent first
  KvDiskStats stats_;
  std::thread writer_;
};

}  // namespace lifeline::serving
