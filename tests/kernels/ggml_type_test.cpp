// ggml type ids, names and block geometry (engine/kernels/ggml_type.h). Expected sizes are
// the GGUF format's, worked out from each block's fields (e.g. Q4_K: f16 d + f16 dmin +
// 12 packed scale bytes + 256 four-bit values = 144 bytes).
#include "engine/kernels/ggml_type.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "engine/kernels/ref/quant_blocks.h"

namespace lifeline {
namespace {

struct Expected {
  uint32_t id;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
};

// ids from ggml's enum ggml_type (the numbers stored in GGUF tensor records).
constexpr Expected kExpected[] = {
    {0, "f32", 1, 4},
    {1, "f16", 1, 2},
    {2, "q4_0", 32, 2 + 32 / 2},              // d, 32 nibbles
    {3, "q4_1", 32, 2 + 2 + 32 / 2},          // d, m, 32 nibbles
    {6, "q5_0", 32, 2 + 4 + 32 / 2},          // d, 32 high bits, 32 nibbles
    {7, "q5_1", 32, 2 + 2 + 4 + 32 / 2},      // d, m, high bits, nibbles
    {8, "q8_0", 32, 2 + 32},                  // d, 32 bytes
    {9, "q8_1", 32, 2 + 2 + 32},              // d, s, 32 bytes
    {10, "q2_k", 256, 16 + 256 / 4 + 2 + 2},  // 16 scale bytes, 2-bit values, d, dmin = 84
    {11, "q3_k", 256, 256 / 8 + 256 / 4 + 12 + 2},  // hmask, 2-bit values, scales, d = 110
    {12, "q4_k", 256, 2 + 2 + 12 + 256 / 2},        // 144
    {13, "q5_k", 256, 2 + 2 + 12 + 256 / 8 + 256 / 2},  // 176
    {14, "q6_k", 256, 256 / 2 + 256 / 4 + 16 + 2},      // ql, qh, int8 scales, d = 210
    {15, "q8_k", 256, 4 + 256 + 16 * 2},                // f32 d, values, int16 bsums = 292
    {20, "iq4_nl", 32, 2 + 32 / 2},                     // d, 32 nibble indices
    {24, "i8", 1, 1},
    {25, "i16", 1, 2},
    {26, "i32", 1, 4},
    {27, "i64", 1, 8},
    {28, "f64", 1, 8},
    {30, "bf16", 1, 2},
};

TEST(GgmlType, TraitsMatchTheFormat) {
  for (const auto& e : kExpected) {
    const auto t = GetTypeTraits(e.id);
    ASSERT_TRUE(t.has_value()) << e.name;
    EXPECT_EQ(static_cast<uint32_t>(t->type), e.id) << e.name;
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_elems, e.block_elems) << e.name;
    EXPECT_EQ(t->block_bytes, e.block_bytes) << e.name;
    EXPECT_EQ(TypeTraits(t->type).block_bytes, e.block_bytes) << e.name;
    const auto by_name = TypeFromName(e.name);
    ASSERT_TRUE(by_name.has_value()) << e.name;
    EXPECT_EQ(static_cast<uint32_t>(*by_name), e.id);
  }
}

TEST(GgmlType, BlockStructsMatchTraits) {
  EXPECT_EQ(sizeof(ref::BlockQ4_0), TypeTraits(GgmlType::kQ4_0).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ4_1), TypeTraits(GgmlType::kQ4_1).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ5_0), TypeTraits(GgmlType::kQ5_0).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ5_1), TypeTraits(GgmlType::kQ5_1).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ8_0), TypeTraits(GgmlType::kQ8_0).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ8_1), TypeTraits(GgmlType::kQ8_1).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ2K), TypeTraits(GgmlType::kQ2_K).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ3K), TypeTraits(GgmlType::kQ3_K).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ4K), TypeTraits(GgmlType::kQ4_K).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ5K), TypeTraits(GgmlType::kQ5_K).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ6K), TypeTraits(GgmlType::kQ6_K).block_bytes);
  EXPECT_EQ(sizeof(ref::BlockQ8K), TypeTraits(GgmlType::kQ8_K).block_bytes);
}

TEST(GgmlType, UnknownIdsAndNamesAreRejected) {
  // 4 and 5 were q4_2 / q4_3, removed from the format; 16 and 29 are i-quants Lifeline does
  // not know; the rest are beyond any assigned id.
  for (uint32_t id : {4u, 5u, 16u, 29u, 31u, 1000u, std::numeric_limits<uint32_t>::max()}) {
    EXPECT_FALSE(GetTypeTraits(id).has_value()) << id;
  }
  EXPECT_FALSE(TypeFromName("q4_2").has_value());
  EXPECT_FALSE(TypeFromName("Q4_0").has_value());  // names are lower case, as llama.cpp's
  EXPECT_FALSE(TypeFromName("").has_value());
}

TEST(GgmlType, RowBytes) {
  EXPECT_EQ(RowBytes(GgmlType::kF32, 7), 28u);
  EXPECT_EQ(RowBytes(GgmlType::kF16, 0), 0u);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 4096), 4096u / 256 * 210);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 256), 144u);
  // Not a whole number of blocks.
  EXPECT_FALSE(RowBytes(GgmlType::kQ4_0, 33).has_value());
  EXPECT_FALSE(RowBytes(GgmlType::kQ4_K, 128).has_value());
  EXPECT_FALSE(RowBytes(GgmlType::kF32, -1).has_value());
  // 2^62 Q4_0 values are 2^57 blocks of 18 bytes (< 2^62): fits. 2^63 - 1 f64 values need
  // about 2^66 bytes: overflow is reported, not wrapped.
  EXPECT_TRUE(RowBytes(GgmlType::kQ4_0, int64_t{1} << 62).has_value());
  EXPECT_FALSE(RowBytes(GgmlType::kF64, std::numeric_limits<int64_t>::max()).has_value());
}

}  // namespace
}  // namespace lifeline
