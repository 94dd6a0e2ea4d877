// Request validation: every documented field with wrong types and boundary values (T5, T6,
// T9 of the reliability plan). Expected outcomes come from the OpenAI API ranges written in
// the task, not from the implementation's table.
#include "api/openai.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/json_guard.h"

namespace lifeline::api {
namespace {

using nlohmann::json;

struct Parsed {
  std::optional<ApiError> error;
  GenerationRequest request;
};

Parsed Parse(std::string_view body, Endpoint ep = Endpoint::kCompletions,
             RequestLimits limits = {}) {
  Parsed p;
  p.error = ParseGenerationRequest(body, ep, limits, &p.request);
  return p;
}

Parsed ParseWith(const std::string& field, const std::string& value_json,
                 Endpoint ep = Endpoint::kCompletions) {
  // The required field of the endpoint, unless it is the one under test.
  std::string body = ep == Endpoint::kCompletions ? R"({"prompt":"hi",)"
                     : ep == Endpoint::kInfill    ? R"({"input_prefix":"hi",)"
                                                  : R"({"messages":[{"role":"user","content":"hi"}],)";
  if (field == "prompt" || field == "messages" || field == "input_prefix") body = "{";
  body += "\"" + field + "\":" + value_json + "}";
  return Parse(body, ep);
}

void ExpectBadParam(const Parsed& p, const std::string& param, const std::string& what) {
  ASSERT_TRUE(p.error.has_value()) << what << " was accepted";
  EXPECT_EQ(p.error->http_status, 400) << what;
  EXPECT_EQ(p.error->type, "invalid_request_error") << what;
  EXPECT_EQ(p.error->param, param) << what;
  EXPECT_FALSE(p.error->message.empty()) << what;
}

TEST(ParseGenerationRequest, MinimalCompletionGetsDefaults) {
  Parsed p = Parse(R"({"prompt":"Once upon a time"})");
  ASSERT_FALSE(p.error) << p.error->message;
  ASSERT_EQ(p.request.prompts.size(), 1u);
  EXPECT_EQ(p.request.prompts[0].text, "Once upon a time");
  EXPECT_FALSE(p.request.is_chat);
  EXPECT_FALSE(p.request.max_tokens.has_value());
  EXPECT_EQ(p.request.sampling.temperature, 1.0);
  EXPECT_EQ(p.request.sampling.top_p, 1.0);
  EXPECT_EQ(p.request.sampling.top_k, 0);
  EXPECT_EQ(p.request.sampling.repeat_penalty, 1.0);
  EXPECT_FALSE(p.request.sampling.seed.has_value());
  EXPECT_FALSE(p.request.stream);
  EXPECT_TRUE(p.request.stop.empty());
  EXPECT_FALSE(p.request.allow_context_trim);
}

TEST(ParseGenerationRequest, EveryFieldIsApplied) {
  Parsed p = Parse(R"({"model":"m1","prompt":["p"],"max_tokens":12,"temperature":0.5,
    "top_p":0.9,"top_k":40,"min_p":0.05,"seed":-3,"stop":["a","bb"],"presence_penalty":-1.5,
    "frequency_penalty":2,"repeat_penalty":1.1,"stream":true,
    "stream_options":{"include_usage":true},"ignore_eos":true,"n":1,"slo_class":"chat",
    "user_role":"doctor","deadline_ms":250,"logprobs":2,"echo":false,"best_of":1,
    "allow_context_trim":true,"logit_bias":{"7":-100,"42":2.5},"suffix":"end","user":"u-1"})");
  ASSERT_FALSE(p.error) << p.error->message;
  const GenerationRequest& r = p.request;
  EXPECT_EQ(r.model, "m1");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "p");
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  // In the parsed object's key order.
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{42, 2.5f}, {7, -100.0f}}));
  EXPECT_EQ(r.suffix, "end");
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_EQ(r.sampling.temperature, 0.5);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.seed, -3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(r.sampling.presence_penalty, -1.5);
  EXPECT_EQ(r.sampling.frequency_penalty, 2.0);
  EXPECT_EQ(r.sampling.repeat_penalty, 1.1);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.slo_class, "chat");
  EXPECT_EQ(r.user_role, "doctor");
  EXPECT_EQ(r.deadline_ms, 250);
  EXPECT_TRUE(r.allow_context_trim);
}

