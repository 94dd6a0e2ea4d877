// The prefix cache's RAM tier below the KV pool, on a real server (stories260K, a 1 MiB pool:
// about 100 blocks of 16 positions): a first prompt is pushed out of the pool by other
// prompts; when it returns its prefix is restored from the tier (timings.tokens.restored,
// cached tokens, /metrics) and the greedy answer is exactly the one computed from scratch.
// Without the tier (the default) the returning prompt is computed again.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;

// A prompt of a few hundred tokens, different for each seed from its first words.
std::string LongPrompt(int seed) {
  static const char* kWords[] = {"the", "little", "dog", "ran", "to", "a", "big", "tree",
                                 "and", "saw", "bird", "sing", "happy", "song", "under",
                                 "blue", "sky", "with", "friend", "cat"};
  std::string p = "Story " + std::to_string(seed) + ":";
  uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (int i = 0; i < 120; ++i) {
    x = x * 1664525u + 1013904223u;
    p += " ";
    p += kWords[(x >> 16) % 20];
  }
  return p;
}

json Body(const std::string& prompt) {
  return {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
}

class PrefixTierTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = {"--model", "stories=" + ModelPath("stories260K.gguf"),
                                     "--threads", "1", "--kv-memory", "1", "-c", "512",
                                     "--prefix-cache-reserve-tokens", "0"};
    if (with_tier_) {
      args.push_back("--prefix-cache-ram");
      args.push_back("16");
    }
    return args;
  }
  // The first prompt, then enough others to push it out of the pool, then the first again:
  // (first answer, returning answer's body).
  std::pair<json, json> Return() {
    auto first = Post("/v1/completions", Body(LongPrompt(0)));
    EXPECT_TRUE(first && first->status == 200);
    for (int s = 1; s <= 8; ++s) {
      auto other = Post("/v1/completions", Body(LongPrompt(s)));
      EXPECT_TRUE(other && other->status == 200) << (other ? other->body : "");
    }
    auto back = Post("/v1/completions", Body(LongPrompt(0)));
    EXPECT_TRUE(back && back->status == 200);
    return {first ? first->Json() : json(), back ? back->Json() : json()};
  }
  bool with_tier_ = true;
};

TEST_F(PrefixTierTest, AReturningPromptIsRestoredAndAnswersTheSame) {
  const auto [first, back] = Return();
  ASSERT_TRUE(first.is_object() && back.is_object());
  EXPECT_EQ(first["choices"][0]["text"], back["choices"][0]["text"]) << "greedy: the same answer";
  const json& tokens = back["timings"]["tokens"];
  EXPECT_GT(tokens["restored"].get<int64_t>(), 64) << back["timings"].dump();
  EXPECT_EQ(tokens["restored"], tokens["cached"]) << "the pool had lost it all";
  EXPECT_EQ(first["timings"]["tokens"]["restored"], 0);
  const std::string m = Metrics();
  EXPECT_GT(MetricValue(m, "lifeline_prefix_cache_tokens_total", "kind=\"restored\"").value_or(0), 0);
  EXPECT_GT(MetricValue(m, "lifeline_prefix_tier_blocks_total", "event=\"stored\"").value_or(0), 0);
  EXPECT_GT(MetricValue(m, "lifeline_prefix_tier_bytes", "kind=\"held\"").value_or(0), 0);
}

class NoTierTest : public PrefixTierTest {
 protected:
  NoTierTest() { with_tier_ = false; }
};

TEST_F(NoTierTest, WithoutTheTierTheReturningPromptIsComputedAgain) {
  const auto [first, back] = Return();
  ASSERT_TRUE(back.is_object());
  EXPECT_EQ(first["choices"][0]["text"], back["choices"][0]["text"]);
  EXPECT_EQ(back["timings"]["tokens"]["restored"], 0);
  EXPECT_EQ(back["timings"]["tokens"]["cached"], 0) << "evicted from the pool, nowhere else";
}

}  // namespace
}  // namespace lifeline::integration
