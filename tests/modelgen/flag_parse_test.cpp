#include "modelgen/flag_parse.h"

#include <gtest/gtest.h>

namespace lifeline::modelgen {
namespace {

TEST(FlagParse, Integers) {
  EXPECT_EQ(ParseIntFlag("--dim", "64", 1, 100).value(), 64);
  EXPECT_EQ(ParseIntFlag("--dim", "-3", -5, 5).value(), -3);
  for (const char* bad : {"", "6x", "x6", " 6", "6.0", "1e3", "99999999999999999999"}) {
    auto r = ParseIntFlag("--dim", bad, 1, 100);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--dim"), std::string::npos);
  }
  auto high = ParseIntFlag("--layers", "101", 1, 100);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().message(), "--layers 101 is outside [1, 100]");
}

TEST(FlagParse, Seeds) {
  EXPECT_EQ(ParseUint64Flag("--seed", "0").value(), 0u);
  EXPECT_EQ(ParseUint64Flag("--seed", "18446744073709551615").value(), ~uint64_t{0});
  EXPECT_EQ(ParseUint64Flag("--seed", "0x10").value(), 16u);
  EXPECT_FALSE(ParseUint64Flag("--seed", "-1").ok());
  EXPECT_FALSE(ParseUint64Flag("--seed", "18446744073709551616").ok());
  EXPECT_FALSE(ParseUint64Flag("--seed", "0x").ok());
}

TEST(FlagParse, PositiveFloats) {
  EXPECT_DOUBLE_EQ(ParsePositiveFloatFlag("--rope-base", "10000").value(), 10000.0);
  EXPECT_DOUBLE_EQ(ParsePositiveFloatFlag("--rope-base", "1e6").value(), 1e6);
  for (const char* bad : {"0", "-1", "inf", "nan", "1e999", "abc", ""}) {
    auto r = ParsePositiveFloatFlag("--rope-base", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--rope-base"), std::string::npos);
  }
}

}  // namespace
}  // namespace lifeline::modelgen
