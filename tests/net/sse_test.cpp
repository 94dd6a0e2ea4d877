// The SSE parser at every split point and line-ending style, and the reading of OpenAI chunks.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "net/sse.h"

namespace lifeline::net {
namespace {

std::vector<SseEvent> FeedAll(const std::string& bytes, size_t split) {
  SseParser p;
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed(bytes.substr(0, split), &out));
  EXPECT_TRUE(p.Feed(bytes.substr(split), &out));
  return out;
}

TEST(SseParser, EventsAreTheSameAtEverySplitPoint) {
  const std::string stream =
      ": keep-alive\n\n"
      "data: {\"a\":1}\n\n"
      "event: note\r\ndata: line1\r\ndata: line2\r\n\r\n"
      "data:nospace\r\r"
      "id: 7\nretry: 10\ndata: [DONE]\n\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    const auto ev = FeedAll(stream, split);
    ASSERT_EQ(ev.size(), 4u) << "split " << split;
    EXPECT_EQ(ev[0].data, "{\"a\":1}");
    EXPECT_EQ(ev[1].event, "note");
    EXPECT_EQ(ev[1].data, "line1\nline2");
    EXPECT_EQ(ev[2].data, "nospace");
    EXPECT_EQ(ev[3].data, "[DONE]");
  }
}

TEST(SseParser, PartialEventAndLineCap) {
  SseParser p;
  std::vector<SseEvent> out;
  EXPECT_TRUE(p.Feed("data: {\"x\"", &out));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(p.HasPartialEvent());
  EXPECT_TRUE(p.Feed(":1}\n\n", &out));
  EXPECT_EQ(out.size(), 1u);
  EXPECT_FALSE(p.HasPartialEvent());

  SseParser small(16);
  EXPECT_FALSE(small.Feed("data: 0123456789abcdefXYZ", &out));
}

TEST(ParseStreamChunk, CompletionChatUsageTimingsErrors) {
  const StreamChunk c = ParseStreamChunk(
      R"({"model":"m1","choices":[{"index":0,"text":"Hi","finish_reason":null}]})");
  EXPECT_EQ(c.malformed, "");
  EXPECT_EQ(c.model, "m1");
  EXPECT_EQ(c.text, "Hi");
  EXPECT_EQ(c.finish_reason, "");

  const StreamChunk chat = ParseStreamChunk(
      R"({"model":"m2","choices":[{"index":0,"delta":{"role":"assistant","content":"Yo"}}]})");
  EXPECT_EQ(chat.text, "Yo");

  const StreamChunk fin = ParseStreamChunk(
      R"({"choices":[{"index":0,"text":"","finish_reason":"length"}],"timings":{"queue_ms":1.5}})");
  EXPECT_EQ(fin.finish_reason, "length");
  EXPECT_TRUE(fin.text.empty());
  ASSERT_TRUE(fin.timings.is_object());
  EXPECT_EQ(fin.timings["queue_ms"].get<double>(), 1.5);

  const StreamChunk usage = ParseStreamChunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_EQ(usage.prompt_tokens, 12);
  EXPECT_EQ(usage.completion_tokens, 34);

  EXPECT_TRUE(ParseStreamChunk("[DONE]").done);
  EXPECT_TRUE(ParseStreamChunk("[DONE]\n").done);
  const StreamChunk err = ParseStreamChunk(R"({"error":{"message":"boom","type":"x"}})");
  EXPECT_EQ(err.error, "boom");
  EXPECT_EQ(ParseStreamChunk(R"({"error":"plain"})").error, "plain");
}

// Both clients refuse the same chunks, saying why.
TEST(ParseStreamChunk, MalformedChunksSayWhy) {
  for (const auto& [data, why] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a JSON object"},
           {"[1,2]", "not a JSON object"},
           {R"({"choices":{"text":"x"}})", "'choices' is not an array"},
           {R"({"choices":["x"]})", "choices[0] is not an object"},
           {R"({"choices":[{"text":5}]})", "choices[0].text is not a string"},
           {R"({"choices":[{"delta":{"content":[1]}}]})", "choices[0].delta.content is not a string"}}) {
    const StreamChunk c = ParseStreamChunk(data);
    EXPECT_NE(c.malformed.find(why), std::string::npos) << data << " -> " << c.malformed;
  }
  // Null text is no text, not an error (a role-only first delta).
  EXPECT_EQ(ParseStreamChunk(R"({"choices":[{"delta":{"content":null}}]})").malformed, "");
}

TEST(SseParser, BareCarriageReturnsEndLinesAndFinishFlushes) {
  SseParser p;
  std::vector<SseEvent> out;
  ASSERT_TRUE(p.Feed("data: a\r\rdata: b\r\n\r\ndata: c", &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, "a");
  EXPECT_EQ(out[1].data, "b");
  p.Finish(&out);  // the body ended without the last blank line
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].data, "c");
}

TEST(ErrorBodyMessage, OpenAiVllmAndPlainBodies) {
  EXPECT_EQ(ErrorBodyMessage(R"({"error":{"message":"bad model","type":"x"}})"), "bad model");
  EXPECT_EQ(ErrorBodyMessage(R"({"error":"down"})"), "down");
  EXPECT_EQ(ErrorBodyMessage(R"({"message":"vllm says no"})"), "vllm says no");
  EXPECT_EQ(ErrorBodyMessage(""), "(empty body)");
  EXPECT_EQ(ErrorBodyMessage("<html>"), "body: <html>");
}

}  // namespace
}  // namespace lifeline::net
