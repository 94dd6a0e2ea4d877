// base/excerpt: quotes of untrusted text stay valid UTF-8 and say when they were cut.
#include "base/excerpt.h"

#include <string>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

TEST(Excerpt, CutsBeforeAUtf8ContinuationByte) {
  EXPECT_EQ(Utf8Prefix("abcdef", 4), "abcd");
  EXPECT_EQ(Utf8Prefix("abc", 4), "abc");
  // "\xC4\xA4" spans bytes 2-3: a cut at 3 keeps "ab", not half the character.
  EXPECT_EQ(Utf8Prefix("ab\xC4\xA4z", 3), "ab");
  EXPECT_EQ(Utf8Prefix("ab\xC4\xA4z", 4), "ab\xC4\xA4");
  // A 4-byte character cut anywhere inside is dropped whole.
  EXPECT_EQ(Utf8Prefix("a\xF0\x9F\x98\x80", 3), "a");
  EXPECT_EQ(Excerpt("abcdef", 4), "abcd...");
  EXPECT_EQ(Excerpt("abc", 4), "abc");
  EXPECT_EQ(Excerpt("ab\xC4\xA4z", 3), "ab...");
}

}  // namespace
}  // namespace lifeline
