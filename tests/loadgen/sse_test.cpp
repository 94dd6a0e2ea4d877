// The SSE parser at every split point and line-ending style, and the reading of OpenAI chunks.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench/loadgen/sse.h"

namespace lifeline::loadgen {
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

TEST(ParseChunk, CompletionChatUsageTimingsErrors) {
  const ChunkInfo c = ParseChunk(
      R"({"model":"m1","choices":[{"index":0,"text":"Hi","finish_reason":null}]})");
  EXPECT_FALSE(c.malformed);
  EXPECT_EQ(c.model, "m1");
  EXPECT_EQ(c.text, "Hi");
  EXPECT_EQ(c.finish_reason, "");

  const ChunkInfo chat = ParseChunk(
      R"({"model":"m2","choices":[{"index":0,"delta":{"role":"assistant","content":"Yo"}}]})");
  EXPECT_EQ(chat.text, "Yo");

  const ChunkInfo fin = ParseChunk(
      R"({"choices":[{"index":0,"text":"","finish_reason":"length"}],"timings":{"queue_ms":1.5}})");
  EXPECT_EQ(fin.finish_reason, "length");
  EXPECT_TRUE(fin.text.empty());
  ASSERT_TRUE(fin.timings.is_object());
  EXPECT_EQ(fin.timings["queue_ms"].get<double>(), 1.5);

  const ChunkInfo usage = ParseChunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_EQ(usage.prompt_tokens, 12);
  EXPECT_EQ(usage.completion_tokens, 34);

  EXPECT_TRUE(ParseChunk("[DONE]").done);
  EXPECT_TRUE(ParseChunk("not json").malformed);
  EXPECT_TRUE(ParseChunk("[1,2]").malformed);
  const ChunkInfo err = ParseChunk(R"({"error":{"message":"boom","type":"x"}})");
  EXPECT_EQ(err.error, "boom");
}

}  // namespace
}  // namespace lifeline::loadgen
