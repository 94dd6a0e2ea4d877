// Grammar text for forced calls. The schema converter is a stand-in that returns rules written
// here by hand for three known schemas; the produced GBNF is read by the test's own GBNF
// recognizer (gbnf_match_util), which must accept the call texts written out below and reject
// near misses; each accepted text must parse (ParseToolCalls) as the call it spells.
#include <string>

#include <gtest/gtest.h>

#include "text/toolcall/grammar.h"
#include "text/toolcall/parser.h"
#include "toolcall/gbnf_match_util.h"

namespace lifeline::toolcall {
namespace {

using ojson = nlohmann::ordered_json;
using F = ToolCallFormat;

const ojson kWeather = ojson::parse(
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})");
const ojson kEmpty = ojson::parse(R"({"type": "object", "properties": {}})");
const ojson kAdd = ojson::parse(
    R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]})");

std::string WithPrefix(std::string rules, const std::string& prefix) {
  std::string out;
  for (char c : rules) {
    if (c == '@') {
      out += prefix;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Hand-written rules for the three schemas ('@' is the prefix).
Result<std::string> StandIn(const ojson& schema, const std::string& prefix) {
  if (schema == kWeather) {
    return WithPrefix(R"(@root ::= "{" @sp "\"city\"" @sp ":" @sp @str @sp "}"
@str ::= "\"" [^"\\]* "\""
@sp ::= " "?
)", prefix);
  }
  if (schema == kEmpty) return WithPrefix("@root ::= \"{\" @sp \"}\"\n@sp ::= \" \"?\n", prefix);
  if (schema == kAdd) {
    return WithPrefix(
        R"(@root ::= "{" @sp "\"a\"" @sp ":" @sp @int @sp "," @sp "\"b\"" @sp ":" @sp @int @sp "}"
@int ::= "-"? [0-9]+
@sp ::= " "?
)", prefix);
  }
  return InvalidArgument("unsupported schema keyword");
}

std::vector<ToolSpec> Tools() {
  return {ToolSpec{"get_weather", "", kWeather, false}, ToolSpec{"get_time", "", kEmpty, false},
          ToolSpec{"add", "", kAdd, false}};
}

ToolChoice Required() { return ToolChoice{ToolChoice::Mode::kRequired, ""}; }
ToolChoice Named(const std::string& n) { return ToolChoice{ToolChoice::Mode::kFunction, n}; }

testing::GbnfGrammar Build(F format, const ToolChoice& choice, bool parallel,
                           std::string* text = nullptr) {
  Result<std::string> g = ToolCallGbnf(format, Tools(), choice, parallel, StandIn);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  testing::GbnfGrammar grammar;
  std::string error;
  EXPECT_TRUE(grammar.Parse(g.ok() ? *g : "", &error)) << error << "\n" << (g.ok() ? *g : "");
  EXPECT_EQ(grammar.FirstUndefinedReference(), "");
  if (text && g.ok()) *text = *g;
  return grammar;
}

// The grammar accepts `sentence`, and the parser reads it as `calls` (name, arguments).
void ExpectCall(F format, const testing::GbnfGrammar& g, const std::string& sentence,
                const std::vector<std::pair<std::string, std::string>>& calls) {
  EXPECT_TRUE(g.Accepts(sentence)) << sentence;
  ParsedToolCalls parsed = ParseToolCalls(format, sentence);
  EXPECT_EQ(parsed.content, "") << sentence;
  EXPECT_FALSE(parsed.malformed) << sentence;
  ASSERT_EQ(parsed.calls.size(), calls.size()) << sentence;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(parsed.calls[i].name, calls[i].first);
    EXPECT_EQ(parsed.calls[i].arguments, calls[i].second);
  }
}

TEST(ToolCallGbnf, HermesRequiredOneCall) {
  std::string text;
  auto g = Build(F::kHermes, Required(), false, &text);
  EXPECT_NE(text.find("root ::= tool-call\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tool-call ::= tool0-call | tool1-call | tool2-call\n"), std::string::npos);
  EXPECT_NE(text.find(R"(tool0-call ::= "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " tool0-args-root "}\n</tool_call>")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tool1-args-root ::= "), std::string::npos);
  ExpectCall(F::kHermes, g,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
             {{"get_weather", R"({"city":"Paris"})"}});
  ExpectCall(F::kHermes, g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
             {{"get_time", "{}"}});
  ExpectCall(F::kHermes, g,
             "<tool_call>\n{\"name\": \"add\", \"arguments\": { \"a\" : -12 , \"b\": 3 }}\n</tool_call>",
             {{"add", R"({"a":-12,"b":3})"}});
  // Near misses.
  EXPECT_FALSE(g.Accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.Accepts("<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.Accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}"));
  EXPECT_FALSE(g.Accepts("Sure! <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.Accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"x\": 1}}\n</tool_call>"));
}

TEST(ToolCallGbnf, HermesParallel) {
  auto g = Build(F::kHermes, Required(), true);
  ExpectCall(F::kHermes, g,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
             "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
             {{"get_weather", R"({"city":"Oslo"})"}, {"add", R"({"a":1,"b":2})"}});
  EXPECT_FALSE(g.Accepts(""));
}

// Parallel calls are bounded: kMaxParallelToolCalls calls are a sentence, one more is not (a
// small model under a forced call repeated calls until max_tokens cut the list, and a cut
// list parses as no call).
TEST(ToolCallGbnf, ParallelCallsAreBounded) {
  const int n = kMaxParallelToolCalls;
  struct Shape {
    F format;
    std::string call, sep, open, close;
  };
  const Shape shapes[] = {
      {F::kHermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", "\n", "", ""},
      {F::kLlama3Json, "{\"name\": \"get_time\", \"parameters\": {}}", "; ", "", ""},
      {F::kMistralArgs, "[TOOL_CALLS]get_time[ARGS]{}", "", "", ""},
      {F::kGeneric, "{\"name\": \"get_time\", \"arguments\": {}}", ", ", "[", "]"},
  };
  for (const Shape& sh : shapes) {
    auto g = Build(sh.format, Required(), true);
    auto calls = [&](int k) {
      std::string t = sh.open;
      for (int i = 0; i < k; ++i) t += (i ? sh.sep : "") + sh.call;
      return t + sh.close;
    };
    EXPECT_TRUE(g.Accepts(calls(2))) << calls(2);
    EXPECT_TRUE(g.Accepts(calls(n))) << calls(n);
    EXPECT_FALSE(g.Accepts(calls(n + 1))) << calls(n + 1);
  }
}

TEST(ToolCallGbnf, Llama3NamedFunction) {
  std::string text;
  auto g = Build(F::kLlama3Json, Named("add"), false, &text);
  EXPECT_EQ(text.find("tool0-"), std::string::npos) << "only the named function: " << text;
  EXPECT_NE(text.find("tool-call ::= tool2-call\n"), std::string::npos) << text;
  ExpectCall(F::kLlama3Json, g, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}",
             {{"add", R"({"a":1,"b":2})"}});
  EXPECT_FALSE(g.Accepts("{\"name\": \"get_time\", \"parameters\": {}}"));
  EXPECT_FALSE(g.Accepts("{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"));
  auto gp = Build(F::kLlama3Json, Named("add"), true);
  ExpectCall(F::kLlama3Json, gp,
             "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}; {\"name\": \"add\", "
             "\"parameters\": {\"a\": 3, \"b\": 4}}",
             {{"add", R"({"a":1,"b":2})"}, {"add", R"({"a":3,"b":4})"}});
}

TEST(ToolCallGbnf, MistralNemoWithNineCharacterIds) {
  std::string text;
  auto g = Build(F::kMistralNemo, Required(), false, &text);
  EXPECT_NE(text.find("root ::= \"[TOOL_CALLS][\" tool-call \"]\"\n"), std::string::npos) << text;
  ExpectCall(F::kMistralNemo, g,
             "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
             "\"id\": \"abc123XYZ\"}]",
             {{"get_weather", R"({"city":"Paris"})"}});
  EXPECT_FALSE(g.Accepts("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abc123XY\"}]"));
  EXPECT_FALSE(g.Accepts("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abc_23XYZ\"}]"));
  auto gp = Build(F::kMistralNemo, Required(), true);
  ExpectCall(F::kMistralNemo, gp,
             "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"000000000\"}, "
             "{\"name\": \"add\", \"arguments\": {\"a\": 0, \"b\": 0}, \"id\": \"zzzzzzzzz\"}]",
             {{"get_time", "{}"}, {"add", R"({"a":0,"b":0})"}});
}

TEST(ToolCallGbnf, MistralArgs) {
  auto g = Build(F::kMistralArgs, Named("get_weather"), false);
  ExpectCall(F::kMistralArgs, g, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
             {{"get_weather", R"({"city":"Paris"})"}});
  EXPECT_FALSE(g.Accepts("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}"));
  auto gp = Build(F::kMistralArgs, Named("get_weather"), true);
  ExpectCall(F::kMistralArgs, gp,
             "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}",
             {{"get_weather", R"({"city":"Paris"})"}, {"get_weather", R"({"city":"Rome"})"}});
}

TEST(ToolCallGbnf, Generic) {
  auto g = Build(F::kGeneric, Named("get_time"), false);
  ExpectCall(F::kGeneric, g, "{\"name\": \"get_time\", \"arguments\": {}}", {{"get_time", "{}"}});
  EXPECT_FALSE(g.Accepts("[{\"name\": \"get_time\", \"arguments\": {}}]"));
  auto gp = Build(F::kGeneric, Required(), true);
  ExpectCall(F::kGeneric, gp, "{\"name\": \"get_time\", \"arguments\": {}}", {{"get_time", "{}"}});
  ExpectCall(F::kGeneric, gp,
             "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", "
             "\"arguments\": {\"city\": \"Lima\"}}]",
             {{"get_time", "{}"}, {"get_weather", R"({"city":"Lima"})"}});
}

TEST(ToolCallGbnf, NothingToEnforceForAutoAndNone) {
  for (auto mode : {ToolChoice::Mode::kAuto, ToolChoice::Mode::kNone}) {
    auto g = ToolCallGbnf(F::kHermes, Tools(), ToolChoice{mode, ""}, true, StandIn);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(*g, "");
  }
}

TEST(ToolCallGbnf, Errors) {
  auto none = ToolCallGbnf(F::kNone, Tools(), Required(), false, StandIn);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  auto no_tools = ToolCallGbnf(F::kHermes, {}, Required(), false, StandIn);
  EXPECT_EQ(no_tools.status().code(), StatusCode::kInvalidArgument);
  auto unknown = ToolCallGbnf(F::kHermes, Tools(), Named("nope"), false, StandIn);
  EXPECT_EQ(ErrorFieldPath(unknown.status()), "tool_choice.function.name");

  std::vector<ToolSpec> tools = Tools();
  tools[1].parameters = ojson::parse(R"({"type": "object", "patternProperties": {}})");
  auto conv = ToolCallGbnf(F::kHermes, tools, Required(), false, StandIn);
  EXPECT_EQ(conv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorFieldPath(conv.status()), "tools[1].function.parameters");
  EXPECT_NE(conv.status().message().find("unsupported schema keyword"), std::string::npos);

  auto outside = [](const ojson&, const std::string& prefix) -> Result<std::string> {
    return prefix + "root ::= space\nspace ::= \" \"?\n";
  };
  auto o = ToolCallGbnf(F::kHermes, Tools(), Named("add"), false, outside);
  EXPECT_EQ(o.status().code(), StatusCode::kInternal);
  EXPECT_NE(o.status().message().find("'space'"), std::string::npos) << o.status().message();
  auto rootless = [](const ojson&, const std::string& prefix) -> Result<std::string> {
    return prefix + "value ::= \"{}\"\n";
  };
  EXPECT_EQ(ToolCallGbnf(F::kHermes, Tools(), Named("add"), false, rootless).status().code(),
            StatusCode::kInternal);
}

TEST(ToolCallGbnf, LiteralEscaping) {
  EXPECT_EQ(GbnfLiteral("a\"b\\c\nd\te\x01"), R"("a\"b\\c\nd\te\x01")");
  // DEL is escaped like the other control bytes (the JSON Schema writer's rule, one escaper).
  EXPECT_EQ(GbnfLiteral("a\x7F"), R"("a\x7F")");
  testing::GbnfGrammar g;
  std::string error;
  ASSERT_TRUE(g.Parse("root ::= " + GbnfLiteral("say \"hi\"\\\n\t") + "\n", &error)) << error;
  EXPECT_TRUE(g.Accepts("say \"hi\"\\\n\t"));
}

}  // namespace
}  // namespace lifeline::toolcall
