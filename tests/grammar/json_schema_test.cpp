// JSON Schema -> GBNF: documents accepted and rejected character by character (objects with
// required/optional properties, arrays with bounds, enums, anyOf, $ref recursion, number and
// string edge cases), errors naming the JSON path, and random documents generated through the
// grammar checked by an independent JSON parser (nlohmann) plus the validator in
// grammar_test_util.cpp.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <sstream>

#include "grammar/grammar_test_util.h"

namespace lifeline::grammar {
namespace {

using testing::Matches;
using testing::SchemaGrammar;

std::string SchemaError(const std::string& schema, const JsonSchemaOptions& opts = {}) {
  auto r = JsonSchemaTextToGbnf(schema, opts);
  return r.ok() ? std::string("OK") : r.status().ToString();
}

void ExpectDocs(const std::string& schema, const std::vector<std::string>& good,
                const std::vector<std::string>& bad, const JsonSchemaOptions& opts = {}) {
  auto g = SchemaGrammar(schema, opts);
  ASSERT_NE(g, nullptr);
  for (const auto& d : good) EXPECT_TRUE(Matches(g, d)) << "should accept: " << d << "\n" << schema;
  for (const auto& d : bad) EXPECT_FALSE(Matches(g, d)) << "should reject: " << d << "\n" << schema;
}

const char* kPerson = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"}},
  "required": ["name"]})";

// Keywords the grammar does not enforce: refused by default, skipped on request (the grammar
// then admits a superset: any string, though the pattern says a+). minimum is enforced.
TEST(JsonSchema, UnknownKeywordsRefusedOrSkipped) {
  const std::string schema = R"({"type":"object","properties":{"n":{"type":"integer","minimum":3},
      "s":{"type":"string","pattern":"^a+$"}},"required":["n","s"]})";
  EXPECT_NE(SchemaError(schema).find("properties.s.pattern"), std::string::npos) << SchemaError(schema);
  JsonSchemaOptions lenient;
  lenient.ignore_unknown_keywords = true;
  ExpectDocs(schema, {R"({"n": 3, "s": "b"})", R"({"n": 5, "s": "aa"})"},
             {R"({"n": "3", "s": "b"})", R"({"n": 3})", R"({"n": 2, "s": "a"})"}, lenient);
  // Structure errors are still errors.
  EXPECT_NE(SchemaError(R"({"type":"object","properties":[]})", lenient), "OK");
}

TEST(JsonSchema, ObjectRequiredAndOptionalInSchemaOrder) {
  ExpectDocs(kPerson,
             {R"({"name":"Ann"})", R"({"name":"Ann","age":3})", R"({"name":"Ann","email":"a@b"})",
              R"({"name":"Ann","age":3,"email":"a@b"})", R"({ "name" : "Ann" , "age": 3 })",
              "{\n  \"name\": \"Ann\",\n  \"age\": 30\n}", R"({"name":""})"},
             {R"({})", R"({"age":3})", R"({"age":3,"name":"Ann"})",  // order is the schema's
              R"({"name":"Ann","extra":1})",                          // strict: no extras
              R"({"name":1})", R"({"name":"Ann",})", R"({"name":"Ann" "age":3})",
              R"({"name":"Ann","age":3.5})", R"( {"name":"Ann"})",   // no leading space
              R"({"name":"Ann"}})", R"({"name":"Ann","name":"Bob"})"});
}

TEST(JsonSchema, ExtraPropertiesWhenNotStrictOrAllowed) {
  JsonSchemaOptions lax;
  lax.strict = false;
  ExpectDocs(kPerson, {R"({"name":"Ann","extra":[1,{"x":null}],"more":true})"},
             {R"({"extra":1})", R"({"name":"Ann","extra":})"}, lax);
  ExpectDocs(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})",
             {R"({})", R"({"a":1})"}, {R"({"b":1})"}, lax);
  ExpectDocs(R"({"type":"object","properties":{"a":{"type":"integer"}},
                 "additionalProperties":{"type":"boolean"}})",
             {R"({"a":1,"x":true,"y":false})", R"({"x":true})"}, {R"({"a":1,"x":1})"});
  ExpectDocs(R"({"type":"object"})", {R"({})"}, {R"({"a":1})"});  // strict, nothing listed
  ExpectDocs(R"({"type":"object"})", {R"({})", R"({"a":{"b":[]}})"}, {R"([])"}, lax);
}

