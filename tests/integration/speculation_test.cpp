// Speculative decoding end to end: `serve --speculate 4` against a second server without it,
// same model, same requests. Drafting -- by prompt lookup, or by a draft model (`--draft`, a
// Q8_0 re-quantization of the target) -- must not change a single output byte -- greedy or
// seeded sampling, plain or streamed, with stop strings and several choices -- because every
// generated token is still sampled from the target model's own logits, one sampler draw per
// token, in order (a draft only saves the step). That is the accept/reject rule for a draft
// that is one fixed guess per position: the guess survives with the probability the target
// gives it, and a rejected position holds the target's own sample. And the drafts must
// actually be used (timings spec_accepted > 0), or the comparison would prove nothing.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/live_server.h"
#include "test_paths.h"

namespace lifeline::integration {
namespace {

using json = nlohmann::json;

class SpeculationTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> a = LiveServerTest::ServeArgs();
    // --spec-always: every decode is drafted, whatever the cost model would say on a busy
    // machine (it turned drafting off under a loaded full test run once, leaving too few
    // drafts to compare); the cost model has its own tests (scheduler/speculation_test.cpp).
    a.insert(a.end(), {"--speculate", "4", "--spec-always"});
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
  // 15 requests (3 prompts x plain / streamed / seeded / stop / n=2) to both servers: the
  // same outputs, more than min_accepted drafted tokens accepted, and /metrics counting what
  // the responses' timings said.
  void ExpectSameOutputsAndDraftsUsed(int64_t min_accepted);
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

void SpeculationTest::ExpectSameOutputsAndDraftsUsed(int64_t min_accepted) {
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
  EXPECT_GT(accepted, min_accepted) << "drafted " << drafted << " tokens over " << cases << " requests";
  EXPECT_GE(drafted, accepted);
  ASSERT_TRUE(WaitIdle());
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "lifeline_spec_accepted_tokens_total").value_or(-1), accepted) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_spec_drafted_tokens_total").value_or(-1), drafted) << m;
}

TEST_F(SpeculationTest, OutputIsByteForByteTheSameAndDraftsAreUsed) {
  ExpectSameOutputsAndDraftsUsed(20);
}

// A draft model: the target's own Q8_0 re-quantization (made here with `lifeline quantize`),
// drafting at every decode (--spec-always: on a model this small the cost model rightly finds
// that a draft as big as the target never pays, and the test needs drafts).
class DraftModelSpeculationTest : public SpeculationTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    draft_path_ = dir_->path() + "/stories260K-q8_0.gguf";
    const std::string cmd = lifeline::testing::LifelineBinary() + " quantize --type q8_0 " +
                            ModelPath("stories260K.gguf") + " " + draft_path_ + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> a = LiveServerTest::ServeArgs();
    a.insert(a.end(), {"--draft", draft_path_, "--spec-always"});
    return a;
  }
  static TempDir* dir_;
  static std::string draft_path_;
};
TempDir* DraftModelSpeculationTest::dir_ = nullptr;
std::string DraftModelSpeculationTest::draft_path_;

TEST_F(DraftModelSpeculationTest, OutputIsByteForByteTheSameAndDraftsAreUsed) {
  // A Q8_0 copy agrees with the target on most greedy tokens: far more accepted than by
  // prompt lookup.
  ExpectSameOutputsAndDraftsUsed(200);
  // Without --speculate, a draft model drafts 4 tokens per decode.
  EXPECT_NE(server().StderrText().find("drafts with " + draft_path_ + " (4 tokens per decode)"),
            std::string::npos)
      << server().StderrText();
}

// Bad --draft input fails the start with a message naming the problem.
TEST(DraftModelFlags, ABadDraftFailsTheStartNamingIt) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::string target = "stories=" + ModelPath("stories260K.gguf");
  const std::vector<Case> cases = {
      {{"--draft", ModelPath("llama-2-tiny-random.gguf")}, "vocabulary of 32000 tokens"},
      {{"--draft", "/nonexistent/draft.gguf"}, "--draft /nonexistent/draft.gguf"},
      {{"--draft", "nosuch=" + ModelPath("stories260K.gguf")}, "no --model named 'nosuch'"},
      {{"--draft", ModelPath("stories260K.gguf"), "--speculate", "0"}, "--speculate 0"},
      {{"--draft", ModelPath("stories260K.gguf"), "--draft", "stories=" + ModelPath("stories260K.gguf")},
       "two draft models"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    std::vector<std::string> args = {"--model", target, "--threads", "1", "--kv-memory", "16"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    ServerProcess server;
    const std::string err = server.Start(args);
    EXPECT_NE(err, "") << "serve started with a bad draft";
    ASSERT_TRUE(server.exit_status().has_value()) << err;
    EXPECT_NE(*server.exit_status(), 0) << err;
    const std::string text = server.StderrText();
    EXPECT_NE(text.find(c.expected), std::string::npos) << "'" << c.expected << "' not in: " << text;
  }
}

}  // namespace
}  // namespace lifeline::integration
