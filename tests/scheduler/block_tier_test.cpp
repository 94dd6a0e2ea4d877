// The prefix-cache tier below the pool, as the scheduler drives it (scheduler/block_tier.h):
// cached blocks the pool evicts are offered to the tier; a returning prompt whose prefix the
// pool lost continues from the tier, its blocks restored into fresh pool blocks rather than
// computed. The tier here copies the harness's fake KV (which checks every later read of
// those positions against the request's true tokens), so a restore into the wrong block, of
// the wrong block or of stale contents fails the run.
#include <map>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/block_tier.h"
#include "scheduler/sched_harness.h"

namespace lifeline {
namespace {

using testing::Config;
using testing::FakeKv;
using testing::Harness;

std::vector<int32_t> Prompt(int32_t n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

class CopyingTier final : public BlockTier {
 public:
  explicit CopyingTier(FakeKv* kv) : kv_(kv) {}
  void OnEvict(BlockId block, uint64_t hash, std::span<const int32_t> tokens) override {
    ++offered;
    store_[hash] = {std::vector<int32_t>(tokens.begin(), tokens.end()), kv_->Save(block)};
  }
  bool Holds(uint64_t hash, std::span<const int32_t> tokens) const override {
    auto it = store_.find(hash);
    return it != store_.end() &&
           std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(),
                      it->second.tokens.end());
  }
  bool Restore(uint64_t hash, std::span<const int32_t> tokens, BlockId into) override {
    if (refuse_all || !Holds(hash, tokens)) return false;
    kv_->Load(into, store_.at(hash).image);
    ++restored;
    return true;
  }
  void Forget() { store_.clear(); }

  int64_t offered = 0, restored = 0;
  bool refuse_all = false;

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    FakeKv::BlockImage image;
  };
  FakeKv* kv_;
  std::map<uint64_t, Entry> store_;
};

// Fills the 12-block pool with a 100-token prompt (6 full blocks cached, 7 held), then pushes
// it all out with another prompt of 180 tokens (12 blocks).
struct Evicted {
  explicit Evicted(int32_t n_blocks = 12) : h(Config(n_blocks, 2, 512)), tier(&h.kv()) {
    h.sched().SetBlockTier(&tier);
    a = Prompt(100, 1000);
    h.Submit(a, 2);
    h.RunUntilIdle(100);
    h.Submit(Prompt(180, 5000), 2);
    h.RunUntilIdle(100);
  }
  Harness h;
  CopyingTier tier;
  std::vector<int32_t> a;
};

TEST(BlockTier, AReturningPromptIsRestoredFromTheTierNotComputed) {
  Evicted e;
  ASSERT_GE(e.tier.offered, 6) << "the pool evicted the first prompt's cached blocks";
  EXPECT_EQ(e.h.sched().block_manager().ProbePrefix(e.a).n_blocks, 0) << "gone from the pool";
  const RequestId back = e.h.Submit(e.a, 2);
  const StepPlan p = e.h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  // 6 blocks (96 tokens) is the most a 100-token prompt may reuse (never the last token).
  EXPECT_EQ(p.entries[0].start_pos, 96);
  EXPECT_EQ(e.tier.restored, 6);
  e.h.RunUntilIdle(100);  // the fake KV checked every read of the restored positions
  const Request& r = e.h.finished()[back];
  EXPECT_EQ(r.n_cached_tokens, 96);
  EXPECT_EQ(r.n_restored_tokens, 96);
  EXPECT_EQ(e.h.sched().stats().tier_restored_blocks, 6);
  EXPECT_TRUE(e.h.sched().CheckInvariants().ok());
  // Restored blocks are in the pool's cache again: the next return needs no tier.
  EXPECT_EQ(e.h.sched().block_manager().ProbePrefix(e.a).n_blocks, 6);
}

TEST(BlockTier, ARefusedRestoreIsComputedInstead) {
  Evicted e;
  e.tier.refuse_all = true;
  const RequestId back = e.h.Submit(e.a, 2);
  const StepPlan p = e.h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 0);
  e.h.RunUntilIdle(100);
  EXPECT_EQ(e.h.finished()[back].n_restored_tokens, 0);
  EXPECT_EQ(e.h.sched().stats().tier_restore_failures, 1);
  EXPECT_TRUE(e.h.sched().CheckInvariants().ok());
}

TEST(BlockTier, OnlyTheChainsOwnBlocksAreRestored) {
  Evicted e;
  // The same first 48 tokens, then different ones: 3 blocks come back, the rest is computed.
  std::vector<int32_t> b(e.a.begin(), e.a.begin() + 48);
  for (int i = 0; i < 52; ++i) b.push_back(-1 - i);
  const RequestId rb = e.h.Submit(b, 2);
  const StepPlan p = e.h.Step();
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].start_pos, 48);
  e.h.RunUntilIdle(100);
  EXPECT_EQ(e.h.finished()[rb].n_restored_tokens, 48);
  // Without a tier nothing is restored.
  e.h.sched().SetBlockTier(nullptr);
  e.tier.Forget();
  e.h.Submit(Prompt(180, 9000), 2);  // evicts again
  e.h.RunUntilIdle(100);
  const RequestId again = e.h.Submit(e.a, 2);
  e.h.RunUntilIdle(100);
  EXPECT_EQ(e.h.finished()[again].n_restored_tokens, 0);
}

// The pool kept the chain's first block, the tier the rest: the prefix continues from the
// pool into the tier.
TEST(BlockTier, APrefixContinuesFromThePoolIntoTheTier) {
  Harness h(Config(12, 2, 512));
  CopyingTier tier(&h.kv());
  h.sched().SetBlockTier(&tier);
  const std::vector<int32_t> a = Prompt(100, 1000);
  h.Submit(a, 2);
  h.RunUntilIdle(100);
  h.Submit(Prompt(160, 5000), 2);  // 11 blocks: one of the first prompt's stays
  h.RunUntilIdle(100);
  ASSERT_EQ(h.sched().block_manager().ProbePrefix(a).n_blocks, 1);
  const RequestId back = h.Submit(a, 2);
  EXPECT_EQ(h.Step().entries.at(0).start_pos, 96);
  h.RunUntilIdle(100);
  EXPECT_EQ(h.finished()[back].n_cached_tokens, 96);
  EXPECT_EQ(h.finished()[back].n_restored_tokens, 80);
  EXPECT_TRUE(h.sched().CheckInvariants().ok());
}

}  // namespace
}  // namespace lifeline