TEST(ParseGenerationRequest, NullMeansDefault) {
  Parsed p = Parse(R"({"prompt":"x","temperature":null,"stop":null,"seed":null,"model":null})");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.request.sampling.temperature, 1.0);
  EXPECT_TRUE(p.request.model.empty());
}

// Nothing is accepted and silently ignored: OpenAI answers an unknown argument with 400, and
// so does Lifeline, naming it (and the field of another endpoint likewise).
TEST(ParseGenerationRequest, UnknownFieldsAreRejectedByName) {
  Parsed p = Parse(R"({"prompt":"x","vendor_ext":{"deep":[1,2,{"a":null}]}})");
  ExpectBadParam(p, "vendor_ext", "unknown field");
  EXPECT_EQ(p.error->code, "unknown_parameter");
  ExpectBadParam(Parse(R"({"prompt":"x","messages":[]})"), "messages", "chat field on completions");
  Parsed fn = Parse(R"({"messages":[{"role":"user","content":"x"}],"functions":[]})",
                    Endpoint::kChatCompletions);
  ExpectBadParam(fn, "functions", "deprecated functions");
  EXPECT_NE(fn.error->message.find("tools"), std::string::npos);
  ExpectBadParam(Parse(R"({"prompt":"x","reasoning_effort":"low"})"), "reasoning_effort", "o1 field");
  ExpectBadParam(Parse(R"({"prompt":"x","store":true})"), "store", "store true");
  EXPECT_FALSE(Parse(R"({"prompt":"x","store":false,"user":"u","service_tier":"auto"})").error);
  ExpectBadParam(Parse(R"({"prompt":"x","service_tier":"flex"})"), "service_tier", "flex tier");
  ExpectBadParam(Parse(R"({"prompt":"x","input_prefix":"a"})"), "input_prefix",
                 "infill field on completions");
}

// A long unknown key is quoted cut at 64 bytes, never inside a character: the error body must
// stay valid UTF-8 (found by the OpenAI-request fuzzer: a cut inside "\u0124" broke it).
TEST(ParseGenerationRequest, UnknownKeyExcerptsStayValidUtf8) {
  const std::string key = std::string(63, 'a') + "\xC4\xA4" + "bbb";  // the 2-byte char spans 63-64
  Parsed p = Parse(R"({"prompt":"x",")" + key + R"(":1})");
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->code, "unknown_parameter");
  EXPECT_EQ(p.error->param, std::string(63, 'a'));
  EXPECT_FALSE(FindInvalidUtf8(p.error->message).has_value()) << p.error->message;
  // A strict serializer accepts the body as is.
  EXPECT_NO_THROW((void)ErrorJson(*p.error).dump());
}