TEST(JsonSchema, AllOptionalPropertiesAnySubsetInOrder) {
  ExpectDocs(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
                 "c":{"type":"integer"}}})",
             {R"({})", R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"a":1,"c":3})",
              R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
             {R"({"c":3,"a":1})", R"({,"a":1})", R"({"a":1,})", R"({"a":1,"a":1})"});
}

TEST(JsonSchema, NestedArraysWithItemBounds) {
  ExpectDocs(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
             {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[1,]", "[,1]", "[1 2]"});
  ExpectDocs(R"({"type":"array","items":{"type":"array","items":{"type":"boolean"},"maxItems":2},
                 "minItems":2})",
             {"[[],[]]", "[[true],[false,true],[]]"}, {"[[]]", "[[true,true,true],[]]", "[]"});
  ExpectDocs(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
  ExpectDocs(R"({"type":"array"})", {"[]", R"([1,"a",null,{"k":[true]}])"}, {"[1,]"});
}

TEST(JsonSchema, EnumConstOfAnyJsonValue) {
  ExpectDocs(R"({"enum":["red","green",1,null,{"a":[1]},"quote\"d"]})",
             {R"("red")", R"("green")", "1", "null", R"({"a":[1]})", R"("quote\"d")"},
             {R"("blue")", R"("Red")", "2", R"({"a":[2]})", R"("red" "red")"});
  ExpectDocs(R"({"const":"only"})", {R"("only")"}, {R"("other")"});
  // enum filtered by type: only values of that type remain.
  ExpectDocs(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
  ExpectDocs(R"({"type":"object","properties":{"unit":{"type":"string","enum":["C","F"]}},
                 "required":["unit"]})",
             {R"({"unit":"C"})", R"({"unit":"F"})"}, {R"({"unit":"K"})"});
}

TEST(JsonSchema, AnyOfAndTypeArrays) {
  ExpectDocs(R"({"anyOf":[{"type":"string"},{"type":"integer"}]})", {R"("x")", "5"},
             {"true", "5.5", "null"});
  ExpectDocs(R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"});
  ExpectDocs(R"({"type":"object","properties":{"v":{"anyOf":[{"type":"number"},{"type":"null"}]}},
                 "required":["v"]})",
             {R"({"v":null})", R"({"v":-1.5e3})"}, {R"({"v":"1"})"});
}

TEST(JsonSchema, RefRecursion) {
  const char* tree = R"({"$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},
      "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["value","children"]}},
    "$ref":"#/$defs/node"})";
  ExpectDocs(tree,
             {R"({"value":1,"children":[]})",
              R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]})"},
             {R"({"value":1})", R"({"value":1,"children":[{"value":2}]})"});
  const char* list = R"({"type":"object","properties":{"v":{"type":"integer"},
      "next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"]})";
  ExpectDocs(list, {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"},
             {R"({"v":1,"next":{"v":2}})"});
  ExpectDocs(R"({"definitions":{"a/b":{"type":"boolean"}},"$ref":"#/definitions/a~1b"})",
             {"true"}, {"1"});
}

TEST(JsonSchema, NumbersAndIntegers) {
  ExpectDocs(R"({"type":"number"})",
             {"0", "-0", "1.5", "1e10", "1E+10", "-1.25e-3", "123", "0.0", "9007199254740993"},
             {"01", "-", "1.", ".5", "+1", "1e", "00", "1.5.2", "NaN", "Infinity", "-01", "1e+",
              "0x10", "1,5"});
  ExpectDocs(R"({"type":"integer"})", {"0", "-0", "42", "-7"}, {"1.0", "1e3", "01", "-", "4 2"});
  // Digit runs are bounded (16 integer digits, 16 fraction digits, 2 exponent digits).
  ExpectDocs(R"({"type":"number"})", {"1234567890123456", "1.1234567890123456", "1e99"},
             {"12345678901234567", "1.12345678901234567", "1e100"});
}

