// Response bodies, SSE framing, Server-Timing and the wire serialization, against hand-written
// expectations.
#include "api/responses.h"

#include <gtest/gtest.h>

#include "api/http_message.h"
#include "api/openai.h"

namespace lifeline::api {
namespace {

using nlohmann::json;



TEST(Sse, Framing) {
  EXPECT_EQ(SseEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(kSseHeartbeat.front(), ':');  // a comment line: ignored by SSE parsers
}

TEST(Sse, InvalidUtf8TextIsReplacedNotThrown) {
  const std::string out = SseEvent(json{{"text", "bad\xC3"}});
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

// The three layers lead, and sum to server_total: network 0.5, compute 10 + 20 + 5 = 35,
// service 51 - 0.5 - 35 = 15.5 (validate, template, tokenize, queue, kv_alloc, handoff).
TEST(ServerTiming, LayersFirstSummingToTheTotal) {
  const json t = {{"http_read_ms", 0.5}, {"validate_ms", 1},  {"template_ms", 2},
                  {"tokenize_ms", 3},    {"queue_ms", 4},     {"kv_alloc_ms", 5},
                  {"prefill_ms", 10},    {"decode_ms", 20},   {"sampling_ms", 5},
                  {"handoff_ms", 0.5},   {"server_total_ms", 51}};
  const std::string h = ServerTimingHeader(t);
  EXPECT_EQ(h.rfind("network;dur=0.5, service;dur=15.5, compute;dur=35, ", 0), 0u) << h;
  const json remote = {{"http_read_ms", 1}, {"validate_ms", 1}, {"remote_ms", 40},
                       {"server_total_ms", 43}};
  EXPECT_EQ(ServerTimingHeader(remote).rfind("network;dur=1, service;dur=2, compute;dur=40", 0), 0u);
}

// TTFT and TTFA ride as milestones after the phases; an unset one (-1) is left out.
TEST(ServerTiming, FirstTokenAndFirstAnswerTokenMilestones) {
  const json t = {{"queue_ms", 1}, {"latency", {{"ttft_ms", 12.5}, {"ttfa_ms", 410}}}};
  EXPECT_EQ(ServerTimingHeader(t), "queue;dur=1, ttft;dur=12.5, ttfa;dur=410");
  const json none = {{"latency", {{"ttft_ms", 3}, {"ttfa_ms", -1}}}};
  EXPECT_EQ(ServerTimingHeader(none), "ttft;dur=3");
}

TEST(ThinkingHeader, SaysWhatTheThinkingCostAndWhoShortenedIt) {
  EXPECT_EQ(ThinkingHeader(json::object()), "");
  EXPECT_EQ(ThinkingHeader(json{{"lifeline", {{"truncated", true}}}}), "");
  const json plain = {{"lifeline",
                       {{"reasoning",
                         {{"tokens", 40}, {"budget_tokens", -1}, {"requested_budget_tokens", -1},
                          {"cut", false}}}}}};
  EXPECT_EQ(ThinkingHeader(plain), "tokens=40; budget=-1");
  const json cut = {{"lifeline",
                     {{"reasoning",
                       {{"tokens", 130}, {"budget_tokens", 125}, {"requested_budget_tokens", 500},
                        {"shortened_by", "slo"}, {"cut", true}}}}}};
  EXPECT_EQ(ThinkingHeader(cut), "tokens=130; budget=125; requested=500; shortened-by=slo; cut");
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
}  // namespace lifeline::api