TEST(ParseGenerationRequest, PromptForms) {
  ExpectBadParam(Parse(R"({"max_tokens":3})"), "prompt", "missing prompt");
  EXPECT_EQ(Parse(R"({"max_tokens":3})").error->code, "missing_required_parameter");
  Parsed two = Parse(R"({"prompt":["a","b"]})");
  ASSERT_FALSE(two.error) << two.error->message;
  ASSERT_EQ(two.request.prompts.size(), 2u);
  EXPECT_EQ(two.request.prompts[1].text, "b");
  Parsed ids = Parse(R"({"prompt":[1,2,3]})");
  ASSERT_FALSE(ids.error) << ids.error->message;
  ASSERT_EQ(ids.request.prompts.size(), 1u);
  EXPECT_TRUE(ids.request.prompts[0].is_tokens);
  EXPECT_EQ(ids.request.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  Parsed nested = Parse(R"({"prompt":[[5],"text",[6,7]]})");
  ASSERT_FALSE(nested.error) << nested.error->message;
  ASSERT_EQ(nested.request.prompts.size(), 3u);
  EXPECT_EQ(nested.request.prompts[2].tokens, (std::vector<int32_t>{6, 7}));
  ExpectBadParam(Parse(R"({"prompt":[1,-2]})"), "prompt[1]", "negative token id");
  ExpectBadParam(Parse(R"({"prompt":[1,2147483648]})"), "prompt[1]", "token id over int32");
  ExpectBadParam(Parse(R"({"prompt":[1,"a"]})"), "prompt[1]", "mixed ids and text");
  ExpectBadParam(Parse(R"({"prompt":[[1],[]]})"), "prompt[1]", "empty id list");
  ExpectBadParam(Parse(R"({"prompt":[{"a":1}]})"), "prompt[0]", "object prompt");
  ExpectBadParam(Parse(R"({"prompt":[]})"), "prompt", "empty array");
  RequestLimits few;
  few.max_prompts = 2;
  ExpectBadParam(Parse(R"({"prompt":["a","b","c"]})", Endpoint::kCompletions, few), "prompt",
                 "above max_prompts");
  EXPECT_FALSE(Parse(R"({"prompt":["a","b","c","d"],"n":16})").error);  // 64 choices
  ExpectBadParam(Parse(R"({"prompt":["a","b","c","d","e"],"n":16})"), "n", "prompts x n over 64");
  ExpectBadParam(Parse(R"({"prompt":42})"), "prompt", "number");
  ExpectBadParam(Parse(R"({"prompt":null})"), "prompt", "null required field");
  EXPECT_FALSE(Parse(R"({"prompt":""})").error);  // an empty prompt is the engine's call
}

TEST(ParseGenerationRequest, ChatMessages) {
  Parsed ok = Parse(R"({"messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null}]})",
                    Endpoint::kChatCompletions);
  ASSERT_FALSE(ok.error) << ok.error->message;
  ASSERT_EQ(ok.request.messages.size(), 3u);
  EXPECT_TRUE(ok.request.is_chat);
  EXPECT_EQ(ok.request.messages[0].role, "system");
  EXPECT_EQ(ok.request.messages[0].content, "be brief");
  EXPECT_EQ(ok.request.messages[1].content, "ab");  // text parts joined
  EXPECT_EQ(ok.request.messages[2].content, "");

  const Endpoint chat = Endpoint::kChatCompletions;
  ExpectBadParam(Parse(R"({"prompt":"x"})", chat), "prompt", "a completions field on chat");
  ExpectBadParam(Parse(R"({"max_tokens":3})", chat), "messages", "missing messages");
  ExpectBadParam(Parse(R"({"messages":[]})", chat), "messages", "empty messages");
  ExpectBadParam(Parse(R"({"messages":{"role":"user"}})", chat), "messages", "object");
  ExpectBadParam(Parse(R"({"messages":["hi"]})", chat), "messages[0]", "string entry");
  ExpectBadParam(Parse(R"({"messages":[{"role":"user","content":"a"},{"role":"wizard","content":"b"}]})", chat),
                 "messages[1].role", "unknown role");
  ExpectBadParam(Parse(R"({"messages":[{"content":"a"}]})", chat), "messages[0].role",
                 "missing role");
  ExpectBadParam(Parse(R"({"messages":[{"role":"user","content":5}]})", chat),
                 "messages[0].content", "numeric content");
  ExpectBadParam(Parse(R"({"messages":[{"role":"user","content":null}]})", chat),
                 "messages[0].content", "null user content");
  ExpectBadParam(Parse(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", chat),
                 "messages[0].content[0].type", "image part");

  RequestLimits limits;
  limits.max_messages = 2;
  ExpectBadParam(Parse(R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]})",
                       chat, limits),
                 "messages", "above max_messages");
}