// minimum / maximum as an exact grammar: every integer in a window around each bound, and
// random ones, is accepted exactly when it lies in the range (checked here by arithmetic, not
// by the converter), for ranges within one digit count, across digit counts and signs.
TEST(JsonSchema, IntegerBoundsAcceptExactlyTheRange) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0}, {0, 9}, {1, 9}, {3, 7}, {0, 10}, {7, 123}, {10, 99}, {99, 100}, {-5, 5}, {-120, -7},
      {-1, 0}, {1999, 2031}, {123, 45678}, {-999, 1000}, {5, 5}, {-9007199254740991, 9007199254740991}};
  for (int i = 0; i < 40; ++i) {
    const int64_t span = static_cast<int64_t>(rng() % 2000000) - 1000000;
    const int64_t lo = static_cast<int64_t>(rng() % 2000000) - 1000000;
    ranges.emplace_back(std::min(lo, lo + span), std::max(lo, lo + span));
  }
  for (const auto& [lo, hi] : ranges) {
    const std::string schema = "{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) +
                               ",\"maximum\":" + std::to_string(hi) + "}";
    auto g = SchemaGrammar(schema);
    ASSERT_NE(g, nullptr) << schema;
    std::set<int64_t> probes;
    for (int64_t b : {lo, hi, int64_t{0}, int64_t{9}, int64_t{10}, int64_t{-10}, int64_t{99},
                      int64_t{100}, int64_t{999}, int64_t{1000}}) {
      for (int64_t d = -12; d <= 12; ++d) probes.insert(b + d);
    }
    for (int k = 0; k < 200; ++k) {
      const uint64_t width = static_cast<uint64_t>(hi - lo) + 41;
      probes.insert(lo - 20 + static_cast<int64_t>(rng() % width));
    }
    for (int64_t v : probes) {
      const bool in = v >= lo && v <= hi;
      ASSERT_EQ(Matches(g, std::to_string(v)), in) << schema << " value " << v;
    }
    EXPECT_FALSE(Matches(g, "-0")) << schema;
    EXPECT_FALSE(Matches(g, "0" + std::to_string(std::max<int64_t>(lo, 1)))) << "leading zero";
    EXPECT_FALSE(Matches(g, std::to_string(lo) + ".0")) << schema;
  }
}

TEST(JsonSchema, IntegerBoundsExclusiveFractionalAndOneSided) {
  ExpectDocs(R"({"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":5})", {"3", "4"},
             {"2", "5", "1", "6", "-3", "3.5"});
  ExpectDocs(R"({"type":"integer","minimum":1.5,"maximum":4.5})", {"2", "3", "4"}, {"1", "5"});
  ExpectDocs(R"({"type":"integer","minimum":0})", {"0", "7", "1234567890123456"},
             {"-1", "-0", "12345678901234567"});
  ExpectDocs(R"({"type":"integer","maximum":-1})", {"-1", "-1234567890123456"}, {"0", "5", "-0"});
  // zod's z.number().int(): the safe-integer bounds.
  ExpectDocs(R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})",
             {"0", "42", "-7", "9007199254740991", "-9007199254740991"},
             {"9007199254740992", "-9007199254740992", "1.5", "1e3"});
  // Bounds without a type: a number.
  ExpectDocs(R"({"minimum":1,"maximum":2})", {"1", "1.5", "2", "2.000"}, {"0.5", "2.5", "\"1\""});
}

