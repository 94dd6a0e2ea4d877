// Hostile and huge inputs: deep or huge schemas, repetition counts, ambiguous and deeply
// nesting grammars, bad vocabularies. Each ends in a clean error or a bounded, still-correct
// matcher; none may crash or hang. Also a deterministic mutation pass over grammar and schema
// texts (the libFuzzer harness tests/fuzz/grammar_fuzz.cpp explores further).
#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_test_util.h"

namespace lifeline::grammar {
namespace {

using testing::ByteVocab;
using testing::Matches;
using testing::MustParse;

TEST(GrammarLimits, DeepSchemaNesting) {
  std::string schema;
  for (int i = 0; i < 100; ++i) schema += R"({"type":"array","items":)";
  schema += R"({"type":"integer"})";
  for (int i = 0; i < 100; ++i) schema += "}";
  auto r = JsonSchemaTextToGbnf(schema);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("nested deeper than 64 (max_depth)"), std::string::npos)
      << r.status().message();
  // Absurd nesting is refused before parsing.
  std::string deep(100000, '[');
  auto d = JsonSchemaTextToGbnf(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "schema: nested deeper than 512");
}

TEST(GrammarLimits, HugeSchemasHitTheOutputCap) {
  nlohmann::ordered_json e = nlohmann::ordered_json::array();
  for (int i = 0; i < 20000; ++i) e.push_back("value-number-" + std::to_string(i));
  JsonSchemaOptions o;
  o.max_grammar_bytes = 100000;
  auto r = JsonSchemaToGbnf(nlohmann::ordered_json{{"enum", e}}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString(),
            "resource_exhausted: schema: the grammar would exceed 100000 bytes (max_grammar_bytes)");
  // Many properties within the defaults: converts and compiles.
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  for (int i = 0; i < 300; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  auto big = JsonSchemaToGbnf(nlohmann::ordered_json{{"type", "object"}, {"properties", props}});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  auto g = MustParse(*big);
  EXPECT_TRUE(Matches(g, R"({"p0":1,"p299":2})"));
  EXPECT_FALSE(Matches(g, R"({"p299":2,"p0":1})"));
}

TEST(GrammarLimits, RepetitionCountsAreCapped) {
  auto r = ParseGbnf("root ::= [a-z]{5000}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Within the caps: an exact count of 2000 works.
  auto g = MustParse("root ::= \"a\"{2000}\n");
  EXPECT_TRUE(Matches(g, std::string(2000, 'a')));
  EXPECT_FALSE(Matches(g, std::string(1999, 'a')));
  EXPECT_FALSE(Matches(g, std::string(2001, 'a')));
}

// Determinization work is capped, not only the automaton's size: overlapping bounded
// repetitions made a 40-byte grammar cost ~6 s of CPU before max_states refused it (the
// libFuzzer harness found a 60-byte one taking 7 s under ASan). Now a clean error names
// max_compile_work; a realistic schema with long bounded strings still compiles.
TEST(GrammarLimits, CompileWorkIsCapped) {
  for (const char* g : {"root ::= [a-z]{0,1000} [a-y]{0,1000}",
                        "root ::= [a-z]{0,300} [a-y]{0,300} [a-x]{0,300}",
                        "root ::= (. .? .?){1,300}"}) {
    auto r = ParseGbnf(g);
    ASSERT_FALSE(r.ok()) << g;
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << g;
    EXPECT_NE(r.status().message().find("(max_compile_work)"), std::string::npos)
        << g << ": " << r.status().message();
  }
  // The budget is a limit like the others: a small one refuses a grammar the default allows.
  GrammarLimits tight;
  tight.max_compile_work = 100;
  const char* modest = "root ::= [a-z]{0,50}";
  EXPECT_TRUE(ParseGbnf(modest).ok());
  auto t = ParseGbnf(modest, tight);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("max_compile_work"), std::string::npos);

  const char* schema = R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":1000},
      "tags":{"type":"array","items":{"type":"string","maxLength":64},"maxItems":50},
      "bio":{"type":"string","minLength":10,"maxLength":2000},
      "age":{"type":"integer"},"kind":{"enum":["a","b","c"]},
      "addr":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string"}},
              "required":["street"]}},
    "required":["name","tags","bio","age","kind","addr"],"additionalProperties":false})";
  auto gbnf = JsonSchemaTextToGbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  auto g = ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
}