// What the chat template sees: each message as sent (key order kept, tool_calls and
// tool_call_id included, "developer" as "system"), tools / documents / chat_template_kwargs
// as sent, add_generation_prompt.
TEST(ParseGenerationRequest, TemplateInputsKeepTheClientsObjects) {
  Parsed p = Parse(R"({"messages":[{"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"}],"name":"ann"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{"zeta":1,"alpha":2}}}],
    "documents":[{"title":"t","text":"x"}],
    "chat_template_kwargs":{"enable_thinking":false},
    "add_generation_prompt":false})",
                   Endpoint::kChatCompletions);
  ASSERT_FALSE(p.error) << p.error->message;
  const GenerationRequest& r = p.request;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].object.dump(), R"({"role":"system","content":"be brief"})");
  EXPECT_EQ(r.messages[1].object.dump(),
            R"({"role":"user","content":[{"type":"text","text":"a"}],"name":"ann"})");
  EXPECT_EQ(r.messages[2].object["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[3].object.dump(), R"({"role":"tool","tool_call_id":"c1","content":"42"})");
  // Not sorted: "zeta" before "alpha", as the client wrote it.
  EXPECT_EQ(r.tools.dump(),
            R"([{"type":"function","function":{"name":"f","parameters":{"zeta":1,"alpha":2}}}])");
  EXPECT_EQ(r.documents.dump(), R"([{"title":"t","text":"x"}])");
  EXPECT_EQ(r.chat_template_kwargs.dump(), R"({"enable_thinking":false})");
  EXPECT_FALSE(r.add_generation_prompt);

  Parsed plain = Parse(R"({"messages":[{"role":"user","content":"hi"}]})", Endpoint::kChatCompletions);
  ASSERT_FALSE(plain.error);
  EXPECT_TRUE(plain.request.tools.is_null());
  EXPECT_TRUE(plain.request.documents.is_null());
  EXPECT_TRUE(plain.request.add_generation_prompt);
}

TEST(ParseGenerationRequest, TemplateInputsAreValidated) {
  const Endpoint chat = Endpoint::kChatCompletions;
  ExpectBadParam(ParseWith("tools", R"({"type":"function"})", chat), "tools", "tools object");
  ExpectBadParam(ParseWith("tools", R"(["f"])", chat), "tools[0]", "tool string");
  ExpectBadParam(ParseWith("tools", R"([{"type":"retrieval"}])", chat), "tools[0].type",
                 "tool type");
  ExpectBadParam(ParseWith("tools", R"([{"type":"function"}])", chat), "tools[0].function",
                 "tool without function");
  ExpectBadParam(ParseWith("tools", R"([{"type":"function","function":{"name":""}}])", chat),
                 "tools[0].function.name", "empty function name");
  ExpectBadParam(ParseWith("documents", R"("text")", chat), "documents", "documents string");
  ExpectBadParam(ParseWith("chat_template_kwargs", "[1]", chat), "chat_template_kwargs",
                 "kwargs array");
  for (const char* own : {"messages", "tools", "documents", "add_generation_prompt", "bos_token",
                          "eos_token"}) {
    ExpectBadParam(ParseWith("chat_template_kwargs", std::string("{\"") + own + "\":1}", chat),
                   std::string("chat_template_kwargs.") + own, own);
  }
  ExpectBadParam(ParseWith("add_generation_prompt", "1", chat), "add_generation_prompt", "int");
  std::string many = "[";
  for (int i = 0; i < 257; ++i) {
    many += std::string(i ? "," : "") + R"({"type":"function","function":{"name":"f"}})";
  }
  ExpectBadParam(ParseWith("tools", many + "]", chat), "tools", "257 tools (cap 256)");
}

struct FieldCase {
  std::string field;
  std::vector<std::string> accepted;  // JSON literals
  std::vector<std::string> rejected;
};

// Ranges from the API description: temperature [0,2], top_p (0,1], top_k >= 0, min_p [0,1],
// penalties [-2,2], repeat_penalty (0,10], max_tokens >= 1 (cap 131072 by default), seed int64,
// n only 1, deadline_ms [1, 3600000]. Floats for integer fields, strings, booleans, 2^63 and
// beyond-double literals are all rejected.
TEST(ParseGenerationRequest, RangesAndTypesPerField) {
  const std::vector<FieldCase> cases = {
      {"temperature", {"0", "2", "0.7", "1"}, {"-0.001", "2.001", "\"1\"", "true", "[1]", "1e400"}},
      {"top_p", {"1", "0.0001", "0.5"}, {"0", "-0.5", "1.0001", "\"0.5\""}},
      {"top_k", {"0", "1", "40"}, {"-1", "1.5", "\"40\"", "false"}},
      {"min_p", {"0", "1", "0.1"}, {"-0.01", "1.01", "\"0.1\""}},
      {"presence_penalty", {"-2", "2", "0"}, {"-2.01", "2.01", "\"0\""}},
      {"frequency_penalty", {"-2", "2"}, {"-2.5", "3"}},
      {"repeat_penalty", {"0.01", "10", "1"}, {"0", "-1", "10.001"}},
      {"max_tokens", {"1", "131072"}, {"0", "-1", "131073", "1.0", "9223372036854775808",
                                       "18446744073709551616", "\"5\"", "2147483648"}},
      {"max_completion_tokens", {"1", "64"}, {"0", "-5", "131073", "2.5"}},
      {"seed", {"0", "-9223372036854775808", "9223372036854775807"},
       {"9223372036854775808", "1.5", "\"1\""}},
      {"n", {"1", "2", "16"}, {"17", "0", "-1", "1.0"}},
      {"best_of", {"1"}, {"3"}},
      {"deadline_ms", {"1", "3600000"}, {"0", "3600001", "-10"}},
      {"stream", {"true", "false"}, {"1", "\"true\""}},
      {"ignore_eos", {"true"}, {"0"}},
      {"allow_context_trim", {"true", "false"}, {"1", "\"true\"", "{}"}},
      {"logprobs", {"0", "5"}, {"6", "-1", "true"}},
      {"echo", {"false", "true"}, {"1"}},
      {"suffix", {"\"\"", "\"}\""}, {"1"}},
      {"logit_bias", {"{}", "{\"0\":100}", "{\"2147483647\":-100}"}, {"[]", "3"}},
      {"grammar", {"\"root ::= \\\"a\\\"\""}, {"\"\"", "1"}},
      {"user", {"\"u\""}, {"1"}},
      {"model", {"\"fake\""}, {"\"\"", "5", "[\"m\"]"}},
      {"slo_class", {"\"chat\"", "\"customer-service\"", "\"a.b_c\""},
       {"\"\"", "\"has space\"", "\"emoji\xF0\x9F\x98\x80\"", "7"}},
      {"user_role", {"\"doctor\""}, {"\"x/y\"", "[]"}},
  };
  for (const FieldCase& c : cases) {
    for (const std::string& v : c.accepted) {
      Parsed p = ParseWith(c.field, v);
      EXPECT_FALSE(p.error) << c.field << "=" << v << ": " << p.error->message;
    }
    for (const std::string& v : c.rejected) {
      Parsed p = ParseWith(c.field, v);
      // "1e400" is not representable: the JSON parser rejects it before the field check.
      if (v == "1e400" && p.error && p.error->param.empty()) continue;
      ExpectBadParam(p, c.field, c.field + "=" + v);
    }
  }
}

// A bad logit_bias entry names its key.
TEST(ParseGenerationRequest, LogitBiasEntriesAreNamed) {
  for (const auto& [value, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"-1":1})", "logit_bias.-1"}, {R"({"01":1})", "logit_bias.01"},
           {R"({"x":1})", "logit_bias.x"}, {R"({"2147483648":1})", "logit_bias.2147483648"},
           {R"({"5":100.5})", "logit_bias.5"}, {R"({"5":-101})", "logit_bias.5"},
           {R"({"5":"1"})", "logit_bias.5"}}) {
    ExpectBadParam(ParseWith("logit_bias", value), param, value);
  }
  RequestLimits few;
  few.max_logit_bias = 1;
  ExpectBadParam(Parse(R"({"prompt":"x","logit_bias":{"1":1,"2":2}})", Endpoint::kCompletions, few),
                 "logit_bias", "over max_logit_bias");
}

