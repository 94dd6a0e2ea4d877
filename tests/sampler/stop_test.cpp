#include "engine/sampler/stop.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

StopMatcher Make(std::vector<std::string> stops) {
  auto m = StopMatcher::Create(std::move(stops));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// Pushes pieces in order; returns everything emitted (plus Finish() when no stop matched).
std::string Stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    StopPush r = m.Push(p);
    out += r.emit;
    if (r.stopped) return out;
  }
  return out + m.Finish();
}

TEST(StopMatcher, NoStopsPassesTextThrough) {
  StopMatcher m = Make({});
  EXPECT_EQ(m.Push("hello ").emit, "hello ");
  EXPECT_EQ(m.Push("world").emit, "world");
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopMatcher, StopSplitAcrossPushes) {
  StopMatcher m = Make({"</end>"});
  StopPush a = m.Push("Hello </e");
  EXPECT_EQ(a.emit, "Hello ");
  EXPECT_FALSE(a.stopped);
  EXPECT_EQ(m.held_bytes(), 3u);
  StopPush b = m.Push("nd> and more");
  EXPECT_EQ(b.emit, "");
  EXPECT_TRUE(b.stopped);
  EXPECT_EQ(m.matched_index(), 0);
  // Nothing after a stop is ever emitted.
  StopPush c = m.Push("later text");
  EXPECT_EQ(c.emit, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(m.Finish(), "");
}

TEST(StopMatcher, HeldPrefixIsReleasedWhenItDiverges) {
  StopMatcher m = Make({"</end>"});
  EXPECT_EQ(m.Push("a</e").emit, "a");
  EXPECT_EQ(m.Push("x").emit, "</ex");
  EXPECT_EQ(m.Push("</").emit, "");
  EXPECT_EQ(m.Finish(), "</");  // generation ended another way: held text goes out
}

TEST(StopMatcher, StopAtTheVeryStart) {
  StopMatcher m = Make({"foo", "STOP"});
  StopPush r = m.Push("STOP right there");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(m.matched_index(), 1);

  StopMatcher split = Make({"STOP"});
  EXPECT_EQ(split.Push("ST").emit, "");
  StopPush r2 = split.Push("OP");
  EXPECT_EQ(r2.emit, "");
  EXPECT_TRUE(r2.stopped);
}

TEST(StopMatcher, StopInsideOnePieceTruncatesIt) {
  StopMatcher m = Make({"\n\n"});
  StopPush r = m.Push("line one\n\nline two");
  EXPECT_EQ(r.emit, "line one");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, OverlappingPrefixes) {
  // "ab" and "abc" share a prefix: "ab" completes first and wins.
  StopMatcher m = Make({"abc", "ab"});
  EXPECT_EQ(m.Push("xa").emit, "x");
  StopPush r = m.Push("b");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(m.matched_index(), 1);

  // Both complete in the same push at the same position: the longer one is reported.
  StopMatcher both = Make({"ab", "abc"});
  StopPush r2 = both.Push("zabcd");
  EXPECT_EQ(r2.emit, "z");
  EXPECT_EQ(both.matched_index(), 1);

  // A stop whose own prefix repeats ("aab" inside "aaab") is still found byte by byte.
  StopMatcher self = Make({"aab"});
  EXPECT_EQ(Stream(self, {"a", "a", "a", "b", "tail"}), "a");
  EXPECT_TRUE(self.stopped());

  // The earliest-starting stop wins even if listed later.
  StopMatcher order = Make({"cd", "bc"});
  EXPECT_EQ(Stream(order, {"abcd"}), "a");
  EXPECT_EQ(order.matched_index(), 1);
}

TEST(StopMatcher, MultiByteUtf8StopFedByteByByte) {
  const std::string text = "好的停止了";  // the stop "停止" sits after two 3-byte characters
  StopMatcher m = Make({"停止"});
  std::string out;
  bool stopped = false;
  for (char c : text) {
    StopPush r = m.Push(std::string(1, c));
    // Every chunk is whole characters: it never ends inside a sequence.
    EXPECT_EQ(IncompleteUtf8TailBytes(r.emit), 0u);
    out += r.emit;
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "好的");
}

TEST(StopMatcher, IncompleteUtf8IsHeldUntilComplete) {
  StopMatcher m = Make({});
  EXPECT_EQ(m.Push("caf\xC3").emit, "caf");
  EXPECT_EQ(m.Push("\xA9!").emit, "\xC3\xA9!");
  // Stop "é" vs text "ç": same lead byte, different continuation.
  StopMatcher e = Make({"\xC3\xA9"});
  EXPECT_EQ(e.Push("\xC3").emit, "");
  StopPush r = e.Push("\xA7 ok");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.emit, "\xC3\xA7 ok");
  // A 4-byte emoji arriving in two halves.
  StopMatcher f = Make({"zz"});
  EXPECT_EQ(f.Push("x\xF0\x9F").emit, "x");
  EXPECT_EQ(f.Push("\x98\x80y").emit, "\xF0\x9F\x98\x80y");
}

