// PrefixMirror against the block manager it mirrors: after a sequence's full blocks are
// committed, a prompt with the same start counts them (never the block holding the last
// token); a block evicted from the cache leaves the mirror, and the count stops there.
#include "scheduler/prefix_mirror.h"

#include <vector>

#include <gtest/gtest.h>

#include "scheduler/block_manager.h"

namespace lifeline {
namespace {

std::vector<int32_t> Tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(100 + salt * 1000 + i);
  return t;
}

int64_t Hits(const PrefixMirror& m, const std::vector<int32_t>& t) {
  return m.LeadingHits(t, &HashBlockTokens, kRootBlockHash);
}

TEST(PrefixMirrorTest, CountsTheCachedBlocksAPromptStartsWith) {
  PrefixMirror mirror;
  BlockManager bm(8);  // 8 blocks of 16 positions
  bm.set_mirror(&mirror);
  const std::vector<int32_t> a = Tokens(50);  // 3 full blocks + 2 tokens
  ASSERT_TRUE(bm.Allocate(1, 50));
  ASSERT_TRUE(bm.CommitFullBlocks(1, a, 50).ok());
  EXPECT_EQ(mirror.size(), 3);
  EXPECT_EQ(Hits(mirror, a), 48);
  // The same first 32 tokens, then others: 2 blocks.
  std::vector<int32_t> b(a.begin(), a.begin() + 32);
  for (int i = 0; i < 20; ++i) b.push_back(-1 - i);
  EXPECT_EQ(Hits(mirror, b), 32);
  // Exactly 48 tokens: the third block holds the last token, whose logits are computed.
  EXPECT_EQ(Hits(mirror, std::vector<int32_t>(a.begin(), a.begin() + 48)), 32);
  EXPECT_EQ(Hits(mirror, Tokens(50, 1)), 0);
  EXPECT_EQ(mirror.LeadingHits({}, &HashBlockTokens, kRootBlockHash), 0);

  // Freed, its blocks stay cached (evictable) until new work takes them: 8 blocks for another
  // sequence evict all three, and the mirror forgets them.
  ASSERT_TRUE(bm.Free(1));
  EXPECT_EQ(Hits(mirror, a), 48);
  ASSERT_TRUE(bm.Allocate(2, 8 * 16));
  EXPECT_EQ(mirror.size(), 0);
  EXPECT_EQ(Hits(mirror, a), 0);
}

TEST(PrefixMirrorTest, AHashHeldTwiceStaysUntilBothGo) {
  PrefixMirror m;
  m.Add(7);
  m.Add(7);
  m.Remove(7);
  EXPECT_EQ(m.size(), 1);
  m.Remove(7);
  m.Remove(7);  // not held: nothing
  EXPECT_EQ(m.size(), 0);
}

}  // namespace
}  // namespace lifeline
