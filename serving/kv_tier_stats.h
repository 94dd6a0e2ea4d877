// What the prefix cache's RAM tier (kv_tier.h) holds and did, for snapshots and /metrics.
#pragma once

#include <cstdint>

namespace lifeline::serving {

struct KvTierStats {
  uint64_t capacity_bytes = 0;
  uint64_t bytes = 0;             // block bytes held now
  int64_t entries = 0;            // blocks held now
  int64_t stored = 0;             // blocks copied in from the pool (evictions kept)
  int64_t restored = 0;           // blocks copied back into the pool
  int64_t dropped = 0;            // entries pushed out by capacity
  int64_t corrupt = 0;            // restores refused by the checksum (entry dropped)
  int64_t restored_from_disk = 0;  // of `restored`, read from the disk tier
  // The disk tier (zeros without one): bytes of block files and their cap, files indexed at
  // start, written, dropped for capacity, refused (corrupt / truncated / foreign), write
  // errors and writes dropped for a full queue.
  uint64_t disk_capacity_bytes = 0;
  uint64_t disk_bytes = 0;
  int64_t disk_found_at_start = 0;
  int64_t disk_written = 0;
  int64_t disk_dropped = 0;
  int64_t disk_rejected = 0;
  int64_t disk_write_errors = 0;
  int64_t disk_queue_full = 0;
};

}  // namespace lifeline::serving
