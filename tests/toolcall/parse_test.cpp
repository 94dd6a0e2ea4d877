// Whole-output parsing, per format. Expected contents and argument strings are written by
// hand from the format descriptions (format.h) and OpenAI's shapes; ids are checked for shape,
// determinism and uniqueness (their characters come from the seeded generator).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "text/toolcall/parser.h"
#include "toolcall/agreement.h"

namespace lifeline::toolcall {
namespace {

using F = ToolCallFormat;

struct Expect {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls = {};  // name, arguments
  bool malformed = false;
};

void Check(F format, const std::string& output, const Expect& e,
           const ToolCallParseOptions& options = {}) {
  SCOPED_TRACE(std::string(ToolCallFormatName(format)) + ": " + output);
  ParsedToolCalls r = ParseToolCalls(format, output, options);
  EXPECT_EQ(r.content, e.content);
  ASSERT_EQ(r.calls.size(), e.calls.size());
  for (size_t i = 0; i < e.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, e.calls[i].first);
    EXPECT_EQ(r.calls[i].arguments, e.calls[i].second);
    EXPECT_TRUE(testing::IdHasShape(format, r.calls[i].id)) << r.calls[i].id;
  }
  EXPECT_EQ(r.malformed, e.malformed);
  // And streamed byte by byte, the same.
  std::vector<size_t> cuts;
  for (size_t i = 1; i < output.size(); ++i) cuts.push_back(i);
  EXPECT_EQ(testing::CheckAgreement(format, output, cuts, options), "");
}

// --- Hermes / Qwen ------------------------------------------------------------------------

TEST(ToolCallParse, HermesQwenSingleCall) {
  Check(F::kHermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
        "\"unit\": \"celsius\"}}\n</tool_call>",
        {"", {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}});
}

TEST(ToolCallParse, HermesContentAndSeveralCalls) {
  Check(F::kHermes,
        "I'll check both cities.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>\nDone.\n",
        {"I'll check both cities.\n\n\nDone.",
         {{"get_weather", R"({"city":"Paris"})"}, {"get_weather", R"({"city":"Tokyo"})"}}});
}

TEST(ToolCallParse, HermesThinkingBlockStaysContentAndHidesMarkers) {
  Check(F::kHermes,
        "<think>\nMaybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call> is needed."
        "\n</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"llamas\"}}"
        "\n</tool_call>",
        {"<think>\nMaybe <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call> is needed."
         "\n</think>",
         {{"search", R"({"q":"llamas"})"}}});
}

TEST(ToolCallParse, HermesThinkingOpenedByThePrompt) {
  ToolCallParseOptions o;
  o.starts_in_thinking = true;
  Check(F::kHermes,
        "plan: <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>\n</think>\n"
        "<tool_call>{\"name\": \"y\", \"arguments\": {}}</tool_call>",
        {"plan: <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>\n</think>",
         {{"y", "{}"}}},
        o);
  // Without the option the first call counts.
  Check(F::kHermes, "plan: <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>",
        {"plan:", {{"x", "{}"}}});
}

TEST(ToolCallParse, HermesThinkOnlyAtTheStart) {
  // A <think> after content is plain text; the call after it is still a call.
  Check(F::kHermes,
        "use <think> tags\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
        {"use <think> tags", {{"f", "{}"}}});
}

TEST(ToolCallParse, HermesMalformedJsonKeepsTheText) {
  const std::string out =
      "Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>";
  Check(F::kHermes, out, {out, {}, true});
}

TEST(ToolCallParse, HermesMalformedThenGoodCall) {
  Check(F::kHermes,
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>\n"
        "<tool_call>{\"name\": \"g\", \"arguments\": {\"b\": 2}}</tool_call>",
        {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>",
         {{"g", R"({"b":2})"}},
         true});
}

TEST(ToolCallParse, HermesValidJsonThatIsNotACall) {
  Check(F::kHermes, "<tool_call>{\"foo\": 1}</tool_call>", {"<tool_call>{\"foo\": 1}</tool_call>", {}, true});
  Check(F::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
        {"<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", {}, true});
  Check(F::kHermes, "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
        {"<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", {}, true});
  Check(F::kHermes, "<tool_call>[1]</tool_call>", {"<tool_call>[1]</tool_call>", {}, true});
}

TEST(ToolCallParse, HermesCutOffOutput) {
  // Inside the JSON: not a call, text kept.
  Check(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"argu",
        {"<tool_call>\n{\"name\": \"f\", \"argu", {}, true});
  Check(F::kHermes, "ok <tool_call>", {"ok <tool_call>", {}, true});
  // After the JSON: a missing or cut closing tag still gives the call.
  Check(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", {"", {{"f", "{}"}}});
  Check(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_",
        {"", {{"f", "{}"}}});
}

TEST(ToolCallParse, HermesTextAfterTheJsonInsideTheTag) {
  // The call is complete at its closing brace; what follows is content.
  Check(F::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}} oops</tool_call>",
        {"oops</tool_call>", {{"f", "{}"}}});
}

