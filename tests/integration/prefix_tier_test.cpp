// The prefix cache's RAM tier below the KV pool, on a real server (stories260K, a 1 MiB pool:
// about 100 blocks of 16 positions): a first prompt is pushed out of the pool by other
// prompts; when it returns its prefix is restored from the tier (timings.tokens.restored,
// cached tokens, /metrics) and the greedy answer is exactly the one computed from scratch.
// Without the tier (the default) the returning prompt is computed again.
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
    if (q8_copies_) args.push_back("--prefix-cache-ram-q8");
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
  bool q8_copies_ = false;
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

// Q8 copies in the tier: the returning prompt is restored all the same, from copies half the
// size (the tier holds fewer bytes for the same blocks), and answered. The restored K/V is
// close to, not equal to, the computed one, so the answer is not compared with the first.
class Q8TierTest : public PrefixTierTest {
 protected:
  Q8TierTest() { q8_copies_ = true; }
};

TEST_F(Q8TierTest, AReturningPromptIsRestoredFromQ8Copies) {
  const auto [first, back] = Return();
  ASSERT_TRUE(first.is_object() && back.is_object());
  const json& tokens = back["timings"]["tokens"];
  EXPECT_GT(tokens["restored"].get<int64_t>(), 64) << back["timings"].dump();
  EXPECT_EQ(tokens["restored"], tokens["cached"]);
  EXPECT_EQ(back["usage"]["completion_tokens"], 8);
  const std::string m = Metrics();
  const double held = MetricValue(m, "lifeline_prefix_tier_bytes", "kind=\"held\"").value_or(0);
  const double kept = MetricValue(m, "lifeline_prefix_tier_blocks_total", "event=\"stored\"").value_or(0) -
                      MetricValue(m, "lifeline_prefix_tier_blocks_total", "event=\"dropped\"").value_or(0);
  ASSERT_GT(kept, 0) << m;
  // stories260K's F16 block: 5 layers x 16 positions x (32 K + 32 V) values x 2 bytes =
  // 10240; its Q8_0 copy 5120 / 32 x 34 = 5440 bytes.
  EXPECT_DOUBLE_EQ(held / kept, 5440.0) << m;
}

// The disk tier: a server stopped gracefully writes its cached prefixes to the folder; a new
// server on the same folder finds them and restores a returning prompt from disk.
std::string Metrics(uint16_t port) {
  auto r = Roundtrip(port, GetRequest("/metrics"), 10s);
  return r && r->status == 200 ? r->body : std::string();
}

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("lifeline-kvdisk-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (server_.running()) server_.Stop();
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> Args() const {
    return {"--model", "stories=" + ModelPath("stories260K.gguf"), "--threads", "1",
            "--kv-memory", "4", "-c", "512", "--prefix-cache-dir", dir_.string(),
            "--prefix-cache-disk-mib", "64"};
  }
  json Ask(const std::string& prompt) {
    auto r = PostJson(server_.port(), "/v1/completions", Body(prompt), 30s);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "");
    return r ? r->Json() : json();
  }
  std::filesystem::path dir_;
  ServerProcess server_;
};

TEST_F(DiskTierTest, ARestartedServerRestoresAPromptFromDisk) {
  ASSERT_EQ(server_.Start(Args()), "");
  const json first = Ask(LongPrompt(0));
  EXPECT_EQ(server_.Stop(), 0) << "a graceful stop writes the pool's cached blocks";
  size_t files = 0;
  for (const auto& sub : std::filesystem::directory_iterator(dir_)) {
    for (const auto& f : std::filesystem::directory_iterator(sub.path())) {
      files += f.path().extension() == ".kvb";
    }
  }
  EXPECT_GT(files, 4u);

  ASSERT_EQ(server_.Start(Args()), "");
  const json back = Ask(LongPrompt(0));
  ASSERT_TRUE(first.is_object() && back.is_object());
  EXPECT_EQ(first["choices"][0]["text"], back["choices"][0]["text"]);
  EXPECT_GT(back["timings"]["tokens"]["restored"].get<int64_t>(), 64) << back["timings"].dump();
  const std::string m = Metrics(server_.port());
  EXPECT_GT(MetricValue(m, "lifeline_prefix_tier_blocks_total",
                        "tier=\"disk\",event=\"found_at_start\"").value_or(0), 4);
  EXPECT_GT(MetricValue(m, "lifeline_prefix_tier_blocks_total",
                        "tier=\"disk\",event=\"restored\"").value_or(0), 4);
}

// Corrupted and truncated files are refused (counted, deleted), never loaded: the prompt is
// computed and answers the same.
TEST_F(DiskTierTest, CorruptAndTruncatedFilesAreSkipped) {
  ASSERT_EQ(server_.Start(Args()), "");
  const json first = Ask(LongPrompt(0));
  ASSERT_EQ(server_.Stop(), 0);
  int n = 0;
  for (const auto& sub : std::filesystem::directory_iterator(dir_)) {
    for (const auto& f : std::filesystem::directory_iterator(sub.path())) {
      const auto size = std::filesystem::file_size(f.path());
      if (n++ % 2 == 0) {
        std::filesystem::resize_file(f.path(), size / 2);  // truncated
      } else {
        std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(static_cast<std::streamoff>(size / 2));
        io.put('\x5a');  // a flipped byte in the K/V
      }
    }
  }
  ASSERT_EQ(server_.Start(Args()), "");
  const json back = Ask(LongPrompt(0));
  EXPECT_EQ(first["choices"][0]["text"], back["choices"][0]["text"]);
  const std::string m = Metrics(server_.port());
  EXPECT_GT(MetricValue(m, "lifeline_prefix_tier_blocks_total",
                        "tier=\"disk\",event=\"corrupt\"").value_or(0), 0);
}

}  // namespace
}  // namespace lifeline::integration
