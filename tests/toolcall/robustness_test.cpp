// A deterministic mutation pass over call-shaped outputs (the same property check the libFuzzer
// harness tests/fuzz/toolcall_fuzz.cpp runs): random edits, spliced markers and random chunk
// boundaries; whole and streamed parsing must agree and every result must be well formed.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "toolcall/agreement.h"

namespace lifeline::toolcall {
namespace {

using F = ToolCallFormat;

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> s = {
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
      "<think>x</think>ok<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": [1]}\"}</tool_call>",
      "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}",
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"\\u00e9\"}}",
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": [true, null]}, \"id\": \"abcdefghi\"}]",
      "[THINK]t[/THINK][TOOL_CALLS]f[CALL_ID]123456789[ARGS]{\"a\": -1.5e2}[TOOL_CALLS]g[ARGS]{}",
      "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"s\": \"]}\"}}]",
      "Plain answer with <b>markup</b> and [brackets].",
  };
  return s;
}

TEST(ToolCallRobustness, MutatedOutputsAgreeAndAreWellFormed) {
  const std::vector<std::string> splices = {"<tool_call>", "</tool_call>", "<think>", "</think>",
                                            "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]",
                                            "[/THINK]", "<|python_tag|>", "{", "}", "[", "]",
                                            "\"", "\\", ":", ",", ";", "\n", "\xc3", "\xff"};
  const F formats[] = {F::kNone, F::kLlama3Json, F::kHermes, F::kMistralNemo, F::kMistralArgs,
                       F::kGeneric};
  std::mt19937_64 rng(20240611);
  size_t checked = 0, with_calls = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    std::string s = Seeds()[rng() % Seeds().size()];
    const int edits = static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0:
          s.insert(at, splices[rng() % splices.size()]);
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1 + rng() % 4);
          break;
        case 2:
          if (at < s.size()) s[at] = static_cast<char>(rng() % 256);
          break;
        default:
          s.insert(at, Seeds()[rng() % Seeds().size()]);
      }
    }
    std::vector<size_t> cuts;
    const size_t n_cuts = rng() % 6;
    for (size_t c = 0; c < n_cuts; ++c) cuts.push_back(s.empty() ? 0 : rng() % (s.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    ToolCallParseOptions options;
    options.id_seed = rng();
    options.starts_in_thinking = rng() % 8 == 0;
    for (F f : formats) {
      ASSERT_EQ(testing::CheckAgreement(f, s, cuts, options), "")
          << ToolCallFormatName(f) << " on: " << s;
      ++checked;
      with_calls += ParseToolCalls(f, s, options).calls.empty() ? 0 : 1;
    }
  }
  EXPECT_EQ(checked, 36000u);
  EXPECT_GT(with_calls, 3000u);  // the pass exercises calls, not only content
}

TEST(ToolCallRobustness, LimitsHold) {
  // A call larger than kMaxCallBytes is content; nesting past kMaxCallDepth is content.
  std::string big = "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"" +
                    std::string(kMaxCallBytes, 'x') + "\"}}</tool_call>";
  auto r = ParseToolCalls(F::kHermes, big);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_TRUE(r.malformed);
  EXPECT_EQ(r.content, big);
  std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " +
                     std::string(kMaxCallDepth, '[') + std::string(kMaxCallDepth, ']') +
                     "}}</tool_call>";
  auto d = ParseToolCalls(F::kHermes, deep);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, deep);
  // Deep JSON inside an arguments string is refused before nlohmann's recursive parser.
  std::string deep_string = "<tool_call>{\"name\": \"f\", \"arguments\": \"" +
                            std::string(100000, '[') + "\"}</tool_call>";
  auto ds = ParseToolCalls(F::kHermes, deep_string);
  EXPECT_TRUE(ds.calls.empty());
  EXPECT_EQ(ds.content, deep_string);
  // Just under the depth cap is a call.
  std::string ok = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " +
                   std::string(kMaxCallDepth - 2, '[') + std::string(kMaxCallDepth - 2, ']') +
                   "}}</tool_call>";
  EXPECT_EQ(ParseToolCalls(F::kHermes, ok).calls.size(), 1u);
}

}  // namespace
}  // namespace lifeline::toolcall