TEST(ToolCallParse, HermesNearMarkersAreContent) {
  Check(F::kHermes, "a < b and <tool", {"a < b and <tool"});
  Check(F::kHermes, "<tools> are </tool_call> fun", {"<tools> are </tool_call> fun"});
  Check(F::kHermes, "<<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
        {"<", {{"f", "{}"}}});
}

TEST(ToolCallParse, UnicodeArguments) {
  // \u escapes become UTF-8; raw UTF-8 stays; a surrogate pair is one character.
  Check(F::kHermes,
        "<tool_call>{\"name\": \"translate\", \"arguments\": {\"text\": \"Z\\u00fcrich \xe6\x97\xa5"
        "\xe6\x9c\xac\", \"emoji\": \"\\ud83d\\ude00\", \"quote\": \"say \\\"hi\\\"\\n\"}}"
        "</tool_call>",
        {"",
         {{"translate", "{\"text\":\"Z\xc3\xbcrich \xe6\x97\xa5\xe6\x9c\xac\",\"emoji\":"
                        "\"\xf0\x9f\x98\x80\",\"quote\":\"say \\\"hi\\\"\\n\"}"}}});
  // A lone surrogate or invalid UTF-8 is not JSON nlohmann accepts: content.
  const std::string lone = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\ud800\"}}</tool_call>";
  Check(F::kHermes, lone, {lone, {}, true});
  const std::string bad = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\xff\"}}</tool_call>";
  Check(F::kHermes, bad, {bad, {}, true});
}

TEST(ToolCallParse, NestedArgumentsKeepKeyOrderAndValues) {
  Check(F::kHermes,
        "<tool_call>{\"name\": \"query\", \"arguments\": {\"zeta\": 1, \"alpha\": {\"range\": "
        "{\"min\": -1.5, \"max\": 2e3}, \"tags\": [\"a\", [true, false, null]]}, \"n\": 0}}"
        "</tool_call>",
        {"",
         {{"query", R"({"zeta":1,"alpha":{"range":{"min":-1.5,"max":2000.0},"tags":["a",[true,false,null]]},"n":0})"}}});
}

TEST(ToolCallParse, ArgumentsWrittenAsAJsonString) {
  Check(F::kHermes,
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call>",
        {"", {{"f", R"({"x":[1,2]})"}}});
  const std::string not_json = "<tool_call>{\"name\": \"f\", \"arguments\": \"x=1\"}</tool_call>";
  Check(F::kHermes, not_json, {not_json, {}, true});
}

TEST(ToolCallParse, ContentIsTrimmed) {
  Check(F::kHermes, "  \n Hello there. \n\n", {"Hello there."});
  Check(F::kHermes, "\n\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\n",
        {"", {{"f", "{}"}}});
}

// --- Llama 3.x ----------------------------------------------------------------------------