// Numbers between integer bounds: a fraction anywhere below the maximum, only zeros at it.
TEST(JsonSchema, NumberBoundsAcceptExactlyTheRange) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{0, 1}, {0, 100}, {-3, 2}, {-10, -2}, {5, 5}, {-1, 0}}) {
    const std::string schema = "{\"type\":\"number\",\"minimum\":" + std::to_string(lo) +
                               ",\"maximum\":" + std::to_string(hi) + "}";
    auto g = SchemaGrammar(schema);
    ASSERT_NE(g, nullptr) << schema;
    for (int tenths = (lo - 2) * 10; tenths <= (hi + 2) * 10; ++tenths) {
      const double v = tenths / 10.0;
      const bool in = v >= lo && v <= hi;
      char text[32];
      std::snprintf(text, sizeof text, "%.1f", v);
      std::string t = text;
      if (t == "-0.0") t = "0.0";
      ASSERT_EQ(Matches(g, t), in) << schema << " value " << t;
      if (tenths % 10 == 0) {
        const std::string whole = std::to_string(tenths / 10);
        ASSERT_EQ(Matches(g, whole), in) << schema << " value " << whole;
      }
    }
    // The bound farther from zero takes only zeros after its point.
    const int edge = std::abs(hi) >= std::abs(lo) ? hi : lo;
    EXPECT_TRUE(Matches(g, std::to_string(edge) + ".000")) << schema;
    EXPECT_FALSE(Matches(g, std::to_string(edge) + ".001")) << schema;
    EXPECT_FALSE(Matches(g, std::to_string(lo) + "e0")) << "no exponent under bounds";
  }
  ExpectDocs(R"({"type":"number","minimum":0})", {"0", "0.5", "1234.25"}, {"-0.5", "-1"});
}

TEST(JsonSchema, StringsEscapesAndControlCharacters) {
  ExpectDocs(R"({"type":"string"})",
             {R"("")", R"("a\u00e9b")", R"("\n\t\"\\\/\b\f\r")", "\"日本\"", "\"\x7F\"",
              R"("\uD83D\uDE00")"},
             {"\"a\nb\"", "\"a\tb\"", std::string("\"a\x01\""), R"("\x41")", R"("\u12")",
              R"("\u12G4")", R"("abc)", R"('abc')", "\"\xC3\"", R"("\a")"});
  ExpectDocs(R"({"type":"string","minLength":2,"maxLength":3})",
             {R"("ab")", R"("abc")", "\"日本\"", R"("\n\t")"}, {R"("a")", R"("abcd")", R"("")"});
  ExpectDocs(R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "\"true\""});
  ExpectDocs(R"({"type":"null"})", {"null"}, {"nul", "None"});
}

TEST(JsonSchema, Formats) {
  ExpectDocs(R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("1999-12-31")"},
             {R"("2024-13-01")", R"("2024-1-01")", R"("today")"});
  ExpectDocs(R"({"type":"string","format":"date-time"})",
             {R"("2024-02-29T13:45:00Z")", R"("2024-02-29T13:45:00.123+01:00")"},
             {R"("2024-02-29 13:45:00Z")", R"("2024-02-29T24:00:00Z")"});
  ExpectDocs(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
             {R"("123e4567e89b12d3a456426614174000")"});
  ExpectDocs(R"({"type":"string","format":"email"})", {R"("not checked")"}, {"1"});
}

TEST(JsonSchema, WhitespaceIsBounded) {
  JsonSchemaOptions o;
  o.max_whitespace_chars = 4;
  ExpectDocs(R"({"type":"array","items":{"type":"integer"}})",
             {"[1, 2]", "[\n   1]", "[1 ,2]"}, {"[\n    1]", "[1,  2]", "[  1]"}, o);
  o.max_whitespace_chars = 0;
  ExpectDocs(R"({"type":"array","items":{"type":"integer"}})", {"[1,2]"}, {"[1, 2]"}, o);
}