TEST(StopMatcher, IncompleteUtf8TailBytes) {
  EXPECT_EQ(IncompleteUtf8TailBytes(""), 0u);
  EXPECT_EQ(IncompleteUtf8TailBytes("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8TailBytes("a\xE5"), 1u);
  EXPECT_EQ(IncompleteUtf8TailBytes("a\xE5\x81"), 2u);
  EXPECT_EQ(IncompleteUtf8TailBytes("a\xE5\x81\x9C"), 0u);
  EXPECT_EQ(IncompleteUtf8TailBytes("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8TailBytes("\x81\x81"), 0u);  // stray continuation bytes: not held
  EXPECT_EQ(IncompleteUtf8TailBytes("a\xFF"), 0u);     // invalid lead: not held
}

// Property check against a reference computed on the whole text at once: emitted text equals
// the text up to the earliest stop occurrence, for any way of cutting the stream into pieces.
TEST(StopMatcher, MatchesWholeTextReferenceForRandomChunking) {
  const std::vector<std::string> stops = {"abc", "ca", "bbb"};
  uint32_t x = 2024;
  auto next = [&] { return (x = x * 1103515245u + 12345u) >> 16; };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = static_cast<int>(next() % 30);
    for (int i = 0; i < len; ++i) text += static_cast<char>('a' + next() % 3);
    size_t first = std::string::npos;
    for (const std::string& s : stops) first = std::min(first, text.find(s));
    const std::string want = first == std::string::npos ? text : text.substr(0, first);

    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + next() % 4;
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    StopMatcher m = Make(stops);
    ASSERT_EQ(Stream(m, pieces), want) << "text '" << text << "'";
    EXPECT_EQ(m.stopped(), first != std::string::npos) << "text '" << text << "'";
    EXPECT_LT(m.held_bytes(), 3u);
  }
}

TEST(StopValidation, Limits) {
  std::vector<std::string> sixteen(16, std::string(1024, 'x'));
  EXPECT_TRUE(ValidateStopSequences(sixteen).ok());

  std::vector<std::string> seventeen(17, "x");
  Status many = ValidateStopSequences(seventeen);
  EXPECT_EQ(many.code(), StatusCode::kOutOfRange);
  EXPECT_NE(many.message().find("stop: 17"), std::string::npos) << many.message();
  EXPECT_NE(many.message().find("16"), std::string::npos) << many.message();

  Status empty = ValidateStopSequences({"ok", ""});
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("stop[1]"), std::string::npos) << empty.message();
  EXPECT_NE(empty.message().find("empty"), std::string::npos) << empty.message();

  Status longer = ValidateStopSequences({std::string(1025, 'y')});
  EXPECT_EQ(longer.code(), StatusCode::kOutOfRange);
  EXPECT_NE(longer.message().find("stop[0]: 1025 bytes"), std::string::npos) << longer.message();
  EXPECT_NE(longer.message().find("1024"), std::string::npos) << longer.message();

  Status mib = ValidateStopSequences({std::string(1 << 20, 'z')});
  EXPECT_FALSE(mib.ok());

  Status utf8 = ValidateStopSequences({"fine", "ab\xFF"});
  EXPECT_EQ(utf8.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(utf8.message().find("stop[1]: invalid UTF-8 at byte 2"), std::string::npos)
      << utf8.message();
  EXPECT_FALSE(ValidateStopSequences({"\xED\xA0\x80"}).ok());  // UTF-16 surrogate
  EXPECT_FALSE(ValidateStopSequences({"\xC0\xAF"}).ok());      // overlong '/'
  EXPECT_FALSE(ValidateStopSequences({"\xE5\x81"}).ok());      // truncated
  EXPECT_TRUE(ValidateStopSequences({"停止", "\xF0\x9F\x98\x80"}).ok());

  EXPECT_FALSE(StopMatcher::Create({""}).ok());
}

}  // namespace
}  // namespace lifeline