TEST(ParseGenerationRequest, TopKAboveCapIsClampedNotRejected) {
  Parsed p = ParseWith("top_k", "5000000");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.request.sampling.top_k, 1000000);
}

TEST(ParseGenerationRequest, MaxTokensCapIsConfigurableAndAliasesMustAgree) {
  RequestLimits limits;
  limits.max_tokens_cap = 100;
  ExpectBadParam(Parse(R"({"prompt":"x","max_tokens":101})", Endpoint::kCompletions, limits),
                 "max_tokens", "over custom cap");
  EXPECT_FALSE(Parse(R"({"prompt":"x","max_tokens":100})", Endpoint::kCompletions, limits).error);
  ExpectBadParam(Parse(R"({"prompt":"x","max_tokens":5,"max_completion_tokens":6})"),
                 "max_completion_tokens", "aliases disagree");
  Parsed same = Parse(R"({"prompt":"x","max_tokens":5,"max_completion_tokens":5})");
  ASSERT_FALSE(same.error);
  EXPECT_EQ(same.request.max_tokens, 5);
  Parsed alias = Parse(R"({"prompt":"x","max_completion_tokens":9})");
  ASSERT_FALSE(alias.error);
  EXPECT_EQ(alias.request.max_tokens, 9);
}

TEST(ParseGenerationRequest, StopSequences) {
  EXPECT_EQ(ParseWith("stop", "\"END\"").request.stop, std::vector<std::string>{"END"});
  std::string sixteen = "[";
  for (int i = 0; i < 16; ++i) sixteen += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  Parsed ok16 = ParseWith("stop", sixteen + "]");
  ASSERT_FALSE(ok16.error);
  EXPECT_EQ(ok16.request.stop.size(), 16u);
  ExpectBadParam(ParseWith("stop", sixteen + ",\"s16\"]"), "stop", "17 stop sequences");
  ExpectBadParam(ParseWith("stop", "\"\""), "stop", "empty stop string");
  ExpectBadParam(ParseWith("stop", R"(["a",""])"), "stop[1]", "empty stop element");
  ExpectBadParam(ParseWith("stop", R"(["a",3])"), "stop[1]", "numeric stop element");
  ExpectBadParam(ParseWith("stop", "5"), "stop", "numeric stop");
  const std::string kb(1024, 'x');
  EXPECT_FALSE(ParseWith("stop", "\"" + kb + "\"").error);
  ExpectBadParam(ParseWith("stop", "\"" + kb + "y\""), "stop", "1025-byte stop");
  ExpectBadParam(ParseWith("stop", "[\"" + kb + "y\"]"), "stop[0]", "1025-byte stop element");
}

