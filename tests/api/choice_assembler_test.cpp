// ChoiceAssembler: engine events -> OpenAI bodies and stream chunks, against hand-written
// expectations of OpenAI's shapes (choices, logprobs, tool calls, usage).
#include "api/choice_assembler.h"

#include <gtest/gtest.h>

namespace lifeline::api {
namespace {

using nlohmann::json;

CompletionContext Ctx(bool chat) { return {chat ? "chatcmpl-1" : "cmpl-1", "m", 1700000000, chat}; }

AssemblerOptions Opts(bool chat, int32_t n = 1) {
  AssemblerOptions o;
  o.ctx = Ctx(chat);
  o.n_choices = n;
  return o;
}

GenerationEvent Tok(std::string text, int32_t index = 0) {
  GenerationEvent e = GenerationEvent::Token(std::move(text), 5);
  e.index = index;
  return e;
}

GenerationEvent Done(std::string finish, Usage usage) {
  return GenerationEvent::Done(std::move(finish), usage);
}

TEST(ChoiceAssembler, CompletionBody) {
  ChoiceAssembler a(Opts(false));
  a.OnToken(Tok("Hel"), false);
  a.OnToken(Tok("lo"), false);
  json r = a.FinalBody(Done("length", Usage{7, 3, 4}), {{"prefill_ms", 3.5}});
  EXPECT_EQ(r, json::parse(R"({
    "id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m",
    "choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":"length",
                "lifeline":{"truncated":false}}],
    "usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,
             "prompt_tokens_details":{"cached_tokens":4},
             "completion_tokens_details":{"reasoning_tokens":0}},
    "timings":{"prefill_ms":3.5}})"));
}

TEST(ChoiceAssembler, ChatBody) {
  ChoiceAssembler a(Opts(true));
  a.OnToken(Tok("Hi!"), false);
  json r = a.FinalBody(Done("stop", Usage{2, 1, 0}), json::object());
  EXPECT_EQ(r, json::parse(R"({
    "id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m",
    "choices":[{"index":0,"message":{"role":"assistant","content":"Hi!","refusal":null},
                "logprobs":null,"finish_reason":"stop","lifeline":{"truncated":false}}],
    "usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,
             "prompt_tokens_details":{"cached_tokens":0},
             "completion_tokens_details":{"reasoning_tokens":0}},"timings":{}})"));
}

TEST(ChoiceAssembler, ChatStreamRoleOnFirstDeltaThenFinishAndUsage) {
  ChoiceAssembler a(Opts(true));
  auto first = a.OnToken(Tok("He"), true);
  auto second = a.OnToken(Tok("llo"), true);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(first[0]["choices"][0]["delta"], json::parse(R"({"content":"He","role":"assistant"})"));
  EXPECT_EQ(second[0]["choices"][0]["delta"], json::parse(R"({"content":"llo"})"));
  EXPECT_TRUE(second[0]["choices"][0]["finish_reason"].is_null());
  const json timings = {{"decode_ms", 9}};
  auto end = a.StreamEnd(Done("stop", Usage{4, 5, 0}), /*include_usage=*/true, timings);
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(end[0]["choices"][0]["delta"], json::object());
  EXPECT_EQ(end[1]["choices"], json::array());
  EXPECT_EQ(end[1]["usage"]["total_tokens"], 9);
  EXPECT_EQ(end[1]["timings"], timings);
}

TEST(ChoiceAssembler, CompletionStreamTimingsOnTheFinishChunkWithoutUsage) {
  ChoiceAssembler a(Opts(false));
  auto d = a.OnToken(Tok("tok"), true);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["object"], "text_completion");
  EXPECT_EQ(d[0]["choices"][0]["text"], "tok");
  const json timings = {{"decode_ms", 9}};
  auto end = a.StreamEnd(Done("stop", Usage{1, 1, 0}), false, timings);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0]["choices"][0]["text"], "");
  EXPECT_EQ(end[0]["timings"], timings);
}

