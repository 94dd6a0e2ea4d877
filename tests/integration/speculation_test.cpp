// Speculative decoding end to end: `serve --speculate 4` against a second server without it,
// same model, same requests. Prompt-lookup drafting must not change a single output byte --
// greedy or seeded sampling, plain or streamed, with stop strings and several choices --
// because every generated token is still sampled from the target model's own logits, one
// sampler draw per token, in order (a draft only saves the step). And the drafts must
// actually be used (timings spec_accepted > 0), or the comparison would prove nothing.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using json = nlohmann::json;

class SpeculationTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> a = LiveServerTest::ServeArgs();
    a.insert(a.end(), {"--speculate", "4"});
    return a;
  }
  void SetUp() override {
    LiveServerTest::SetUp();
    ASSERT_EQ(plain_.Start(LiveServerTest::ServeArgs()), "") << "the server without speculation";
  }
  void TearDown() override {
    plain_.Stop();
    LiveServerTest::TearDown();
  }
  ServerProcess plain_;
};

// The text of a plain or streamed completion (choice `index`), and its finish reason.
std::pair<std::string, std::string> TextOf(const HttpReply& r, bool stream, int index = 0) {
  std::string text, finish;
  if (!stream) {
    const json j = json::parse(r.body);
    for (const json& c : j["choices"]) {
      if (c["index"] != index) continue;
      text = c["text"];
      finish = c["finish_reason"];
    }
    return {text, finish};
  }
  for (const std::string& data : SseData(r.body)) {
    if (data == "[DONE]") break;
    const json j = json::parse(data);
    if (!j.contains("choices")) continue;
    for (const json& c : j["choices"]) {
      if (c["index"] != index) continue;
      if (c.contains("text")) text += c["text"].get<std::string>();
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) finish = c["finish_reason"];
    }
  }
  return {text, finish};
}

int64_t SpecAccepted(const HttpReply& r, bool stream, int64_t* drafted) {
  json timings;
  if (!stream) {
    timings = json::parse(r.body)["timings"];
  } else {
    for (const std::string& data : SseData(r.body)) {
      if (data == "[DONE]") break;
      const json j = json::parse(data);
      if (j.contains("timings")) timings = j["timings"];
    }
  }
  if (!timings.is_object() || !timings.contains("spec_accepted")) return -1;
  *drafted += timings["spec_drafted"].get<int64_t>();
  return timings["spec_accepted"].get<int64_t>();
}

TEST_F(SpeculationTest, OutputIsByteForByteTheSameAndDraftsAreUsed) {
  const std::vector<std::string> prompts = {
      // Copy-heavy: the model tends to continue a story it has just seen.
      "Once upon a time, there was a little girl named Lily. She loved to play in the park. "
      "One day, she saw a big dog. Once upon a time, there was a little girl named Lily. She",
      "Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom had a",
      "Once upon a time",
  };
  int64_t accepted = 0, drafted = 0;
  int cases = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int variant = 0; variant < 5; ++variant) {
      SCOPED_TRACE("prompt " + std::to_string(p) + " variant " + std::to_string(variant));
      json body = GreedyCompletion(prompts[p], 80);
      const bool stream = variant == 1 || variant == 3;
      if (stream) {
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
      }
      if (variant >= 2) {  // seeded sampling: one sampler draw per token either way
        body["temperature"] = 0.9;
        body["top_p"] = 0.95;
        body["seed"] = 1234 + static_cast<int>(p);
      }
      if (variant == 3) body["stop"] = json::array({"park", "ball."});
      if (variant == 4) body["n"] = 2;
      auto a = Post("/v1/completions", body);
      auto b = PostJson(plain_.port(), "/v1/completions", body);
      ASSERT_TRUE(a && b);
      ASSERT_EQ(a->status, 200) << a->body;
      ASSERT_EQ(b->status, 200) << b->body;
      for (int index = 0; index < (variant == 4 ? 2 : 1); ++index) {
        EXPECT_EQ(TextOf(*a, stream, index), TextOf(*b, stream, index)) << "choice " << index;
      }
      int64_t plain_drafted = 0;
      EXPECT_EQ(SpecAccepted(*b, stream, &plain_drafted), 0);
      EXPECT_EQ(plain_drafted, 0);
      const int64_t acc = SpecAccepted(*a, stream, &drafted);
      ASSERT_GE(acc, 0) << "timings carry spec_accepted";
      accepted += acc;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 15);
  EXPECT_GT(accepted, 20) << "drafted " << drafted << " tokens over " << cases << " requests";
  EXPECT_GE(drafted, accepted);
  ASSERT_TRUE(WaitIdle());
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "lifeline_spec_accepted_tokens_total").value_or(-1), accepted) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_spec_drafted_tokens_total").value_or(-1), drafted) << m;
}

}  // namespace
}  // namespace lifeline::integration
