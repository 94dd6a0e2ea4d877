// BlockManager's cache reserve: the blocks ever handed out (the KV pool's resident memory)
// level off at the peak in use plus the reserve, however many distinct prompts pass through,
// while the most recent prefixes stay cached. Expected counts are worked out by hand from
// the block geometry (kKvBlockTokens = 16 tokens per block).
#include "scheduler/block_manager.h"

#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

constexpr int64_t kTokens = 3 * kKvBlockTokens;

// Sequence `i`'s 48 tokens (3 full blocks), distinct from every other sequence's.
std::vector<int32_t> Distinct(int32_t i) {
  std::vector<int32_t> v(kTokens);
  std::iota(v.begin(), v.end(), i * 100);
  return v;
}

// 200 sequences one after another, each computing and caching 3 blocks, then freed.
void RunMany(BlockManager& bm) {
  for (int32_t i = 0; i < 200; ++i) {
    const std::vector<int32_t> t = Distinct(i);
    ASSERT_TRUE(bm.MatchPrefix(i, t).ok());
    ASSERT_TRUE(bm.Allocate(i, kTokens));
    ASSERT_TRUE(bm.CommitFullBlocks(i, t, kTokens).ok());
    ASSERT_TRUE(bm.Free(i));
    ASSERT_TRUE(bm.CheckInvariants().ok()) << bm.CheckInvariants().ToString();
  }
}

TEST(BlockReserve, TouchedBlocksLevelOffAtPeakInUsePlusTheReserve) {
  BlockManager bm(1000);
  bm.SetCacheReserve(6);
  RunMany(bm);
  const BlockManagerStats s = bm.stats();
  // 3 in use at a time. A block comes fresh only while at most 6 are evictable: the first
  // three sequences touch 9 blocks (0 -> 3 -> 6 evictable before their allocations), every
  // later allocation finds 9 evictable and evicts its 3 (9 -> 6), and the free brings it back
  // to 9. So 9 blocks touched: the 3 in use plus the reserve of 6, for 200 prompts.
  EXPECT_EQ(s.blocks_touched, 9) << "resident KV grows with every distinct prompt";
  EXPECT_EQ(s.blocks_free + s.blocks_evictable, 1000);
  EXPECT_EQ(s.blocks_evictable, 9);
  // The newest prefix is still cached: all 3 blocks minus the copy-on-write cap (a match never
  // covers the last token) = 2 blocks = 32 tokens.
  EXPECT_EQ(bm.ProbePrefix(Distinct(199)).n_tokens, 2 * kKvBlockTokens);
  EXPECT_EQ(bm.ProbePrefix(Distinct(0)).n_tokens, 0);  // the oldest was given back
}

TEST(BlockReserve, UnlimitedReserveKeepsEveryPrefixUntilFreshBlocksRunOut) {
  BlockManager bm(1000);  // the default: no reserve
  RunMany(bm);
  const BlockManagerStats s = bm.stats();
  EXPECT_EQ(s.blocks_touched, 600);
  EXPECT_EQ(s.blocks_evictable, 600);
  EXPECT_EQ(bm.ProbePrefix(Distinct(0)).n_tokens, 2 * kKvBlockTokens);
}

TEST(BlockReserve, ZeroReserveStillServesAHitThatArrivesBeforeTheNextAllocation) {
  BlockManager bm(100);
  bm.SetCacheReserve(0);
  const std::vector<int32_t> t = Distinct(7);
  ASSERT_TRUE(bm.MatchPrefix(1, t).ok());
  ASSERT_TRUE(bm.Allocate(1, kTokens));
  ASSERT_TRUE(bm.CommitFullBlocks(1, t, kTokens).ok());
  ASSERT_TRUE(bm.Free(1));
  auto hit = bm.MatchPrefix(2, t);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(*hit, 2 * kKvBlockTokens);
  EXPECT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockReserve, AFullPoolStillEvictsWhateverTheReserve) {
  BlockManager bm(6);
  bm.SetCacheReserve(100);  // larger than the pool
  RunMany(bm);              // 3 blocks per sequence in a 6-block pool: evicts to fit
  EXPECT_EQ(bm.stats().blocks_touched, 6);
  EXPECT_GT(bm.stats().evictions, 0);
}

}  // namespace
}  // namespace lifeline
