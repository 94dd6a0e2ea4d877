#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "engine/kernels/fp16.h"
#include "engine/model/kv_blocks.h"
#include "engine/model/kv_storage.h"

namespace lifeline {
namespace {

TEST(KvBlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  KvBlockPool pool(4);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) {
    auto b = pool.Allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_GE(*b, 0);
    EXPECT_LT(*b, 4);
    got.insert(*b);
  }
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(pool.Allocate().has_value());  // an expected outcome, not a crash
  pool.Free(2);
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(*pool.Allocate(), 2);
}

TEST(KvBlockPoolDeathTest, DoubleFreeAborts) {
  KvBlockPool pool(2);
  const int32_t b = *pool.Allocate();
  pool.Free(b);
  EXPECT_DEATH(pool.Free(b), "check failed");
}

TEST(KvSequenceTable, ReserveIsAllOrNothingAndTruncateFreesWholeBlocks) {
  KvSequenceTable t(5);
  const SeqId a = t.Create();
  const SeqId b = t.Create();
  EXPECT_NE(a, b);
  EXPECT_EQ(t.BlocksNeeded(a, 0), 0);
  EXPECT_EQ(t.BlocksNeeded(a, 1), 1);
  EXPECT_EQ(t.BlocksNeeded(a, 16), 1);
  EXPECT_EQ(t.BlocksNeeded(a, 17), 2);

  ASSERT_TRUE(t.Reserve(a, 40));  // 3 blocks
  t.SetLength(a, 40);
  EXPECT_EQ(t.Find(a)->blocks.size(), 3u);
  EXPECT_EQ(t.pool().n_free(), 2);
  EXPECT_FALSE(t.Reserve(b, 48));  // needs 3, 2 free: nothing allocated
  EXPECT_EQ(t.pool().n_free(), 2);
  EXPECT_TRUE(t.Find(b)->blocks.empty());

  ASSERT_TRUE(t.Truncate(a, 17).ok());  // positions 0..16 -> 2 blocks kept
  EXPECT_EQ(t.Find(a)->blocks.size(), 2u);
  EXPECT_EQ(t.Find(a)->n_tokens, 17);
  EXPECT_EQ(t.pool().n_free(), 3);
  EXPECT_EQ(t.Truncate(a, 18).code(), StatusCode::kOutOfRange);  // cannot grow

  ASSERT_TRUE(t.Reserve(b, 48));
  // The two sequences never share a block.
  std::set<int32_t> all(t.Find(a)->blocks.begin(), t.Find(a)->blocks.end());
  for (int32_t blk : t.Find(b)->blocks) EXPECT_TRUE(all.insert(blk).second);

  ASSERT_TRUE(t.Release(a).ok());
  EXPECT_EQ(t.Find(a), nullptr);
  EXPECT_EQ(t.pool().n_free(), 2);
  EXPECT_EQ(t.Release(a).code(), StatusCode::kInvalidArgument);
}

TEST(KvStorage, HeadsAreContiguousPerBlockAndRoundTripF16) {
  KvStorageShape shape;
  shape.n_layer = 2;
  shape.n_blocks = 3;
  shape.k_row_elems = 4;  // 2 heads of 2
  shape.v_row_elems = 6;  // 2 heads of 3
  shape.type = KvType::kF16;
  shape.n_head_kv = 2;
  auto s = KvStorage::Create(shape, 1 << 20);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Size: 2 layers * 3 blocks * 16 slots * (4 + 6) values * 2 bytes.
  EXPECT_EQ((*s)->size_bytes(), 2u * 3 * 16 * 10 * 2);
  // Within a block, one head's 16 slots are adjacent head rows; the next head follows them;
  // blocks are 16 token rows (all heads) apart.
  const KvStorage::HeadLayout k0 = (*s)->KHead(0, 0), k1 = (*s)->KHead(0, 1);
  EXPECT_EQ(k0.slot_bytes, 2u * 2);
  EXPECT_EQ(k0.block_bytes, 16u * 4 * 2);
  EXPECT_EQ(k1.base - k0.base, 16 * 2 * 2);
  const KvStorage::HeadLayout v1 = (*s)->VHead(1, 1);
  EXPECT_EQ(v1.slot_bytes, 3u * 2);
  EXPECT_EQ(v1.block_bytes, 16u * 6 * 2);
  EXPECT_NE((*s)->KHead(1, 0).base, k0.base);

  // A stored token reads back head by head, and lands where the head layout says.
  const float in[4] = {1.0f, -2.5f, 0.1f, 65504.0f};
  (*s)->StoreK(0, 2, 15, in);
  float out[4];
  (*s)->LoadK(0, 2, 15, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.5f);
  EXPECT_NEAR(out[2], 0.1f, 0.1f * 1e-3f);  // f16 keeps ~11 significant bits
  EXPECT_EQ(out[3], 65504.0f);              // largest finite f16
  const uint8_t* h1 = k1.base + 2 * k1.block_bytes + 15 * k1.slot_bytes;
  uint16_t half[2];
  std::memcpy(half, h1, sizeof(half));
  EXPECT_EQ(half[0], Fp32ToFp16(0.1f));
  EXPECT_EQ(half[1], Fp32ToFp16(65504.0f));
  // Neighbouring positions are untouched: storing slot 14 then 15 of V keeps both.
  const float va[6] = {1, 2, 3, 4, 5, 6}, vb[6] = {-1, -2, -3, -4, -5, -6};
  (*s)->StoreV(1, 0, 14, va);
  (*s)->StoreV(1, 0, 15, vb);
  float got[6];
  (*s)->LoadV(1, 0, 14, got);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], va[i]);
  (*s)->LoadV(1, 0, 15, got);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], vb[i]);
}

