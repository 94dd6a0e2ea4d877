// KvSequenceTable::Adopt: sequences whose block tables belong to an outside block manager.
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/kv_blocks.h"

namespace lifeline {
namespace {

TEST(KvAdopt, AdoptedBlocksNeverReturnToThePool) {
  KvSequenceTable t(8);
  const SeqId a = t.Create();
  const std::vector<int32_t> blocks = {5, 2, 7};
  ASSERT_TRUE(t.Adopt(a, blocks, 40).ok());
  EXPECT_EQ(t.Find(a)->blocks, blocks);
  EXPECT_EQ(t.Find(a)->n_tokens, 40);
  EXPECT_EQ(t.BlocksNeeded(a, 48), 0);
  EXPECT_EQ(t.pool().n_free(), 8);
  ASSERT_TRUE(t.Truncate(a, 10).ok());
  EXPECT_EQ(t.Find(a)->blocks.size(), 1u);
  EXPECT_EQ(t.pool().n_free(), 8);
  ASSERT_TRUE(t.Release(a).ok());
  EXPECT_EQ(t.pool().n_free(), 8);
}

TEST(KvAdopt, AdoptedTableIsNotGrownFromThePool) {
  KvSequenceTable t(8);
  const SeqId a = t.Create();
  ASSERT_TRUE(t.Adopt(a, std::vector<int32_t>{1}, 16).ok());
  EXPECT_FALSE(t.Reserve(a, 17));
  EXPECT_EQ(t.pool().n_free(), 8);
}

TEST(KvAdopt, RejectsBadTables) {
  KvSequenceTable t(4);
  const SeqId a = t.Create();
  EXPECT_EQ(t.Adopt(a, std::vector<int32_t>{4}, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Adopt(a, std::vector<int32_t>{-1}, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Adopt(a, std::vector<int32_t>{0}, 17).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(t.Adopt(999, std::vector<int32_t>{0}, 1).code(), StatusCode::kInvalidArgument);
  const SeqId b = t.Create();
  ASSERT_TRUE(t.Reserve(b, 5));
  EXPECT_EQ(t.Adopt(b, std::vector<int32_t>{0}, 1).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lifeline