TEST(ChoiceAssembler, SeveralChoicesEachWithItsOwnFinish) {
  ChoiceAssembler a(Opts(true, 3));
  a.OnToken(Tok("a", 0), false);
  a.OnToken(Tok("b", 2), false);
  a.OnToken(Tok("c", 1), false);
  a.OnToken(Tok("d", 2), false);
  a.OnChoiceDone(2, "length", false);
  a.OnChoiceDone(0, "stop", false);
  json r = a.FinalBody(Done("stop", Usage{3, 4, 0}), json::object());
  ASSERT_EQ(r["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r["choices"][i]["index"], i);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(r["choices"][1]["message"]["content"], "c");
  EXPECT_EQ(r["choices"][2]["message"]["content"], "bd");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "stop");  // from the terminal event
  EXPECT_EQ(r["choices"][2]["finish_reason"], "length");

  ChoiceAssembler s(Opts(true, 2));
  auto c1 = s.OnToken(Tok("x", 1), true);
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0]["choices"][0]["index"], 1);
  EXPECT_EQ(c1[0]["choices"][0]["delta"]["role"], "assistant");
  auto f1 = s.OnChoiceDone(1, "stop", true);
  ASSERT_EQ(f1.size(), 1u);
  EXPECT_EQ(f1[0]["choices"][0]["index"], 1);
  EXPECT_EQ(f1[0]["choices"][0]["finish_reason"], "stop");
  auto end = s.StreamEnd(Done("length", Usage{}), false, json::object());
  ASSERT_EQ(end.size(), 1u);  // only choice 0 was still open
  EXPECT_EQ(end[0]["choices"][0]["index"], 0);
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "length");
}

GenerationEvent TokWithLogprobs(std::string text, std::vector<TokenLogprobs> lps) {
  GenerationEvent e = Tok(std::move(text));
  e.logprobs = std::move(lps);
  return e;
}

TEST(ChoiceAssembler, ChatLogprobsContentEntries) {
  AssemblerOptions o = Opts(true);
  o.logprobs = true;
  ChoiceAssembler a(o);
  a.OnToken(TokWithLogprobs("Hi", {{"Hi", -0.5f, {{"Hi", -0.5f}, {"Yo", -1.25f}}}}), false);
  // A token whose text is still held (half a character) comes with the next text.
  a.OnToken(TokWithLogprobs("\xC3\xA9", {{"\xC3", -2.0f, {}}, {"\xA9", -0.25f, {}}}), false);
  json r = a.FinalBody(Done("stop", Usage{1, 3, 0}), json::object());
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0]["token"], "Hi");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], json::parse("[72,105]"));
  EXPECT_EQ(content[0]["top_logprobs"][1], json::parse(R"({"token":"Yo","logprob":-1.25,"bytes":[89,111]})"));
  EXPECT_EQ(content[1]["bytes"], json::parse("[195]"));
  EXPECT_EQ(content[2]["bytes"], json::parse("[169]"));
  EXPECT_TRUE(r["choices"][0]["logprobs"]["refusal"].is_null());
}

TEST(ChoiceAssembler, CompletionLogprobsLegacyShape) {
  AssemblerOptions o = Opts(false);
  o.logprobs = true;
  ChoiceAssembler a(o);
  a.OnToken(TokWithLogprobs(" a b", {{" a", -0.1f, {{" a", -0.1f}, {" x", -3.0f}}},
                                     {" b", -0.2f, {{" b", -0.2f}}}}), false);
  json r = a.FinalBody(Done("length", Usage{1, 2, 0}), json::object());
  EXPECT_EQ(r["choices"][0]["logprobs"], json::parse(R"({
    "tokens":[" a"," b"],"token_logprobs":[-0.10000000149011612,-0.20000000298023224],
    "top_logprobs":[{" a":-0.10000000149011612," x":-3.0},{" b":-0.20000000298023224}],
    "text_offset":[0,2]})"));

  // Streamed: the entries ride on the chunk of their text.
  ChoiceAssembler s(o);
  auto chunks = s.OnToken(TokWithLogprobs("z", {{"z", -1.0f, {}}}), true);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["tokens"], json::parse(R"(["z"])"));
}