TEST(KvStorage, SizeCapIsEnforced) {
  KvStorageShape shape;
  shape.n_layer = 32;
  shape.n_blocks = 1 << 20;
  shape.k_row_elems = 1024;
  shape.v_row_elems = 1024;
  auto s = KvStorage::Create(shape, 1ull << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
  shape.n_blocks = INT32_MAX;
  shape.k_row_elems = INT64_MAX / 4;  // overflows the byte count
  EXPECT_EQ(KvStorage::Create(shape, UINT64_MAX).status().code(),
            StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace lifeline

namespace lifeline {
namespace {

// Window of 20 positions: once the next position is n, blocks ending before n - 19 go.
TEST(KvWindowTable, ReleasesBlocksAsTheyFallOutOfTheWindow) {
  KvWindowTable t(4, 20);
  t.Create(7);
  ASSERT_TRUE(t.Reserve(7, 40));  // positions [0, 40): 3 blocks
  EXPECT_EQ(t.pool().n_free(), 1);
  t.Advance(7, 40);  // next position 40 reads [21, 40]: block 0 ([0, 16)) is released
  EXPECT_EQ(t.first_held(7), 1);
  EXPECT_EQ(t.blocks(7)[0], -1);
  EXPECT_EQ(t.pool().n_free(), 2);
  ASSERT_TRUE(t.Reserve(7, 64));  // one more block: [48, 64)
  EXPECT_EQ(t.pool().n_free(), 1);
  EXPECT_FALSE(t.Reserve(7, 81));  // two more: all or nothing, nothing changed
  EXPECT_EQ(t.pool().n_free(), 1);
  t.Advance(7, 64);                // reads [45, 64]: block 1 ([16, 32)) goes, 2 stays
  EXPECT_EQ(t.first_held(7), 2);
  EXPECT_EQ(t.pool().n_free(), 2);
  EXPECT_EQ(t.length(7), 64);
  t.Release(7);
  EXPECT_EQ(t.pool().n_free(), 4);
}

TEST(KvWindowTable, RewindingIntoReleasedPositionsIsRefused) {
  KvWindowTable t(8, 16);
  t.Create(1);
  ASSERT_TRUE(t.Reserve(1, 80));
  t.Advance(1, 80);  // reads [65, 80]: blocks 0..3 released
  EXPECT_EQ(t.first_held(1), 4);
  // Rewinding to 70 needs [55, 70], whose block 3 is gone.
  const Status s = t.Truncate(1, 70);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("recompute from the start"), std::string::npos);
  EXPECT_EQ(t.length(1), 80);
  EXPECT_EQ(t.Truncate(1, 76).code(), StatusCode::kInvalidArgument);  // [61, 76]: block 3
  ASSERT_TRUE(t.Truncate(1, 79).ok());  // [64, 79]: blocks 4 on, all held
}

TEST(KvWindowTable, TruncateWithinTheWindowAndToZero) {
  KvWindowTable t(8, 16);
  t.Create(1);
  ASSERT_TRUE(t.Reserve(1, 80));
  t.Advance(1, 80);
  ASSERT_TRUE(t.Truncate(1, 79).ok());  // reads [64, 79]: block 4, held
  EXPECT_EQ(t.length(1), 79);
  ASSERT_TRUE(t.Truncate(1, 0).ok());   // an empty sequence needs nothing
  EXPECT_EQ(t.pool().n_free(), 8);
  EXPECT_EQ(t.first_held(1), 0);
  ASSERT_TRUE(t.Reserve(1, 16));
}

}  // namespace
}  // namespace lifeline
