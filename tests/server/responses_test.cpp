// Response bodies, SSE framing, Server-Timing and the wire serialization, against hand-written
// expectations.
#include "server/responses.h"

#include <gtest/gtest.h>

#include "server/http_message.h"
#include "server/openai.h"

namespace lifeline::server {
namespace {

using nlohmann::json;

CompletionContext Ctx(bool chat) { return {chat ? "chatcmpl-1" : "cmpl-1", "m", 1700000000, chat}; }

TEST(FinalResponseJson, CompletionShape) {
  const json timings = {{"prefill_ms", 3.5}};
  json r = FinalResponseJson(Ctx(false), "Hello", "length", Usage{7, 3}, timings);
  EXPECT_EQ(r, json::parse(R"({
    "id":"cmpl-1","object":"text_completion","created":1700000000,"model":"m",
    "choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":"length"}],
    "usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10},
    "timings":{"prefill_ms":3.5}})"));
}

TEST(FinalResponseJson, ChatShape) {
  json r = FinalResponseJson(Ctx(true), "Hi!", "stop", Usage{2, 1}, json::object());
  EXPECT_EQ(r, json::parse(R"({
    "id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m",
    "choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],
    "usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3},"timings":{}})"));
}

TEST(StreamChunks, ChatDeltaCarriesRoleOnlyFirst) {
  json first = StreamDeltaJson(Ctx(true), "He", true);
  json second = StreamDeltaJson(Ctx(true), "llo", false);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json::parse(R"({"role":"assistant","content":"He"})"));
  EXPECT_EQ(second["choices"][0]["delta"], json::parse(R"({"content":"llo"})"));
  EXPECT_TRUE(second["choices"][0]["finish_reason"].is_null());
}

TEST(StreamChunks, CompletionDeltaFinishAndUsage) {
  json delta = StreamDeltaJson(Ctx(false), "tok", true);
  EXPECT_EQ(delta["object"], "text_completion");
  EXPECT_EQ(delta["choices"][0]["text"], "tok");
  const json timings = {{"decode_ms", 9}};
  json finish = StreamFinishJson(Ctx(false), "stop", &timings);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(finish["choices"][0]["text"], "");
  EXPECT_EQ(finish["timings"], timings);
  json finish_chat = StreamFinishJson(Ctx(true), "length", nullptr);
  EXPECT_EQ(finish_chat["choices"][0]["delta"], json::object());
  EXPECT_FALSE(finish_chat.contains("timings"));
  json usage = StreamUsageJson(Ctx(true), Usage{4, 5}, nullptr);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 9);
}

TEST(Sse, Framing) {
  EXPECT_EQ(SseEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(kSseHeartbeat.front(), ':');  // a comment line: ignored by SSE parsers
}

TEST(Sse, InvalidUtf8TextIsReplacedNotThrown) {
  const std::string out = SseEvent(StreamDeltaJson(Ctx(false), "bad\xC3", false));
  EXPECT_NE(out.find("bad\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
}

TEST(ServerTiming, BuildsFromMsMembers) {
  const json timings = {{"queue_ms", 1.2}, {"prefill_ms", 30.1}, {"tokens", 5},
                        {"odd name_ms", 2}, {"ms", 4}, {"decode_ms", "n/a"}};
  // nlohmann objects iterate in key order.
  EXPECT_EQ(ServerTimingHeader(timings), "odd_name;dur=2, prefill;dur=30.1, queue;dur=1.2");
  EXPECT_EQ(ServerTimingHeader(json::object()), "");
  EXPECT_EQ(ServerTimingHeader(json::array()), "");
}

TEST(HttpMessage, SerializeResponseExactBytes) {
  HttpResponse r;
  r.status = 404;
  r.body = "{}";
  r.headers.emplace_back("X-A", "b");
  EXPECT_EQ(SerializeResponse(r, false),
            "HTTP/1.1 404 Not Found\r\nServer: lifeline\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nX-A: b\r\nContent-Length: 2\r\n\r\n{}");
}

TEST(HttpMessage, ChunkFramesUseHexSizes) {
  EXPECT_EQ(ChunkFrame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(ChunkFrame(std::string(26, 'z')), "1a\r\n" + std::string(26, 'z') + "\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(HttpMessage, ErrorResponseAddsRetryAfter) {
  HttpResponse r = ErrorResponse(ApiError{429, "overloaded", "queue_full", "busy", "", 3});
  EXPECT_EQ(r.status, 429);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Retry-After", "3"}));
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "queue_full");
  EXPECT_TRUE(ErrorResponse(InvalidRequestError("x", "y")).headers.empty());
}

}  // namespace
}  // namespace lifeline::server
