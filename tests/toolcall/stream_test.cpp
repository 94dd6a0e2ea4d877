// Streaming: the deltas, concatenated, equal the whole-output parse at every split point
// (one cut anywhere, two cuts anywhere, byte by byte), and text is held back only while it may
// still be the start of a marker.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "text/toolcall/parser.h"
#include "toolcall/agreement.h"

namespace lifeline::toolcall {
namespace {

using F = ToolCallFormat;

struct Sample {
  F format;
  std::string output;
};

const std::vector<Sample>& Samples() {
  static const std::vector<Sample> s = {
      {F::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {F::kHermes, "Checking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}</tool_call>\"}}\n"
                   "</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call> done"},
      {F::kHermes, "<think>\nhm <tool_call>\n</think>\n\n<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": [1, {\"z\": null}]}}</tool_call>"},
      {F::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call> <tool_call>{\"name\": \"g\", \"arguments\": {}}"},
      {F::kHermes, "a < b <t <to <tool_cal <tool_call <tool_call>x"},
      {F::kHermes, "  \xe6\x97\xa5\xe6\x9c\xac <tool_call>{\"name\": \"u\", \"arguments\": {\"s\": \"\\u00e9\xc3\xa9\"}}\n</tool_"},
      {F::kLlama3Json, "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}\nok"},
      {F::kLlama3Json, " <|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}"},
      {F::kLlama3Json, "text <|python_ta <|python_tag|>oops {\"name\": \"g\", \"parameters\": {}}"},
      {F::kLlama3Json, "{\"answer\": [1, 2, {\"b\": false}]} is JSON"},
      {F::kMistralNemo, "Sure. [TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abcdefghi\"}, {\"name\": \"g\", \"arguments\": \"{}\"}]"},
      {F::kMistralNemo, "[TOOL_CALL [TOOL_CALLS][{\"name\": \"f\"}] tail"},
      {F::kMistralArgs, "[THINK]x [TOOL_CALLS]y[/THINK]ok[TOOL_CALLS]f[CALL_ID]123456789[ARGS]{\"a\": \"[ARGS]\"}[TOOL_CALLS]g[ARGS] {}"},
      {F::kMistralArgs, "[TOOL_CALLS]f [ARGS]{}[TOOL_CALLS]h[ARGS]{\"deep\": [[[]]]}"},
      {F::kGeneric, "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"t\": \"]\"}}] and more"},
      {F::kGeneric, "  {\"name\": \"f\", \"arguments\": {\"n\": -0.5e-3}}"},
      {F::kGeneric, "[1, 2, 3]"},
      {F::kNone, " raw <tool_call> text "},
  };
  return s;
}

TEST(ToolCallStream, EqualsWholeAtEverySplitPoint) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.output);
    for (size_t i = 0; i <= s.output.size(); ++i) {
      ASSERT_EQ(testing::CheckAgreement(s.format, s.output, {i}), "") << "cut at " << i;
    }
  }
}

TEST(ToolCallStream, EqualsWholeAtEveryPairOfSplitPoints) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.output);
    for (size_t i = 0; i <= s.output.size(); ++i) {
      for (size_t j = i; j <= s.output.size(); ++j) {
        ASSERT_EQ(testing::CheckAgreement(s.format, s.output, {i, j}), "")
            << "cuts at " << i << ", " << j;
      }
    }
  }
}

TEST(ToolCallStream, EqualsWholeByteByByte) {
  for (const Sample& s : Samples()) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < s.output.size(); ++i) cuts.push_back(i);
    EXPECT_EQ(testing::CheckAgreement(s.format, s.output, cuts), "") << s.output;
  }
}

std::string Content(const std::vector<ToolCallDelta>& deltas) {
  std::string s;
  for (const auto& d : deltas) {
    if (d.kind == ToolCallDelta::Kind::kContent) s += d.text;
  }
  return s;
}

TEST(ToolCallStream, HoldsBackOnlyAPossibleMarker) {
  ToolCallStreamParser p(F::kHermes);
  EXPECT_EQ(Content(p.Push("Hello <tool")), "Hello");  // the space waits for more content
  EXPECT_EQ(Content(p.Push("s are nice")), " <tools are nice");
  EXPECT_EQ(Content(p.Push(" <")), "");
  EXPECT_EQ(Content(p.Push("b>")), " <b>");
  EXPECT_EQ(Content(p.Finish()), "");
}

TEST(ToolCallStream, CallIsTwoDeltasShapedLikeOpenAiChunks) {
  ToolCallParseOptions o;
  o.id_seed = 42;
  ToolCallStreamParser p(F::kHermes, o);
  auto d1 = p.Push("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", ");
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].kind, ToolCallDelta::Kind::kContent);
  EXPECT_EQ(d1[0].text, "Let me check.");
  EXPECT_TRUE(p.Push("\"arguments\": {\"city\": \"Paris\"").empty());  // call not closed yet
  auto d2 = p.Push("}}\n</tool_call>");
  ASSERT_EQ(d2.size(), 2u);
  EXPECT_EQ(d2[0].kind, ToolCallDelta::Kind::kToolCall);
  EXPECT_TRUE(d2[0].first);
  EXPECT_EQ(d2[0].index, 0u);
  EXPECT_EQ(d2[0].name, "get_weather");
  EXPECT_TRUE(testing::IdHasShape(F::kHermes, d2[0].id));
  EXPECT_EQ(d2[0].text, "");
  EXPECT_FALSE(d2[1].first);
  EXPECT_EQ(d2[1].index, 0u);
  EXPECT_EQ(d2[1].text, R"({"city":"Paris"})");
  EXPECT_TRUE(d2[1].id.empty());
  EXPECT_TRUE(p.Finish().empty());
  EXPECT_EQ(p.calls_emitted(), 1u);
  EXPECT_FALSE(p.malformed());
  // The same id as the whole-output parse with the same seed.
  auto whole = ParseToolCalls(
      F::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
      o);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].id, d2[0].id);
}

TEST(ToolCallStream, MalformedCallIsReleasedAsContentWhenItBreaks) {
  ToolCallStreamParser p(F::kMistralArgs);
  EXPECT_EQ(Content(p.Push("Hi [TOOL_CALLS]get_")), "Hi");
  // The space cannot be in a name: the held call text is content from here on.
  EXPECT_EQ(Content(p.Push("weather now")), " [TOOL_CALLS]get_weather now");
  EXPECT_TRUE(p.malformed());
  EXPECT_TRUE(p.Finish().empty());
}

TEST(ToolCallStream, NothingAfterFinish) {
  ToolCallStreamParser p(F::kGeneric);
  EXPECT_EQ(Content(p.Push("{\"na")), "");
  EXPECT_EQ(Content(p.Finish()), "{\"na");
  EXPECT_TRUE(p.Push("more").empty());
  EXPECT_TRUE(p.Finish().empty());
}

}  // namespace
}  // namespace lifeline::toolcall
