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
};

}  // namespace lifeline::serving
