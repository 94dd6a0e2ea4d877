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

TEST(KvStorage, RowsAreDistinctAndRoundTripF16) {
  KvStorageShape shape;
  shape.n_layer = 2;
  shape.n_blocks = 3;
  shape.k_row_elems = 4;
  shape.v_row_elems = 6;
  shape.type = KvType::kF16;
  auto s = KvStorage::Create(shape, 1 << 20);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Size: 2 layers * 3 blocks * 16 slots * (4 + 6) values * 2 bytes.
  EXPECT_EQ((*s)->size_bytes(), 2u * 3 * 16 * 10 * 2);
  // Adjacent slots of one block are one row apart; blocks are 16 rows apart.
  EXPECT_EQ((*s)->K(0, 0, 1) - (*s)->K(0, 0, 0), 4 * 2);
  EXPECT_EQ((*s)->K(0, 1, 0) - (*s)->K(0, 0, 0), 16 * 4 * 2);
  EXPECT_EQ((*s)->V(1, 2, 15) - (*s)->V(1, 2, 14), 6 * 2);
  EXPECT_NE((*s)->K(0, 2, 3), (*s)->K(1, 2, 3));

  const float in[4] = {1.0f, -2.5f, 0.1f, 65504.0f};
  (*s)->StoreRow(in, (*s)->K(1, 2, 15), 4);
  float out[4];
  (*s)->LoadRow((*s)->K(1, 2, 15), out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.5f);
  EXPECT_NEAR(out[2], 0.1f, 0.1f * 1e-3f);  // f16 keeps ~11 significant bits
  EXPECT_EQ(out[3], 65504.0f);              // largest finite f16
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