TEST(JsonSchema, ErrorsNameTheJsonPath) {
  EXPECT_EQ(SchemaError(R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})"),
            "invalid_argument: schema.properties.age.multipleOf: not supported");
  EXPECT_EQ(SchemaError(R"({"type":"number","exclusiveMinimum":0})"),
            "invalid_argument: schema.exclusiveMinimum: only integer-valued minimum / maximum are "
            "supported for type number");
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":5,"maximum":4.5})"),
            "invalid_argument: schema: no integer lies between the minimum and the maximum");
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":"1"})"),
            "invalid_argument: schema.minimum: expected a number");
  EXPECT_EQ(SchemaError(R"({"type":"string","pattern":"^a"})"),
            "invalid_argument: schema.pattern: not supported");
  EXPECT_EQ(SchemaError(R"({"oneOf":[{"type":"string"}]})"),
            "invalid_argument: schema.oneOf: not supported");
  EXPECT_EQ(SchemaError(R"({"type":"array","items":{"$ref":"https://x/y.json"}})"),
            "invalid_argument: schema.items.$ref: only local references ('#' or '#/...') are "
            "supported, got 'https://x/y.json'");
  EXPECT_EQ(SchemaError(R"({"$ref":"#/$defs/missing"})"),
            "invalid_argument: schema.$ref: '#/$defs/missing' does not resolve in the schema");
  EXPECT_EQ(SchemaError(R"({"type":"date"})"), "invalid_argument: schema.type: unknown type 'date'");
  EXPECT_EQ(SchemaError(R"({"type":["string",5]})"),
            "invalid_argument: schema.type[1]: expected a type name");
  EXPECT_EQ(SchemaError(R"({"type":"object","properties":{"a":{}},"required":["b"]})"),
            "invalid_argument: schema.required[0]: 'b' is not in properties");
  EXPECT_EQ(SchemaError(R"({"type":"array","maxItems":-1})"),
            "invalid_argument: schema.maxItems: expected a non-negative integer");
  EXPECT_EQ(SchemaError(R"({"type":"array","minItems":3,"maxItems":2})"),
            "invalid_argument: schema.maxItems: below minItems");
  EXPECT_EQ(SchemaError(R"({"type":"array","maxItems":5000})"),
            "resource_exhausted: schema.maxItems: 5000 is above the limit of 2000 (max_repetition)");
  EXPECT_EQ(SchemaError(R"({"properties":{"x":false}})"),
            "invalid_argument: schema.properties.x: the schema false matches nothing");
  EXPECT_EQ(SchemaError(R"({"enum":[]})"), "invalid_argument: schema.enum: expected a non-empty array");
  EXPECT_EQ(SchemaError(R"({"type":"integer","enum":["a"]})"),
            "invalid_argument: schema.enum: no value satisfies enum, const and type together");
  EXPECT_EQ(SchemaError(R"({"anyOf":[]})"),
            "invalid_argument: schema.anyOf: expected a non-empty array of schemas");
  EXPECT_EQ(SchemaError(R"({"allOf":[{},{}]})"),
            "invalid_argument: schema.allOf: only allOf with exactly one schema is supported");
  EXPECT_EQ(SchemaError(R"([1,2])"), "invalid_argument: schema: expected a schema object");
  EXPECT_EQ(SchemaError("{\"type\":").rfind("invalid_argument: schema: not valid JSON", 0), 0u);
  JsonSchemaOptions bad_prefix;
  bad_prefix.rule_prefix = "a b";
  EXPECT_EQ(SchemaError("{}", bad_prefix),
            "invalid_argument: rule_prefix: only letters, digits, '-' and '_' allowed");
}

TEST(JsonSchema, RecursionWithoutContentIsRefusedByTheParser) {
  auto text = JsonSchemaTextToGbnf(R"({"$ref":"#"})");
  ASSERT_TRUE(text.ok());
  auto g = ParseGbnf(*text);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("can reach itself without consuming input"), std::string::npos);
}

TEST(JsonSchema, RulePrefixLetsSchemasShareOneGrammar) {
  JsonSchemaOptions a, b;
  a.rule_prefix = "fa-";
  b.rule_prefix = "fb-";
  auto ga = JsonSchemaTextToGbnf(kPerson, a);
  auto gb = JsonSchemaTextToGbnf(R"({"type":"array","items":{"type":"number"}})", b);
  ASSERT_TRUE(ga.ok() && gb.ok());
  for (const auto* text : {&*ga, &*gb}) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      const std::string& prefix = text == &*ga ? a.rule_prefix : b.rule_prefix;
      EXPECT_EQ(line.compare(0, prefix.size(), prefix), 0) << line;
    }
  }
  EXPECT_EQ(ga->rfind("fa-root ::= ", 0), 0u);
  auto g = testing::MustParse("root ::= fa-root | fb-root\n" + *ga + *gb);
  EXPECT_TRUE(Matches(g, R"({"name":"x"})"));
  EXPECT_TRUE(Matches(g, "[1,2.5]"));
  EXPECT_FALSE(Matches(g, R"({"name":"x"}[1])"));
}