TEST(ChoiceAssembler, HermesToolCallsBodyAndFinishReason) {
  AssemblerOptions o = Opts(true);
  o.tool_format = toolcall::ToolCallFormat::kHermes;
  o.tool_call_id_seed = 7;
  ChoiceAssembler a(o);
  a.OnToken(Tok("<tool_call>\n{\"name\": \"get_weather\", \"argu"), false);
  a.OnToken(Tok("ments\": {\"city\": \"Paris\"}}\n</tool_call>"), false);
  json r = a.FinalBody(Done("stop", Usage{10, 20, 0}), json::object());
  const json& msg = r["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city":"Paris"})"));
  EXPECT_TRUE(msg["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ChoiceAssembler, StreamedToolCallDeltasConcatenateToTheArguments) {
  AssemblerOptions o = Opts(true);
  o.tool_format = toolcall::ToolCallFormat::kHermes;
  ChoiceAssembler a(o);
  std::vector<json> chunks;
  const std::string out = "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n</tool_call>";
  for (char ch : out) {
    for (json& c : a.OnToken(Tok(std::string(1, ch)), true)) chunks.push_back(std::move(c));
  }
  for (json& c : a.StreamEnd(Done("stop", Usage{}), false, json::object())) {
    chunks.push_back(std::move(c));
  }
  std::string content, name, args, finish;
  for (const json& c : chunks) {
    const json& ch = c["choices"][0];
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    const json& d = ch["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      const json& tc = d["tool_calls"][0];
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) name = tc["function"]["name"];
      args += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(content, "Sure.");
  EXPECT_EQ(name, "f");
  EXPECT_EQ(json::parse(args), json::parse(R"({"n":1})"));
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ChoiceAssembler, ACallCutByLengthStaysLength) {
  AssemblerOptions o = Opts(true);
  o.tool_format = toolcall::ToolCallFormat::kHermes;
  ChoiceAssembler a(o);
  a.OnToken(Tok("<tool_call>\n{\"name\": \"f\", \"argu"), false);
  json r = a.FinalBody(Done("length", Usage{}), json::object());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(r["choices"][0]["message"]["content"].get<std::string>().find("argu"),
            std::string::npos);  // nothing lost: the partial call is content
}

TEST(ChoiceAssembler, InfillBodyCarriesContent) {
  AssemblerOptions o = Opts(false);
  o.infill = true;
  ChoiceAssembler a(o);
  a.OnToken(Tok("return x;"), false);
  json r = a.FinalBody(Done("stop", Usage{}), json::object());
  EXPECT_EQ(r["content"], "return x;");
  EXPECT_EQ(r["choices"][0]["text"], "return x;");
}

// The ladder's cut in the fields a client reads: finish_reason stays "length" (OpenAI's), each
// choice's `lifeline` says whether the server cut it and why, the header value lists the
// reasons, and a stream ends with an event saying so.
json Cut(const std::string& reason, int64_t max_tokens, int64_t requested) {
  return {{"truncated", true}, {"reason", reason}, {"max_tokens", max_tokens},
          {"requested_max_tokens", requested}, {"detail", "class c at ladder level truncate"}};
}

TEST(ChoiceAssembler, TruncatedChoicesSayWhyInBodyHeaderAndStream) {
  ChoiceAssembler a(Opts(false, 2));
  a.OnToken(Tok("a", 0), false);
  a.OnToken(Tok("b", 1), false);
  a.OnChoiceDone(0, "length", false, Cut("max_tokens_cap", 256, 1606));
  a.OnChoiceDone(1, "stop", false, json{{"truncated", false}});
  GenerationEvent done = Done("stop", Usage{1, 2, 0});
  done.lifeline = json{{"truncated", false}};
  const json body = a.FinalBody(done, json::object());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][0]["lifeline"], Cut("max_tokens_cap", 256, 1606));
  EXPECT_EQ(body["choices"][1]["lifeline"], json({{"truncated", false}}));
  EXPECT_EQ(a.TruncatedReasons(), "max_tokens_cap");

  ChoiceAssembler s(Opts(true));
  s.OnToken(Tok("x"), true);
  GenerationEvent sd = Done("length", Usage{1, 1, 0});
  sd.lifeline = Cut("deadline", 256, 300);
  auto end = s.StreamEnd(sd, /*include_usage=*/true, json::object());
  ASSERT_EQ(end.size(), 3u);  // finish chunk, usage chunk, then the truncation event
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(end[0]["choices"][0]["lifeline"]["reason"], "deadline");
  EXPECT_TRUE(end[1].contains("usage"));
  EXPECT_EQ(end[2]["object"], "chat.completion.chunk");
  EXPECT_EQ(end[2]["choices"], json::array());
  EXPECT_EQ(end[2]["lifeline"]["truncated"], true);
  ASSERT_EQ(end[2]["lifeline"]["choices"].size(), 1u);
  EXPECT_EQ(end[2]["lifeline"]["choices"][0]["index"], 0);
  EXPECT_EQ(end[2]["lifeline"]["choices"][0]["reason"], "deadline");
  EXPECT_EQ(s.TruncatedReasons(), "deadline");
}

