// BlockManager: allocation, refcounts, prefix caching, copy-on-write cap, hash-collision
// safety, LRU eviction, and invariants under long random operation sequences. Expected
// values are computed by hand from the block geometry (16 tokens per block unless stated).
#include "scheduler/block_manager.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

std::vector<int32_t> Iota(int32_t n, int32_t first = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> TableOf(const BlockManager& bm, SeqKey seq) {
  auto t = bm.Table(seq);
  return {t.begin(), t.end()};
}

// A sequence that computed `tokens` and committed all of its full blocks.
void RunSeq(BlockManager& bm, SeqKey seq, const std::vector<int32_t>& tokens) {
  Result<int64_t> cached = bm.MatchPrefix(seq, tokens);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  ASSERT_TRUE(bm.Allocate(seq, static_cast<int64_t>(tokens.size())));
  ASSERT_TRUE(bm.CommitFullBlocks(seq, tokens, static_cast<int64_t>(tokens.size())).ok());
}

TEST(BlockManagerTest, AllocateGrowsTablesAllOrNothing) {
  BlockManager bm(4);
  EXPECT_EQ(bm.capacity_tokens(), 64);
  EXPECT_EQ(bm.BlocksNeeded(1, 20), 2);  // ceil(20 / 16)
  ASSERT_TRUE(bm.Allocate(1, 20));
  EXPECT_EQ(bm.Table(1).size(), 2u);
  EXPECT_TRUE(bm.Allocate(1, 32));        // still 2 blocks
  EXPECT_EQ(bm.Table(1).size(), 2u);
  EXPECT_EQ(bm.BlocksNeeded(2, 40), 3);   // 3 > 2 available
  EXPECT_FALSE(bm.Allocate(2, 40));
  EXPECT_FALSE(bm.HasSeq(2));             // nothing created or taken
  EXPECT_EQ(bm.stats().blocks_free, 2);
  EXPECT_TRUE(bm.Allocate(2, 32));
  EXPECT_EQ(bm.stats().blocks_free, 0);
  EXPECT_FALSE(bm.Allocate(1, 33));       // one more block, none left
  EXPECT_EQ(bm.Table(1).size(), 2u);
  ASSERT_TRUE(bm.CheckInvariants().ok());

  EXPECT_TRUE(bm.Free(1));
  EXPECT_FALSE(bm.Free(1));
  EXPECT_EQ(bm.stats().blocks_free, 2);   // uncached blocks go straight to the free list
  EXPECT_EQ(bm.stats().blocks_evictable, 0);
  EXPECT_EQ(bm.stats().blocks_used, 2);
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, SharedPrefixIsReusedWithRefcounts) {
  BlockManager bm(16);
  const auto a = Iota(48);  // 3 full blocks
  RunSeq(bm, 1, a);
  EXPECT_EQ(bm.CommittedBlocks(1), 3);
  EXPECT_EQ(bm.stats().blocks_cached, 3);

  // Same 48 tokens plus one: 3 full blocks hit, the 49th token is computed.
  const auto b = Concat(a, {999});
  const PrefixProbe probe = bm.ProbePrefix(b);
  EXPECT_EQ(probe.n_blocks, 3);
  EXPECT_EQ(probe.n_tokens, 48);
  EXPECT_EQ(probe.n_unreferenced, 0);  // all held by seq 1
  Result<int64_t> hit = bm.MatchPrefix(2, b);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(*hit, 48);
  const auto t1 = TableOf(bm, 1);
  const auto t2 = TableOf(bm, 2);
  ASSERT_EQ(t2.size(), 3u);
  EXPECT_TRUE(std::equal(t2.begin(), t2.end(), t1.begin()));
  for (BlockId blk : t2) EXPECT_EQ(bm.RefCount(blk), 2);
  ASSERT_TRUE(bm.Allocate(2, 49));
  EXPECT_NE(TableOf(bm, 2)[3], t1[0]);  // the 4th block is fresh
  EXPECT_EQ(bm.stats().prefix_lookup_tokens, 48 + 49);  // seq 1 looked up too (0 hits)
  EXPECT_EQ(bm.stats().prefix_hit_tokens, 48);
  ASSERT_TRUE(bm.CheckInvariants().ok());

  // Freeing one holder keeps the blocks in use for the other.
  bm.Free(1);
  for (BlockId blk : t2) EXPECT_EQ(bm.RefCount(blk), 1);
  EXPECT_EQ(bm.stats().blocks_evictable, 0);
  bm.Free(2);
  EXPECT_EQ(bm.stats().blocks_evictable, 3);  // cached full blocks stay findable
  EXPECT_EQ(bm.stats().blocks_free, 13);
  ASSERT_TRUE(bm.CheckInvariants().ok());

  // A later sequence revives them from the evictable list.
  EXPECT_EQ(bm.ProbePrefix(b).n_unreferenced, 3);
  ASSERT_EQ(*bm.MatchPrefix(3, b), 48);
  EXPECT_EQ(bm.stats().blocks_evictable, 0);
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, HitIsCappedSoTheLastTokenIsComputed) {
  BlockManager bm(16);
  const auto a = Iota(64);  // exactly 4 full blocks
  RunSeq(bm, 1, a);
  // The same 64 tokens again: floor((64 - 1) / 16) = 3 blocks, 48 tokens.
  EXPECT_EQ(*bm.MatchPrefix(2, a), 48);
  // One token: nothing can be reused.
  EXPECT_EQ(bm.ProbePrefix(std::vector<int32_t>{0}).n_blocks, 0);
  // 17 tokens: 1 block.
  EXPECT_EQ(bm.ProbePrefix(Iota(17)).n_tokens, 16);
}

TEST(BlockManagerTest, PartialLastBlockIsNeverShared) {
  BlockManager bm(16);
  const auto a = Iota(40);  // 2 full blocks + 8 tokens
  RunSeq(bm, 1, a);
  EXPECT_EQ(bm.CommittedBlocks(1), 2);
  EXPECT_EQ(bm.stats().blocks_cached, 2);
  EXPECT_TRUE(bm.CachedTokens(TableOf(bm, 1)[2]).empty());
  // Even with 41 identical tokens, only the 2 full blocks are shared.
  EXPECT_EQ(*bm.MatchPrefix(2, Concat(a, {7})), 32);
  EXPECT_EQ(bm.RefCount(TableOf(bm, 1)[2]), 1);
  // Misuse is an error, not a corruption: unknown sequence, wrong block size, and a commit
  // past the allocated table (seq 1 holds 3 blocks; after the third there is none).
  EXPECT_FALSE(bm.CommitFullBlock(9, Iota(16)).ok());
  EXPECT_FALSE(bm.CommitFullBlock(1, Iota(3)).ok());
  EXPECT_TRUE(bm.CommitFullBlock(1, Iota(16, 32)).ok());
  EXPECT_FALSE(bm.CommitFullBlock(1, Iota(16, 48)).ok());
  EXPECT_FALSE(bm.CommitFullBlocks(1, Iota(10), 11).ok());  // fewer tokens than computed
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, MatchOnlyFollowsTheSameChain) {
  BlockManager bm(16);
  const auto x = Iota(16, 100);
  RunSeq(bm, 1, Concat(Concat(Iota(16, 0), x), {1}));
  // Block 1 has the same tokens but follows a different block 0: no hit at all.
  EXPECT_EQ(bm.ProbePrefix(Concat(Concat(Iota(16, 50), x), {1})).n_blocks, 0);
  // Diverging inside block 1: only block 0 hits.
  auto y = x;
  y[15] = -5;
  EXPECT_EQ(bm.ProbePrefix(Concat(Concat(Iota(16, 0), y), {1})).n_blocks, 1);
  // MatchPrefix into a sequence that already has blocks is refused.
  EXPECT_FALSE(bm.MatchPrefix(1, Iota(40)).ok());
}

TEST(BlockManagerTest, IdenticalBlocksCommittedTwiceStayPrivate) {
  BlockManager bm(16);
  const auto a = Iota(33);
  // Two sequences compute the same prompt side by side (neither saw the other's blocks).
  ASSERT_TRUE(bm.Allocate(1, 33));
  ASSERT_TRUE(bm.Allocate(2, 33));
  ASSERT_TRUE(bm.CommitFullBlocks(1, a, 33).ok());
  ASSERT_TRUE(bm.CommitFullBlocks(2, a, 33).ok());
  EXPECT_EQ(bm.stats().blocks_cached, 2);  // seq 2's twins are not registered
  // Seq 2 still chains onto the cached blocks: its third block, once full, is findable
  // after seq 1's two.
  auto longer = Concat(a, Iota(15, 200));  // 48 tokens
  ASSERT_TRUE(bm.Allocate(2, 48));
  ASSERT_TRUE(bm.CommitFullBlocks(2, longer, 48).ok());
  EXPECT_EQ(bm.ProbePrefix(Concat(longer, {1})).n_blocks, 3);
  bm.Free(2);
  bm.Free(1);
  // Registered blocks are evictable; seq 2's private twins went to the free list.
  EXPECT_EQ(bm.stats().blocks_evictable, 3);
  EXPECT_EQ(bm.stats().blocks_free, 13);
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

// The test hook forces every block to the same hash: sharing must still follow content.
uint64_t ConstantHash(uint64_t, std::span<const int32_t>) { return 42; }

TEST(BlockManagerTest, ForcedHashCollisionsNeverShareDifferentContent) {
  BlockManager bm(32, &ConstantHash);
  const auto p = Iota(16, 0), q = Iota(16, 500), x = Iota(16, 100);
  RunSeq(bm, 1, Concat(Concat(p, x), {1}));
  RunSeq(bm, 2, Concat(Concat(q, x), {1}));
  EXPECT_EQ(bm.stats().blocks_cached, 4);  // all four coexist under one hash

  // Different first block: no hit although every hash is equal.
  EXPECT_EQ(bm.ProbePrefix(Concat(Iota(16, 900), {1})).n_blocks, 0);
  // [q, x] must hit seq 2's two blocks, not seq 1's x (same tokens, other parent).
  const auto t1 = TableOf(bm, 1), t2 = TableOf(bm, 2);
  ASSERT_EQ(*bm.MatchPrefix(3, Concat(Concat(q, x), {1})), 32);
  EXPECT_EQ(TableOf(bm, 3), (std::vector<BlockId>{t2[0], t2[1]}));
  ASSERT_EQ(*bm.MatchPrefix(4, Concat(Concat(p, x), {1})), 32);
  EXPECT_EQ(TableOf(bm, 4), (std::vector<BlockId>{t1[0], t1[1]}));
  // Diverging in block 1 under equal hashes: only block 0.
  auto y = x;
  y[0] = -1;
  EXPECT_EQ(bm.ProbePrefix(Concat(Concat(p, y), {1})).n_blocks, 1);
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, EvictionTakesLeastRecentlyReleasedDeepestFirst) {
  BlockManager bm(4);
  const auto a = Iota(33, 0);    // 2 full blocks + 1 token
  const auto b = Iota(33, 1000);
  RunSeq(bm, 1, a);  // blocks 0, 1, 2 (free list hands out ascending ids)
  const auto ta = TableOf(bm, 1);
  EXPECT_EQ(ta, (std::vector<BlockId>{0, 1, 2}));
  bm.Free(1);  // 2 -> free; 1 then 0 -> evictable (deepest released first)
  EXPECT_EQ(bm.stats().blocks_evictable, 2);
  EXPECT_EQ(bm.stats().blocks_free, 2);
  // b needs 3 blocks: the two free ones, then one eviction, which must be a's block 1.
  ASSERT_TRUE(bm.Allocate(2, 33));
  EXPECT_EQ(bm.stats().evictions, 1);
  EXPECT_TRUE(bm.CachedTokens(1).empty());
  EXPECT_FALSE(bm.CachedTokens(0).empty());
  EXPECT_EQ(bm.ProbePrefix(a).n_blocks, 1);  // a's first block is still cached
  ASSERT_TRUE(bm.CommitFullBlocks(2, b, 33).ok());
  bm.Free(2);
  // Now LRU order: a0 (released earliest), then b's blocks deepest first.
  ASSERT_TRUE(bm.Free(3) == false);
  ASSERT_TRUE(bm.Allocate(5, 16 * 3));  // 1 free + evict a0, then b1
  EXPECT_EQ(bm.stats().evictions, 3);
  EXPECT_EQ(bm.ProbePrefix(a).n_blocks, 0);
  EXPECT_EQ(bm.ProbePrefix(b).n_blocks, 1);  // b0 survives
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, MatchedBlocksAreNotEvictedUnderThem) {
  BlockManager bm(3);
  const auto a = Iota(33);
  RunSeq(bm, 1, a);
  bm.Free(1);  // 2 evictable, 1 free
  ASSERT_EQ(*bm.MatchPrefix(2, a), 32);  // revives both
  EXPECT_EQ(bm.n_available(), 1);
  // Another sequence can only get the last free block; the matched ones are not evictable.
  EXPECT_FALSE(bm.Allocate(3, 17));
  EXPECT_TRUE(bm.Allocate(3, 16));
  EXPECT_EQ(bm.stats().evictions, 0);
  EXPECT_FALSE(bm.Allocate(2, 33));
  ASSERT_TRUE(bm.CheckInvariants().ok());
}

TEST(BlockManagerTest, HashIsSensitiveToEveryTokenAndTheParent) {
  const auto a = Iota(16);
  const uint64_t h = HashBlockTokens(kRootBlockHash, a);
  std::set<uint64_t> seen{h};
  for (size_t i = 0; i < a.size(); ++i) {
    auto b = a;
    b[i] ^= 1;
    EXPECT_TRUE(seen.insert(HashBlockTokens(kRootBlockHash, b)).second) << i;
  }
  EXPECT_NE(HashBlockTokens(h, a), h);
  EXPECT_NE(HashBlockTokens(1, a), HashBlockTokens(2, a));
  EXPECT_NE(HashBlockTokens(kRootBlockHash, Iota(15)), HashBlockTokens(kRootBlockHash, Iota(16)));
}

// Random operation sequences. A shadow model written here records, for every block a
// sequence computed, the exact token prefix it was computed under; every match must hand out
// only blocks whose recorded prefix equals the matching sequence's own.
class RandomOps {
 public:
  RandomOps(BlockManager& bm, uint32_t seed) : bm_(bm), rng_(seed) {}

  void Step() {
    const int op = Pick(0, 9);
    if (op <= 3 || seqs_.empty()) {
      Start();
    } else if (op <= 6) {
      Extend(RandomSeq());
    } else {
      const SeqKey s = RandomSeq();
      ASSERT_TRUE(bm_.Free(s));
      seqs_.erase(s);
    }
  }
  size_t live() const { return seqs_.size(); }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  SeqKey RandomSeq() {
    auto it = seqs_.begin();
    std::advance(it, Pick(0, static_cast<int>(seqs_.size()) - 1));
    return it->first;
  }
  // Prompts from a few shared stems so prefixes repeat; tokens from a tiny alphabet. Only
  // the first 8 tokens tell the stems apart, so equal blocks also occur after different
  // prefixes (which must not be shared).
  std::vector<int32_t> RandomTokens() {
    std::vector<int32_t> t;
    const int stem = Pick(0, 3);
    const int stem_len = Pick(0, 70);
    for (int i = 0; i < stem_len; ++i) t.push_back(i < 8 ? stem * 7 + (i % 5) : i % 5);
    const int tail = Pick(1, 30);
    for (int i = 0; i < tail; ++i) t.push_back(Pick(0, 2));
    return t;
  }

  void CheckSharedContent(SeqKey s) {
    const auto& toks = seqs_[s].tokens;
    const auto table = bm_.Table(s);
    const int64_t b = kKvBlockTokens;
    for (int64_t i = 0; i < seqs_[s].computed / b; ++i) {
      auto it = written_.find(table[static_cast<size_t>(i)]);
      ASSERT_NE(it, written_.end());
      ASSERT_TRUE(std::equal(it->second.begin(), it->second.end(), toks.begin(),
                             toks.begin() + (i + 1) * b))
          << "block " << table[static_cast<size_t>(i)] << " shared with wrong content";
    }
  }

  void Start() {
    const SeqKey s = next_++;
    Shadow sh;
    sh.tokens = RandomTokens();
    const PrefixProbe probe = bm_.ProbePrefix(sh.tokens);
    const int64_t target = static_cast<int64_t>(sh.tokens.size());
    const int64_t need = KvBlocksFor(target) - probe.n_blocks;
    if (need > bm_.n_available() - probe.n_unreferenced) return;  // would not fit
    Result<int64_t> hit = bm_.MatchPrefix(s, sh.tokens);
    ASSERT_TRUE(hit.ok());
    ASSERT_EQ(*hit, probe.n_tokens);
    ASSERT_LT(*hit, target);  // the cap: the last token is always computed
    sh.computed = *hit;
    seqs_[s] = sh;
    CheckSharedContent(s);
    ASSERT_TRUE(bm_.Allocate(s, target));
    Compute(s, target);
  }

  void Extend(SeqKey s) {
    Shadow& sh = seqs_[s];
    const int grow = Pick(1, 20);
    for (int i = 0; i < grow; ++i) sh.tokens.push_back(Pick(0, 2));
    const int64_t target = static_cast<int64_t>(sh.tokens.size());
    const auto before = bm_.stats();
    if (!bm_.Allocate(s, target)) {
      // All or nothing: a refused allocation changes nothing.
      const auto after = bm_.stats();
      ASSERT_EQ(before.blocks_free, after.blocks_free);
      ASSERT_EQ(before.blocks_evictable, after.blocks_evictable);
      sh.tokens.resize(static_cast<size_t>(sh.computed));
      return;
    }
    Compute(s, target);
  }

  // "Computes" positions [computed, target): records what each newly filled block holds.
  void Compute(SeqKey s, int64_t target) {
    Shadow& sh = seqs_[s];
    const int64_t b = kKvBlockTokens;
    const auto table = bm_.Table(s);
    for (int64_t i = sh.computed / b; i < target / b; ++i) {
      if ((i + 1) * b > target) break;
      written_[table[static_cast<size_t>(i)]] =
          std::vector<int32_t>(sh.tokens.begin(), sh.tokens.begin() + (i + 1) * b);
    }
    sh.computed = target;
    ASSERT_TRUE(bm_.CommitFullBlocks(s, sh.tokens, target).ok());
  }

  struct Shadow {
    std::vector<int32_t> tokens;
    int64_t computed = 0;
  };
  BlockManager& bm_;
  std::mt19937 rng_;
  std::map<SeqKey, Shadow> seqs_;
  std::map<BlockId, std::vector<int32_t>> written_;  // block -> prefix it was computed under
  SeqKey next_ = 1;
};

void RunRandomOps(BlockManager& bm, uint32_t seed, int steps) {
  RandomOps ops(bm, seed);
  for (int i = 0; i < steps; ++i) {
    ops.Step();
    if (::testing::Test::HasFatalFailure()) return;
    Status st = bm.CheckInvariants();
    ASSERT_TRUE(st.ok()) << "after op " << i << ": " << st.ToString();
    const auto s = bm.stats();
    ASSERT_EQ(s.blocks_free + s.blocks_evictable + s.blocks_used, s.blocks_total);
  }
  const auto s = bm.stats();
  EXPECT_GT(s.prefix_hit_tokens, 0);  // the stems did produce reuse
  EXPECT_GT(s.evictions, 0);          // and the pool was under pressure
}

TEST(BlockManagerTest, RandomOperationsKeepInvariants) {
  BlockManager bm(48);
  RunRandomOps(bm, 12345, 10000);
}

TEST(BlockManagerTest, RandomOperationsWithForcedCollisionsShareOnlyEqualContent) {
  BlockManager bm(48, &ConstantHash);
  RunRandomOps(bm, 777, 10000);
}

}  // namespace
}  // namespace lifeline
