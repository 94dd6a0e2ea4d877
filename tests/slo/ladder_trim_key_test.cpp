// The [ladder] trim_to_tokens key: default, parsed value, and range errors that name the
// file, line and dotted key.
#include <string>

#include <gtest/gtest.h>

#include "slo/slo_config.h"

namespace lifeline::slo {
namespace {

TEST(LadderTrimKeyTest, DefaultParsedAndRange) {
  EXPECT_EQ(DefaultSloConfig().ladder.trim_to_tokens, 2048);
  auto c = ParseSloConfig("[ladder]\ntrim_to_tokens = 300\n", "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ladder.trim_to_tokens, 300);
  for (const char* bad : {"0", "16777217", "1.5", "\"9\""}) {
    auto e = ParseSloConfig(std::string("[ladder]\ntrim_to_tokens = ") + bad + "\n", "t.toml");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("t.toml:2: ladder.trim_to_tokens"), std::string::npos)
        << e.status().message();
  }
}

}  // namespace
}  // namespace lifeline::slo