TEST(ToolCallParse, Llama3SingleCall) {
  Check(F::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  Check(F::kLlama3Json, "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", {"", {{"f", R"({"a":1})"}}});
  Check(F::kLlama3Json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", {"", {{"f", "{}"}}});
  Check(F::kLlama3Json, "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}",
        {"", {{"f", "{}"}}});
}

TEST(ToolCallParse, Llama3SeveralCalls) {
  Check(F::kLlama3Json,
        "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}\n"
        "{\"name\": \"c\", \"parameters\": {\"y\": \"z\"}}",
        {"", {{"a", R"({"x":1})"}, {"b", "{}"}, {"c", R"({"y":"z"})"}}});
}

TEST(ToolCallParse, Llama3ContentAroundCalls) {
  Check(F::kLlama3Json, "{\"name\": \"f\", \"parameters\": {}}\nThat is all.",
        {"That is all.", {{"f", "{}"}}});
  Check(F::kLlama3Json, "Let me check.<|python_tag|>{\"name\": \"f\", \"parameters\": {}}",
        {"Let me check.", {{"f", "{}"}}});
  // JSON later in prose is not a call (Llama writes calls as the whole message).
  Check(F::kLlama3Json, "Use {\"name\": \"f\", \"parameters\": {}} like this.",
        {"Use {\"name\": \"f\", \"parameters\": {}} like this."});
  Check(F::kLlama3Json, "The weather is sunny.", {"The weather is sunny."});
}

TEST(ToolCallParse, Llama3JsonAnswersAndBrokenCalls) {
  Check(F::kLlama3Json, "{\"answer\": 42}", {"{\"answer\": 42}"});
  Check(F::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"a\": 1}",
        {"{\"name\": \"f\", \"parameters\": {\"a\": 1}", {}, true});
  // Built-in tool syntax is not JSON: kept as content, flagged.
  Check(F::kLlama3Json, "<|python_tag|>brave_search.call(query=\"x\")",
        {"<|python_tag|>brave_search.call(query=\"x\")", {}, true});
  // A good call, then a broken one: the first stays a call.
  Check(F::kLlama3Json, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"par",
        {"; {\"name\": \"b\", \"par", {{"a", "{}"}}, true});
}

// --- Mistral ------------------------------------------------------------------------------

TEST(ToolCallParse, MistralNemoArray) {
  Check(F::kMistralNemo,
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
        "\"a1b2c3d4e\"}, {\"name\": \"get_time\", \"arguments\": {}, \"id\": \"z9y8x7w6v\"}]",
        {"", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}});
}

TEST(ToolCallParse, MistralSmall31SpaceAndStringArguments) {
  Check(F::kMistralNemo,
        "Sure.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": \\\"x\\\"}\"}]",
        {"Sure.", {{"f", R"({"q":"x"})"}}});
}

TEST(ToolCallParse, MistralNemoMalformed) {
  const std::string cut = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {]";
  Check(F::kMistralNemo, cut, {cut, {}, true});
  Check(F::kMistralNemo, "[TOOL_CALLS][]", {"[TOOL_CALLS][]", {}, true});
  Check(F::kMistralNemo, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 3]",
        {"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 3]", {}, true});
}