TEST(ParseGenerationRequest, StreamOptionsNeedStream) {
  ExpectBadParam(ParseWith("stream_options", R"({"include_usage":true})"), "stream_options",
                 "stream_options without stream");
  Parsed ok = Parse(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_FALSE(ok.error);
  EXPECT_TRUE(ok.request.include_usage);
  ExpectBadParam(Parse(R"({"prompt":"x","stream":true,"stream_options":{"include_usage":1}})"),
                 "stream_options.include_usage", "non-boolean include_usage");
  ExpectBadParam(Parse(R"({"prompt":"x","stream":true,"stream_options":[]})"), "stream_options",
                 "array stream_options");
}

TEST(ParseGenerationRequest, MalformedBodiesAre400) {
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"", "invalid_json"},
      {R"({"prompt":"x")", "invalid_json"},           // truncated
      {R"({"prompt":"x"} trailing)", "invalid_json"},  // trailing garbage
      {R"({"prompt":"x","temperature":NaN})", "invalid_json"},
      {R"({"prompt":"x",})", "invalid_json"},
      {R"({'prompt':'x'})", "invalid_json"},
      {R"({"prompt":"x","prompt":"y"})", "duplicate_key"},
      {R"({"prompt":"x","o":{"k":1,"k":2}})", "duplicate_key"},
      {"{\"prompt\":\"\xC3\x28\"}", "invalid_utf8"},
      {"[]", "invalid_type"},
      {"\"just a string\"", "invalid_type"},
      {"42", "invalid_type"},
      {"null", "invalid_type"},
  };
  for (const auto& [body, code] : bodies) {
    Parsed p = Parse(body);
    ASSERT_TRUE(p.error) << body;
    EXPECT_EQ(p.error->http_status, 400) << body;
    EXPECT_EQ(p.error->type, "invalid_request_error") << body;
    EXPECT_EQ(p.error->code, code) << body;
  }
}

TEST(ParseGenerationRequest, NestingDepthLimit) {
  // 10^5 nested arrays: rejected by the pre-scan, no recursion into the parser.
  Parsed deep = Parse(std::string(100000, '['));
  ASSERT_TRUE(deep.error);
  EXPECT_EQ(deep.error->code, "json_too_deep");
  // Object (depth 1) + 63 nested arrays = 64 levels: allowed; one more is not.
  // Body (depth 1) + chat_template_kwargs (2) + 62 nested arrays = 64 levels: allowed; one
  // more is not.
  auto nested = [](int arrays) {
    return R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"k":)" +
           std::string(arrays, '[') + std::string(arrays, ']') + "}}";
  };
  const Endpoint chat = Endpoint::kChatCompletions;
  EXPECT_FALSE(Parse(nested(62), chat).error);
  Parsed over = Parse(nested(63), chat);
  ASSERT_TRUE(over.error);
  EXPECT_EQ(over.error->code, "json_too_deep");
  RequestLimits shallow;
  shallow.max_json_depth = 2;
  EXPECT_TRUE(Parse(nested(1), chat, shallow).error);
}

