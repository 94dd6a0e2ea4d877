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

// Q8 copies: a block of F16 comes back within Q8_0's error of every value (a step of the
// block's largest value / 127, half of it by rounding, plus F16's own rounding), the copy is
// 34 bytes per 32 values, so the same capacity holds 1.88x the blocks; an F32 pool likewise;
// a corrupted Q8 copy is still refused by its checksum.
TEST(HostKvTier, Q8CopiesHoldMoreBlocksAndComeBackWithinQ8Error) {
  auto kv = Storage();  // F16: 2 layers x 16 slots x (8 K + 8 V) = 512 values, 1024 bytes
  Fill(*kv, 1, 3.0f);
  std::vector<float> k_before(8), v_before(8);
  HostKvTier tier(kv.get(), 4 * kv->block_bytes(), nullptr, /*q8_copies=*/true);
  EXPECT_EQ(tier.copy_bytes(), 512u / 32 * 34);
  tier.OnEvict(1, 77, Tokens(10));
  EXPECT_EQ(tier.Stats().bytes, tier.copy_bytes());
  ASSERT_TRUE(tier.Restore(77, Tokens(10), 5));
  // The largest magnitude in block 1 is 3 + (100 + 15 + 7) / 8 = 18.25: one Q8 step is
  // 18.25 / 127 (per 32-value group at most that), half of it from rounding, and F16's
  // rounding of values up to 18.25 adds at most 2^-7.
  const float tolerance = 18.25f / 127 / 2 + 1.0f / 128 + 1e-4f;
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t slot = 0; slot < kKvBlockTokens; ++slot) {
      std::vector<float> k(8), v(8);
      kv->LoadK(l, 5, slot, k.data());
      kv->LoadV(l, 5, slot, v.data());
      for (size_t i = 0; i < 8; ++i) {
        const float want = 3.0f + static_cast<float>(l * 100 + slot + i) / 8;
        EXPECT_NEAR(k[i], want, tolerance) << l << " " << slot << " " << i;
        EXPECT_NEAR(v[i], -want, tolerance) << l << " " << slot << " " << i;
      }
    }
  }
  // Capacity in copies: 4 blocks' bytes hold floor(4 x 1024 / 544) = 7 Q8 copies.
  for (int32_t i = 0; i < 10; ++i) {
    Fill(*kv, 2, static_cast<float>(i));
    tier.OnEvict(2, 200 + i, Tokens(100 + i * 16));
  }
  EXPECT_EQ(tier.Stats().entries, 7);
  ASSERT_TRUE(tier.CorruptForTest(209));
  EXPECT_FALSE(tier.Restore(209, Tokens(100 + 9 * 16), 6));
  EXPECT_EQ(tier.Stats().corrupt, 1);

  // A pool already in Q8_0 is copied as it is.
  KvStorageShape shape = kv->shape();
  shape.type = KvType::kQ8_0;
  shape.k_row_elems = shape.v_row_elems = 32;
  shape.n_head_kv = 1;
  auto q8 = KvStorage::Create(shape, 1 << 20);
  ASSERT_TRUE(q8.ok());
  HostKvTier same((*q8).get(), 1 << 20, nullptr, /*q8_copies=*/true);
  EXPECT_EQ(same.copy_bytes(), (*q8)->block_bytes());
}

}  // namespace
}  // namespace lifeline::serving