TEST(ToolCallParse, MistralArgsCalls) {
  Check(F::kMistralArgs, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  Check(F::kMistralArgs,
        "[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b_2-x[ARGS]{\"x\": [1, 2]}",
        {"", {{"a", "{}"}, {"b_2-x", R"({"x":[1,2]})"}}});
  Check(F::kMistralArgs, "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  // Both Mistral formats read both syntaxes.
  Check(F::kMistralArgs, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", {"", {{"f", "{}"}}});
  Check(F::kMistralNemo, "[TOOL_CALLS]f[ARGS]{}", {"", {{"f", "{}"}}});
}

TEST(ToolCallParse, MagistralThinkingThenCall) {
  Check(F::kMistralArgs,
        "[THINK]Need the weather: [TOOL_CALLS]fake[ARGS]{}[/THINK]Checking.[TOOL_CALLS]"
        "get_weather[ARGS]{\"city\": \"Paris\"}",
        {"[THINK]Need the weather: [TOOL_CALLS]fake[ARGS]{}[/THINK]Checking.",
         {{"get_weather", R"({"city":"Paris"})"}}});
}

TEST(ToolCallParse, MistralArgsMalformed) {
  Check(F::kMistralArgs, "[TOOL_CALLS]get weather[ARGS]{}", {"[TOOL_CALLS]get weather[ARGS]{}", {}, true});
  Check(F::kMistralArgs, "[TOOL_CALLS]f[ARG]{}", {"[TOOL_CALLS]f[ARG]{}", {}, true});
  Check(F::kMistralArgs, "[TOOL_CALLS]f[ARGS][1]", {"[TOOL_CALLS]f[ARGS][1]", {}, true});
  Check(F::kMistralArgs, "[TOOL_CALLS]f[CALL_ID]x[CALL_ID]y[ARGS]{}",
        {"[TOOL_CALLS]f[CALL_ID]x[CALL_ID]y[ARGS]{}", {}, true});
  // A broken call, then a good one.
  Check(F::kMistralArgs, "[TOOL_CALLS]f[ARGS]{\"a\" 1}[TOOL_CALLS]g[ARGS]{}",
        {"[TOOL_CALLS]f[ARGS]{\"a\" 1}", {{"g", "{}"}}, true});
}

// --- Generic ------------------------------------------------------------------------------

TEST(ToolCallParse, GenericObjectAndArray) {
  Check(F::kGeneric, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        {"", {{"get_weather", R"({"city":"Paris"})"}}});
  Check(F::kGeneric,
        "\n [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": "
        "\"v\"}}]\n",
        {"", {{"a", "{}"}, {"b", R"({"k":"v"})"}}});
  Check(F::kGeneric, "{\"name\": \"f\", \"arguments\": {}}\nCalled.", {"Called.", {{"f", "{}"}}});
}

TEST(ToolCallParse, GenericNonCalls) {
  Check(F::kGeneric, "Hello! How can I help?", {"Hello! How can I help?"});
  Check(F::kGeneric, "[1] Reference", {"[1] Reference"});
  Check(F::kGeneric, "Here: {\"name\": \"f\", \"arguments\": {}}",
        {"Here: {\"name\": \"f\", \"arguments\": {}}"});
  Check(F::kGeneric, "{\"name\": \"f\", \"arguments\": {\"a\": tru}}",
        {"{\"name\": \"f\", \"arguments\": {\"a\": tru}}", {}, true});
  Check(F::kGeneric, "{oops", {"{oops"});
}

TEST(ToolCallParse, NoneLeavesOutputUnchanged) {
  Check(F::kNone, "  <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n",
        {"  <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n"});
}

// --- Ids ----------------------------------------------------------------------------------

TEST(ToolCallParse, IdsAreSeededUniqueAndShaped) {
  const std::string out =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {}}</tool_call>";
  ToolCallParseOptions o1, o2;
  o1.id_seed = 7;
  o2.id_seed = 8;
  auto a = ParseToolCalls(F::kHermes, out, o1);
  auto b = ParseToolCalls(F::kHermes, out, o1);
  auto c = ParseToolCalls(F::kHermes, out, o2);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].id, b.calls[0].id);
  EXPECT_EQ(a.calls[1].id, b.calls[1].id);
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  EXPECT_NE(a.calls[0].id, c.calls[0].id);
  EXPECT_EQ(a.calls[0].id.size(), 29u);  // "call_" + 24
  auto m = ParseToolCalls(F::kMistralArgs, "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{}", o1);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].id.size(), 9u);
  EXPECT_NE(m.calls[0].id, "abcdefghi");  // ours, not the model's
  std::set<std::string> ids;
  std::string many;
  for (int i = 0; i < 100; ++i) many += "[TOOL_CALLS]f[ARGS]{}";
  for (const ToolCall& call : ParseToolCalls(F::kMistralArgs, many).calls) ids.insert(call.id);
  EXPECT_EQ(ids.size(), 100u);
}

}  // namespace
}  // namespace lifeline::toolcall
