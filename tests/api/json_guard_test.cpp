#include "api/json_guard.h"

#include <string>

#include <gtest/gtest.h>

namespace lifeline::api {
namespace {

TEST(FindInvalidUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("plain ascii {\"a\":1}"), std::nullopt);
  // é (2 bytes), € (3 bytes), U+1F600 (4 bytes), U+10FFFF (the last code point).
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            std::nullopt);
}

TEST(FindInvalidUtf8, ReportsOffsetOfFirstBadSequence) {
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), 2u);                  // stray continuation byte
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);              // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xE0\x80\xAF"), 0u);            // overlong 3-byte
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1u);           // UTF-16 surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);        // U+110000, beyond Unicode
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);             // truncated at end
  EXPECT_EQ(FindInvalidUtf8("\xC3("), 0u);                   // continuation missing
  EXPECT_EQ(FindInvalidUtf8("ok\xF8\x88\x80\x80\x80"), 2u);  // 5-byte form
  EXPECT_EQ(FindInvalidUtf8("\xFF"), 0u);
}

TEST(ScanJsonDepth, CountsBracketsOutsideStrings) {
  EXPECT_FALSE(ScanJsonDepth("[[1]]", 2).exceeded);
  const DepthScan scan = ScanJsonDepth("[[1]]", 1);
  EXPECT_TRUE(scan.exceeded);
  EXPECT_EQ(scan.offset, 1u);  // the second '['
  // Siblings do not add up: depth is nesting, not count.
  EXPECT_FALSE(ScanJsonDepth("[[],[],{},[{}]]", 3).exceeded);
}

TEST(ScanJsonDepth, IgnoresBracketsInStringsIncludingEscapedQuotes) {
  EXPECT_FALSE(ScanJsonDepth(R"({"a":"[[[[[{{{{"})", 1).exceeded);
  EXPECT_FALSE(ScanJsonDepth(R"({"a":"\"[[[[","b":"\\"})", 1).exceeded);
  // After an escaped backslash the quote does end the string, so the '[' counts.
  EXPECT_TRUE(ScanJsonDepth(R"({"a":"\\",[)", 1).exceeded);
}

TEST(ScanJsonDepth, StopsEarlyOnHugeNesting) {
  const std::string deep(100000, '[');
  const DepthScan scan = ScanJsonDepth(deep, 64);
  EXPECT_TRUE(scan.exceeded);
  EXPECT_EQ(scan.offset, 64u);  // the 65th bracket
}

}  // namespace
}  // namespace lifeline::api
