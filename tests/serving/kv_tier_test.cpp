// HostKvTier on a real KvStorage: an evicted block's bytes come back byte for byte into
// another block id; capacity drops the least recently used entry first (a restore counts as
// use); a corrupted copy is refused and dropped, never loaded; a token mismatch is no hit.
#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "serving/kv_tier.h"

namespace lifeline::serving {
namespace {

std::unique_ptr<KvStorage> Storage() {
  KvStorageShape shape;
  shape.n_layer = 2;
  shape.n_blocks = 8;
  shape.k_row_elems = 8;
  shape.v_row_elems = 8;
  shape.n_head_kv = 2;
  shape.type = KvType::kF16;
  auto s = KvStorage::Create(shape, 1 << 20);
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

// Fills block `b` with values derived from `seed` through the store path.
void Fill(KvStorage& kv, int32_t b, float seed) {
  std::vector<float> row(8);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t slot = 0; slot < kKvBlockTokens; ++slot) {
      for (size_t i = 0; i < row.size(); ++i) row[i] = seed + static_cast<float>(l * 100 + slot + i) / 8;
      kv.StoreK(l, b, slot, row.data());
      for (float& v : row) v = -v;
      kv.StoreV(l, b, slot, row.data());
    }
  }
}

std::vector<uint8_t> Bytes(const KvStorage& kv, int32_t b) {
  std::vector<uint8_t> out(kv.block_bytes());
  kv.CopyBlockOut(b, out.data());
  return out;
}

std::vector<int32_t> Tokens(int32_t first) {
  std::vector<int32_t> t(kKvBlockTokens);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(HostKvTier, AnEvictedBlockComesBackByteForByteElsewhere) {
  auto kv = Storage();
  Fill(*kv, 1, 3.0f);
  const std::vector<uint8_t> before = Bytes(*kv, 1);
  HostKvTier tier(kv.get(), 1 << 20);
  tier.OnEvict(1, 77, Tokens(10));
  Fill(*kv, 1, 9.0f);  // the pool reuses block 1
  EXPECT_TRUE(tier.Holds(77, Tokens(10)));
  EXPECT_FALSE(tier.Holds(77, Tokens(11))) << "same hash, other tokens: no hit";
  EXPECT_FALSE(tier.Restore(77, Tokens(11), 5));
  ASSERT_TRUE(tier.Restore(77, Tokens(10), 5));
  EXPECT_EQ(Bytes(*kv, 5), before);
  std::vector<float> k(8);
  kv->LoadK(1, 5, 3, k.data());
  EXPECT_FLOAT_EQ(k[0], 3.0f + 103.0f / 8);
  const KvTierStats s = tier.Stats();
  EXPECT_EQ(s.stored, 1);
  EXPECT_EQ(s.restored, 1);
  EXPECT_EQ(s.bytes, kv->block_bytes());
}

TEST(HostKvTier, CapacityDropsTheLeastRecentlyUsed) {
  auto kv = Storage();
  HostKvTier tier(kv.get(), 2 * kv->block_bytes());
  for (int32_t b = 0; b < 3; ++b) Fill(*kv, b, static_cast<float>(b));
  tier.OnEvict(0, 100, Tokens(0));
  tier.OnEvict(1, 101, Tokens(16));
  ASSERT_TRUE(tier.Restore(100, Tokens(0), 6));  // 100 is now the more recent
  tier.OnEvict(2, 102, Tokens(32));              // over capacity: 101 goes
  EXPECT_TRUE(tier.Holds(100, Tokens(0)));
  EXPECT_FALSE(tier.Holds(101, Tokens(16)));
  EXPECT_TRUE(tier.Holds(102, Tokens(32)));
  EXPECT_EQ(tier.Stats().dropped, 1);
  EXPECT_LE(tier.Stats().bytes, 2 * kv->block_bytes());
  HostKvTier none(kv.get(), 0);
  none.OnEvict(0, 100, Tokens(0));
  EXPECT_FALSE(none.Holds(100, Tokens(0)));
}

TEST(HostKvTier, ACorruptedCopyIsRefusedAndDropped) {
  auto kv = Storage();
  Fill(*kv, 0, 1.0f);
  Fill(*kv, 4, 2.0f);
  const std::vector<uint8_t> untouched = Bytes(*kv, 4);
  HostKvTier tier(kv.get(), 1 << 20);
  tier.OnEvict(0, 5, Tokens(0));
  ASSERT_TRUE(tier.CorruptForTest(5));
  EXPECT_FALSE(tier.Restore(5, Tokens(0), 4));
  EXPECT_EQ(Bytes(*kv, 4), untouched) << "nothing was loaded";
  EXPECT_FALSE(tier.Holds(5, Tokens(0)));
  EXPECT_EQ(tier.Stats().corrupt, 1);
  EXPECT_EQ(tier.Stats().entries, 0);
}

}  // namespace
}  // namespace lifeline::serving