TEST(JsonSchema, UnorderedJsonOverloadSortsKeys) {
  auto ordered = JsonSchemaToGbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["a","b"]})"));
  auto sorted = JsonSchemaToGbnf(nlohmann::json::parse(
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["a","b"]})"));
  ASSERT_TRUE(ordered.ok() && sorted.ok());
  EXPECT_TRUE(Matches(testing::MustParse(*ordered), R"({"b":1,"a":2})"));
  EXPECT_TRUE(Matches(testing::MustParse(*sorted), R"({"a":2,"b":1})"));
}

TEST(JsonSchema, JsonObjectGrammar) {
  auto g = testing::MustParse(JsonObjectGbnf());
  for (const char* d : {"{}", R"({"a":[1,2,{"b":null}],"c":"d","e":-1.5e3,"f":true})",
                        "{ \"k\" : { } }"})
    EXPECT_TRUE(Matches(g, d)) << d;
  for (const char* d : {"[]", "\"x\"", "{\"a\"}", "{\"a\":}", "{'a':1}", "{\"a\":1,}", "1"})
    EXPECT_FALSE(Matches(g, d)) << d;
  auto prefixed = JsonObjectGbnf("jo-");
  EXPECT_EQ(prefixed.rfind("jo-root ::= ", 0), 0u);
}

// Random documents drawn through each grammar must parse as JSON (nlohmann) and satisfy the
// schema (the validator in grammar_test_util.cpp, written independently of the converter).
TEST(JsonSchema, RandomDocumentsAreValidJsonAndSatisfyTheSchema) {
  const std::vector<std::string> schemas = {
      kPerson,
      R"({"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array",
          "items":{"type":"string","maxLength":5},"minItems":1,"maxItems":3},
          "score":{"type":["number","null"]},"ok":{"type":"boolean"}},
          "required":["id","tags","score","ok"],"additionalProperties":false})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"enum":["a","b",3,null]},
          "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
          "required":["v","kids"]}},"$ref":"#/$defs/node"})",
      R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},
          "required":["kind","r"]},{"type":"object","properties":{"kind":{"const":"square"},
          "side":{"type":"integer"}},"required":["kind","side"]}]})",
      R"({"type":"array","items":{"type":"array","items":{"type":"integer"},"minItems":2,
          "maxItems":2},"maxItems":4})",
      R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},
          "id":{"type":"string","format":"uuid"},"s":{"type":"string","minLength":1}},
          "required":["when","id","s"]})",
      R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}})",
      R"({})",
  };
  std::mt19937 rng(1234);
  for (const std::string& schema_text : schemas) {
    auto g = SchemaGrammar(schema_text);
    ASSERT_NE(g, nullptr);
    const auto schema = nlohmann::ordered_json::parse(schema_text);
    std::set<std::string> distinct;
    int produced = 0;
    for (int attempt = 0; attempt < 300 && produced < 40; ++attempt) {
      auto doc = testing::RandomSentence(g, &rng);
      if (!doc.ok) continue;
      ++produced;
      distinct.insert(doc.text);
      nlohmann::json parsed;
      try {
        parsed = nlohmann::json::parse(doc.text);
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "not JSON: " << doc.text << " (" << e.what() << ")";
        continue;
      }
      EXPECT_EQ(testing::ValidateSchema(schema, parsed), "") << doc.text << "\n" << schema_text;
    }
    EXPECT_GE(produced, 30) << schema_text;
    EXPECT_GE(distinct.size(), 10u) << schema_text;
  }
}

TEST(JsonSchema, RandomJsonObjectDocuments) {
  auto g = testing::MustParse(JsonObjectGbnf());
  std::mt19937 rng(99);
  int produced = 0;
  for (int attempt = 0; attempt < 200 && produced < 50; ++attempt) {
    auto doc = testing::RandomSentence(g, &rng);
    if (!doc.ok) continue;
    ++produced;
    nlohmann::json parsed;
    EXPECT_NO_THROW(parsed = nlohmann::json::parse(doc.text)) << doc.text;
    EXPECT_TRUE(parsed.is_object()) << doc.text;
  }
  EXPECT_GE(produced, 40);
}

}  // namespace
}  // namespace lifeline::grammar