TEST(ParseGenerationRequest, FieldTableCoversTheDocumentedFields) {
  const std::vector<std::string> documented = {
      "model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature",
      "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty",
      "repeat_penalty", "stream", "stream_options", "ignore_eos", "n", "slo_class", "user_role",
      "deadline_ms", "allow_context_trim", "tools", "documents", "chat_template_kwargs",
      "add_generation_prompt", "logprobs", "top_logprobs", "echo", "logit_bias", "suffix",
      "response_format", "grammar", "tool_choice", "parallel_tool_calls", "user", "store",
      "service_tier", "modalities", "best_of", "input_prefix", "input_suffix"};
  for (const std::string& name : documented) {
    bool found = false;
    for (const FieldSpec& f : RequestFields()) found = found || f.name == name;
    EXPECT_TRUE(found) << name;
  }
  // Property over the whole table: a wrong JSON type is a 400 naming the field.
  for (const FieldSpec& f : RequestFields()) {
    const Endpoint ep = f.applies == Applies::kChatOnly    ? Endpoint::kChatCompletions
                        : f.applies == Applies::kInfillOnly ? Endpoint::kInfill
                                                            : Endpoint::kCompletions;
    const std::string wrong = f.kind == JsonKind::kString ? "{}" : "{\"x\":1}";
    // An object is these fields' right type.
    if (f.name == "stream_options" || f.name == "chat_template_kwargs" ||
        f.name == "logit_bias" || f.name == "response_format" || f.name == "tool_choice") {
      continue;
    }
    ExpectBadParam(ParseWith(std::string(f.name), wrong, ep), std::string(f.name),
                   std::string(f.name) + " as an object");
  }
}

TEST(CheckContentType, OnlyJsonIsAccepted) {
  EXPECT_FALSE(CheckContentType("application/json"));
  EXPECT_FALSE(CheckContentType("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(CheckContentType(" application/json ;charset=UTF-8"));
  for (const char* bad : {"text/plain", "application/x-www-form-urlencoded",
                          "application/jsonx", "multipart/form-data; boundary=x", ""}) {
    auto err = CheckContentType(std::string_view(bad));
    ASSERT_TRUE(err) << bad;
    EXPECT_EQ(err->http_status, 415) << bad;
  }
  auto missing = CheckContentType(std::nullopt);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->http_status, 415);
}

TEST(ResolveModel, DefaultsToFirstAndRejectsUnknown) {
  const std::vector<ModelInfo> models = {{"big", "x", 0, 0}, {"small", "x", 0, 0}};
  std::string resolved;
  EXPECT_FALSE(ResolveModel(models, "", &resolved));
  EXPECT_EQ(resolved, "big");
  EXPECT_FALSE(ResolveModel(models, "small", &resolved));
  EXPECT_EQ(resolved, "small");
  auto unknown = ResolveModel(models, "gpt-17", &resolved);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->http_status, 404);
  EXPECT_EQ(unknown->type, "not_found_error");
  EXPECT_EQ(unknown->code, "model_not_found");
  EXPECT_EQ(unknown->param, "model");
  auto none = ResolveModel({}, "", &resolved);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->http_status, 503);
}

TEST(ErrorJson, OpenAiShape) {
  json e = ErrorJson(InvalidRequestError("top_p", "bad top_p"));
  EXPECT_EQ(e, json::parse(R"({"error":{"message":"bad top_p","type":"invalid_request_error",
                                 "param":"top_p","code":"invalid_value"}})"));
  json no_param = ErrorJson(ApiError{500, "internal_error", "", "boom", "", 0});
  EXPECT_TRUE(no_param["error"]["param"].is_null());
  EXPECT_TRUE(no_param["error"]["code"].is_null());
}

}  // namespace
}  // namespace lifeline::api