TEST(ChoiceAssembler, AnUncutStreamHasNoTruncationEventAndEveryChoiceSaysSo) {
  ChoiceAssembler a(Opts(true));
  a.OnToken(Tok("x"), true);
  auto end = a.StreamEnd(Done("length", Usage{1, 1, 0}), /*include_usage=*/false,
                         json::object());
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0]["choices"][0]["lifeline"], json({{"truncated", false}}));
  EXPECT_EQ(a.TruncatedReasons(), "");
}

// An engine that reports only the request-level timings.lifeline (a remote member): every
// choice it closes carries it.
TEST(ChoiceAssembler, RequestLevelTimingsLifelineMarksTheChoices) {
  ChoiceAssembler a(Opts(false));
  a.OnToken(Tok("x"), false);
  GenerationEvent done = Done("length", Usage{1, 1, 0});
  done.timings = {{"lifeline", {{"truncated", true}, {"reason", "class c: capped to 4"}}}};
  const json body = a.FinalBody(done, json::object());
  EXPECT_EQ(body["choices"][0]["lifeline"]["truncated"], true);
  EXPECT_EQ(body["choices"][0]["lifeline"]["reason"], "max_tokens_cap");
  EXPECT_EQ(body["choices"][0]["lifeline"]["detail"], "class c: capped to 4");
  EXPECT_EQ(a.TruncatedReasons(), "max_tokens_cap");
}

TEST(ChoiceAssembler, EmbeddingEventsFillTheirChoicesExactly) {
  ChoiceAssembler a(Opts(false, 3));
  GenerationEvent second = Tok("", 1);
  second.embedding = {0.1f, -2.5f, 1e-30f};
  GenerationEvent first = Tok("", 0);
  first.embedding = {3.0f};
  a.OnToken(second, false);
  a.OnToken(first, false);
  json r = a.FinalBody(Done("stop", Usage{6, 0}), json::object());
  ASSERT_EQ(r["choices"].size(), 3u);
  EXPECT_EQ(r["choices"][0]["embedding"], json::array({3.0}));
  ASSERT_EQ(r["choices"][1]["embedding"].size(), 3u);
  // The very floats the engine sent (as their exact doubles), in order.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][1]["embedding"][i].get<double>(),
              static_cast<double>(second.embedding[i]));
  }
  EXPECT_FALSE(r["choices"][2].contains("embedding")) << "a choice without one has none";
  EXPECT_EQ(r["choices"][1]["text"], "");
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  // A generation answer has no embedding key at all.
  ChoiceAssembler text(Opts(false));
  text.OnToken(Tok("Hi"), false);
  EXPECT_FALSE(text.FinalBody(Done("stop", Usage{1, 1}), json::object())["choices"][0].contains(
      "embedding"));
}

}  // namespace
}  // namespace lifeline::api
