// Reasoning split: format detection on the repository's real chat templates, whether a
// generation starts inside its thinking from the prompts those templates render (the
// Python-jinja2 renderings in tests/template/data/reference.json, an independent
// implementation), and the splitter: the same split whole and at every chunk boundary.
#include "text/toolcall/reasoning.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace lifeline::toolcall {
namespace {

std::filesystem::path DataDir() {
  return std::filesystem::path(LIFELINE_TESTS_DIR) / "template" / "data";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using RF = ReasoningFormat;

// Written by reading each template: how it renders an assistant turn's thinking.
TEST(ReasoningFormat, DetectedFromRealTemplates) {
  const std::pair<const char*, RF> expected[] = {
      {"deepseek-r1-distill-llama-8b", RF::kThinkTags},
      {"deepseek-r1-distill-llama-8b-jan2025", RF::kThinkTags},
      {"qwen3", RF::kThinkTags},
      {"qwq-32b", RF::kThinkTags},
      {"smollm3-3b-unsloth", RF::kThinkTags},
      {"deepseek-v3.1", RF::kThinkTags},
      {"magistral-small-2509-unsloth", RF::kBracketThink},
      {"granite-3.3-2b-instruct", RF::kThinkTags},  // <think></think> then <response></response>
      {"granite-4.0", RF::kNone},
      {"deepseek-v3", RF::kNone},
  };
  for (const auto& [name, want] : expected) {
    const std::string src = ReadFile(DataDir() / "templates" / (std::string(name) + ".jinja"));
    ASSERT_FALSE(src.empty()) << name;
    EXPECT_EQ(DetectReasoningFormat(src), want) << name;
  }
  for (RF f : {RF::kNone, RF::kThinkTags, RF::kBracketThink, RF::kGranite}) {
    EXPECT_EQ(ReasoningFormatFromName(ReasoningFormatName(f)), f);
  }
  EXPECT_FALSE(ReasoningFormatFromName("thinking").has_value());
}

// R1's generation prompt opens the thinking ("<think>\n"): its output starts inside it. Qwen3 /
// SmolLM3 with thinking disabled render an empty, closed block: the output is answer.
TEST(ReasoningFormat, StartsInReasoningFromRenderedPrompts) {
  const nlohmann::json ref = nlohmann::json::parse(ReadFile(DataDir() / "reference.json"));
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    if (!c.contains("expected") || !c["expected"].is_string()) continue;
    const std::string t = c["template"], conv = c["conversation"], prompt = c["expected"];
    if (t == "deepseek-r1-distill-llama-8b" && conv == "single_user") {
      EXPECT_TRUE(StartsInReasoning(RF::kThinkTags, prompt)) << prompt;
      ++checked;
    }
    if ((t == "qwen3" || t == "smollm3-3b-unsloth") && conv == "thinking_disabled") {
      EXPECT_FALSE(StartsInReasoning(RF::kThinkTags, prompt)) << t;
      ++checked;
    }
    if (t == "qwen3" && conv == "single_user") {  // thinking on: the model opens it itself
      EXPECT_FALSE(StartsInReasoning(RF::kThinkTags, prompt));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);
  EXPECT_FALSE(StartsInReasoning(RF::kNone, "<think>"));
}

ReasoningDelta Whole(RF f, bool starts, const std::string& out) {
  ReasoningSplitter s(f, starts);
  ReasoningDelta d = s.Feed(out);
  ReasoningDelta end = s.Finish();
  d.reasoning += end.reasoning;
  d.content += end.content;
  return d;
}

// The split of `out` fed in pieces cut at `cuts` (byte offsets, ascending).
ReasoningDelta Pieces(RF f, bool starts, const std::string& out, const std::vector<size_t>& cuts) {
  ReasoningSplitter s(f, starts);
  ReasoningDelta d;
  size_t at = 0;
  for (size_t c : cuts) {
    ReasoningDelta x = s.Feed(std::string_view(out).substr(at, c - at));
    d.reasoning += x.reasoning;
    d.content += x.content;
    at = c;
  }
  ReasoningDelta x = s.Feed(std::string_view(out).substr(at));
  d.reasoning += x.reasoning;
  d.content += x.content;
  x = s.Finish();
  d.reasoning += x.reasoning;
  d.content += x.content;
  return d;
}

struct Case {
  RF format;
  bool starts;
  std::string out, reasoning, content;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // Qwen3 / QwQ: the model opens and closes; the blank lines after the close are dropped.
      {RF::kThinkTags, false, "<think>\nLet me add.\n</think>\n\n4", "Let me add.", "4"},
      // Leading whitespace before the opening marker.
      {RF::kThinkTags, false, "\n <think>x</think>y", "x", "y"},
      // R1: the prompt opened it; the output only closes.
      {RF::kThinkTags, true, "Hmm, 2+2.\n</think>\n\nThe answer is 4.", "Hmm, 2+2.",
       "The answer is 4."},
      // Cut off at max_tokens inside the thinking: all of it is reasoning.
      {RF::kThinkTags, true, "Still thinking about </thi", "Still thinking about </thi", ""},
      {RF::kThinkTags, false, "<think>never closed", "never closed", ""},
      // No thinking at all: the answer, untouched (a marker later on is answer text).
      {RF::kThinkTags, false, "Plain answer with <think> inside.", "",
       "Plain answer with <think> inside."},
      {RF::kThinkTags, false, "<thinking is not the marker", "", "<thinking is not the marker"},
      // A tool call after the thinking stays in the answer for the tool-call parser.
      {RF::kThinkTags, false, "<think>call it</think>\n<tool_call>{\"name\":\"f\"}</tool_call>",
       "call it", "<tool_call>{\"name\":\"f\"}</tool_call>"},
      // An empty closed block (thinking disabled by the model itself).
      {RF::kThinkTags, false, "<think>\n\n</think>\n\nHi!", "", "Hi!"},
      // Magistral.
      {RF::kBracketThink, false, "[THINK]draft[/THINK]Answer.", "draft", "Answer."},
      // Granite 3.2.
      {RF::kGranite, false, "Here is my thought process: ok Here is my response: Done.", "ok",
       "Done."},
      // No format: everything is answer, even a marker.
      {RF::kNone, true, "<think>x</think>y", "", "<think>x</think>y"},
      // UTF-8 around the markers.
      {RF::kThinkTags, false, "<think>Ünï 𝄞</think>\nÉté ✓", "Ünï 𝄞", "Été ✓"},
      // The reasoning is trimmed at both ends (llama.cpp strips it); whitespace inside stays.
      {RF::kThinkTags, true, "\n  a\n\n b \n</think>c", "a\n\n b", "c"},
      {RF::kThinkTags, true, " \n ", "", ""},
      // Whitespace only.
      {RF::kThinkTags, false, " \n", "", " \n"},
  };
  return cases;
}

TEST(ReasoningSplitter, WholeOutputs) {
  for (const Case& c : Cases()) {
    const ReasoningDelta d = Whole(c.format, c.starts, c.out);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.out;
    EXPECT_EQ(d.content, c.content) << c.out;
  }
}

// Streamed token by token as a detokenizer releases text: any cut, one or two at a time, gives
// the same split as the whole output.
TEST(ReasoningSplitter, EveryChunkBoundarySplitsTheSame) {
  for (const Case& c : Cases()) {
    for (size_t i = 0; i <= c.out.size(); ++i) {
      for (size_t j = i; j <= c.out.size(); ++j) {
        const ReasoningDelta d = Pieces(c.format, c.starts, c.out, {i, j});
        ASSERT_EQ(d.reasoning, c.reasoning) << c.out << " cut at " << i << "," << j;
        ASSERT_EQ(d.content, c.content) << c.out << " cut at " << i << "," << j;
      }
    }
    std::vector<size_t> bytes;
    for (size_t i = 1; i < c.out.size(); ++i) bytes.push_back(i);
    const ReasoningDelta d = Pieces(c.format, c.starts, c.out, bytes);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.out << " byte by byte";
    EXPECT_EQ(d.content, c.content) << c.out << " byte by byte";
  }
}

// What is released as soon as it can be: reasoning before its close arrives, the answer from
// its first byte; only a possible marker prefix and trailing whitespace wait (the reasoning is
// trimmed at both ends, as llama.cpp's parser trims it).
TEST(ReasoningSplitter, ReleasesEverythingThatCannotBeAMarker) {
  ReasoningSplitter s(RF::kThinkTags, false);
  ReasoningDelta d = s.Feed("<thi");
  EXPECT_TRUE(d.reasoning.empty() && d.content.empty());
  d = s.Feed("nk>step one, </th");
  EXPECT_EQ(d.reasoning, "step one,") << "the space waits: it is dropped if the close follows";
  EXPECT_TRUE(s.in_reasoning());
  d = s.Feed("ink> \n");
  EXPECT_TRUE(d.reasoning.empty() && d.content.empty());
  EXPECT_TRUE(s.answering());
  d = s.Feed("A");
  EXPECT_EQ(d.content, "A");
  EXPECT_TRUE(s.saw_reasoning());
}

}  // namespace
}  // namespace lifeline::toolcall
