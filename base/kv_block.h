// The one size of a KV block, shared by the engine's KV memory layout (engine/model/kv_storage)
// and the server's block books (scheduler/block_manager): a block table entry i names the block
// holding positions [i * kKvBlockTokens, (i + 1) * kKvBlockTokens). It lives in base/ because
// those two modules do not depend on each other, and a second constant would let them disagree.
#pragma once

#include <cstdint>

namespace lifeline {

// Token positions per KV block. 16: within a block, each KV head's 16 positions are one
// contiguous run the attention kernels stream (2 KiB for an F16 head of 64), small enough
// that a prompt wastes at most 15 positions and a prefix-cache hit is found every 16 tokens.
inline constexpr int64_t kKvBlockTokens = 16;

// Blocks that hold positions [0, n_positions).
inline constexpr int64_t KvBlocksFor(int64_t n_positions) {
  return (n_positions + kKvBlockTokens - 1) / kKvBlockTokens;
}

}  // namespace lifeline
