// [ladder] keys added with later ladder features (trim_to_tokens, raise_needs_fresh_samples):
// default, parsed value, and errors that name the file, line and dotted key.
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

TEST(LadderFreshSamplesKeyTest, DefaultParsedAndTypeError) {
  EXPECT_TRUE(DefaultSloConfig().ladder.raise_needs_fresh_samples);
  auto c = ParseSloConfig("[ladder]\nraise_needs_fresh_samples = false\n", "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->ladder.raise_needs_fresh_samples);
  auto e = ParseSloConfig("[ladder]\nraise_needs_fresh_samples = 1\n", "t.toml");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("t.toml:2: ladder.raise_needs_fresh_samples"),
            std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace lifeline::slo