TEST(GrammarLimits, AmbiguityBeyondMaxStacksIsACleanError) {
  // After k x's the text may split between root's "x" and t's "x" ... "y" in k+1 ways, each
  // a different stack.
  GrammarLimits limits;
  limits.max_stacks = 16;
  auto g = MustParse("root ::= \"x\" root | t\nt ::= \"x\" t \"y\" | \"z\"\n", limits);
  GrammarMatcher m(g, ByteVocab());
  ASSERT_TRUE(m.status().ok());
  ASSERT_TRUE(m.AcceptBytes(std::string(14, 'x')).ok());
  // 15 x's would leave more than 16 stacks alive: Accept refuses (the mask, computed per stack
  // top, cannot see the cap and still offers x).
  Status s = m.AcceptBytes(std::string(10, 'x'));
  EXPECT_EQ(s.ToString(),
            "resource_exhausted: grammar: the parse needs more than max_stacks / max_closure_steps");
  EXPECT_EQ(m.Accept('x').code(), StatusCode::kResourceExhausted);
  // The state is unchanged by the failed call and the text can still be finished.
  EXPECT_TRUE(m.AcceptBytes("zyy").ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(Matches(g, "xxzyy"));
}

TEST(GrammarLimits, NestingBeyondMaxStackDepthIsACleanError) {
  GrammarLimits limits;
  limits.max_stack_depth = 8;
  auto g = MustParse("root ::= \"[\" root \"]\" | \"x\"\n", limits);
  GrammarMatcher m(g, ByteVocab());
  int opened = 0;
  Status s;
  while (opened < 20 && (s = m.Accept('[')).ok()) ++opened;
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(s.message(),
            "grammar: the text nests rules more than 8 deep (max_stack_depth) (token 91)");
  EXPECT_GT(opened, 2);
  EXPECT_LT(opened, 8);
  // Unchanged by the failure: it can still be closed.
  ASSERT_TRUE(m.AcceptBytes("x" + std::string(opened, ']')).ok());
  EXPECT_TRUE(m.MustEnd());
}

TEST(GrammarLimits, ExponentialClosureIsCut) {
  // 2^24 ways to go through 24 nullable references before the first byte.
  auto g = MustParse("root ::= (n | m){24} \"x\"\nn ::= \"a\"*\nm ::= \"b\"*\n");
  GrammarMatcher m(g, ByteVocab());
  EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.AcceptBytes("x").code(), StatusCode::kResourceExhausted);
  std::vector<float> logits(257, 0.0f);
  EXPECT_EQ(m.ApplyMask(logits.data(), 257), 0);
  // A small version of the same shape is fine.
  auto small = MustParse("root ::= (n | m){4} \"x\"\nn ::= \"a\"*\nm ::= \"b\"*\n");
  EXPECT_TRUE(Matches(small, "aabx"));
  EXPECT_TRUE(Matches(small, "x"));
}

TEST(GrammarLimits, LongAndDeepDocumentsStayBounded) {
  auto g = MustParse(JsonObjectGbnf());
  GrammarMatcher m(g, ByteVocab());
  ASSERT_TRUE(m.AcceptBytes("{\"a\":[").ok());
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(m.AcceptBytes(i ? ",1" : "1").ok());
  ASSERT_TRUE(m.AcceptBytes("]}").ok());
  EXPECT_TRUE(m.CanEnd());
  std::string deep = "{\"a\":";
  for (int i = 0; i < 300; ++i) deep += "[";
  for (int i = 0; i < 300; ++i) deep += "]";
  deep += "}";
  EXPECT_TRUE(Matches(g, deep));
}

TEST(GrammarLimits, BadVocabularies) {
  auto none = GrammarVocab::Build({}, {});
  EXPECT_EQ(none.status().ToString(), "invalid_argument: grammar vocab: no tokens");
  auto bad_eog = GrammarVocab::Build({"a", "b"}, {2});
  EXPECT_EQ(bad_eog.status().ToString(),
            "invalid_argument: grammar vocab: end-of-generation id 2 outside [0, 2)");
  GrammarVocabOptions small;
  small.max_vocab = 2;
  auto big = GrammarVocab::Build({"a", "b", "c"}, {}, small);
  EXPECT_EQ(big.status().ToString(),
            "resource_exhausted: grammar vocab: 3 tokens, above the limit of 2");
  // Tokens longer than max_token_bytes are simply never allowed.
  small = {};
  small.max_token_bytes = 3;
  auto v = GrammarVocab::Build({"aaaa", "a", ""}, {2}, small);
  ASSERT_TRUE(v.ok());
  GrammarMatcher m(MustParse("root ::= \"a\"+\n"), *v);
  EXPECT_TRUE(m.IsAllowed(1));
  std::vector<uint8_t> mask;
  m.FillAllowed(&mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 1, 0}));
}

// Random byte edits of valid grammars and schemas: every outcome is a result or an error with
// a message; compiled grammars get a few matcher steps.
TEST(GrammarLimits, MutatedInputsFailCleanly) {
  const std::vector<std::string> grammars = {
      JsonObjectGbnf(), "root ::= \"(\" root* \")\" | [a-z]{1,3}\n",
      "root ::= a (\",\" a)*\na ::= [0-9]+ | \"\\\"\" [^\"]* \"\\\"\"\n"};
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/x"},"maxItems":3}},"required":["a"],"$defs":{"x":{"enum":[1,"b",null]}}})",
      R"({"anyOf":[{"type":"string","minLength":1},{"type":"integer"}]})"};
  std::mt19937 rng(7);
  const std::string alphabet = "\"[](){}*+?|:=#\\-^.,0123456789abcxyz \n$ref";
  auto mutate = [&](std::string s) {
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(pos, 1 + rng() % 3); break;
        default: s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    return s;
  };
  GrammarLimits limits;
  limits.max_states = 20000;
  int compiled = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text;
    if (i % 2 == 0) {
      text = mutate(grammars[i % grammars.size()]);
    } else {
      auto r = JsonSchemaTextToGbnf(mutate(schemas[i % schemas.size()]));
      if (!r.ok()) {
        EXPECT_FALSE(r.status().message().empty());
        continue;
      }
      text = *r;
    }
    auto g = ParseGbnf(text, limits);
    if (!g.ok()) {
      EXPECT_FALSE(g.status().message().empty());
      continue;
    }
    ++compiled;
    GrammarMatcher m(*g, ByteVocab());
    std::vector<uint8_t> mask;
    for (int step = 0; step < 16 && m.status().ok(); ++step) {
      m.FillAllowed(&mask);
      int pick = -1;
      for (int b = static_cast<int>(rng() % 256), n = 0; n < 256; ++n, b = (b + 1) % 256)
        if (mask[b]) {
          pick = b;
          break;
        }
      if (pick < 0) break;
      EXPECT_TRUE(m.Accept(pick).ok());
    }
  }
  EXPECT_GT(compiled, 50);
}

}  // namespace
}  // namespace lifeline::grammar
