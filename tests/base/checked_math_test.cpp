#include "base/checked_math.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "base/status.h"

namespace lifeline {
namespace {

TEST(CheckedMath, AddDetectsOverflow) {
  uint64_t out = 0;
  EXPECT_TRUE(CheckedAdd(1, 2, &out));
  EXPECT_EQ(out, 3u);
  EXPECT_FALSE(CheckedAdd(std::numeric_limits<uint64_t>::max(), 1, &out));
}

TEST(CheckedMath, MulDetectsOverflow) {
  uint64_t out = 0;
  EXPECT_TRUE(CheckedMul(1ull << 31, 1ull << 32, &out));
  EXPECT_EQ(out, 1ull << 63);
  EXPECT_FALSE(CheckedMul(1ull << 32, 1ull << 32, &out));
}

TEST(CheckedMath, PadRoundsUpAndRejectsBadAlignment) {
  uint64_t out = 0;
  EXPECT_TRUE(CheckedPad(33, 32, &out));
  EXPECT_EQ(out, 64u);
  EXPECT_TRUE(CheckedPad(64, 32, &out));
  EXPECT_EQ(out, 64u);
  EXPECT_FALSE(CheckedPad(1, 0, &out));
  EXPECT_FALSE(CheckedPad(1, 24, &out));
  // The GGML_PAD wrap: SIZE_MAX-ish values must not silently wrap to a small number.
  EXPECT_FALSE(CheckedPad(std::numeric_limits<uint64_t>::max() - 3, 32, &out));
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("x: must be even, got " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  LL_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Status, PropagatesThroughAssignOrReturn) {
  EXPECT_EQ(Quarter(8).value(), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().ToString(), "invalid_argument: x: must be even, got 3");
}

}  // namespace
}  // namespace lifeline
