// Encode speed on 100 KB inputs and concurrent use of one Tokenizer from several threads.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

// ~100 KB of varied text: pseudo-random words (so a per-word cache cannot hide the merge
// cost), punctuation, digits, newlines and some non-ASCII.
std::string MakeText(size_t bytes) {
  static const char* const kExtra[] = {"ünïcode", "данные", "数据", "😀", "3.14159", "\n\n", "  ", "—", "it's"};
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  while (text.size() < bytes) {
    const uint32_t r = next();
    if (r % 7 == 0) {
      text += kExtra[r % (sizeof(kExtra) / sizeof(kExtra[0]))];
    } else {
      const int len = 1 + static_cast<int>(r % 9);
      for (int i = 0; i < len; ++i) text += static_cast<char>('a' + next() % 26);
    }
    text += (r % 11 == 0) ? ". " : " ";
  }
  return text;
}

class TokenizerPerfTest : public ::testing::TestWithParam<std::string> {};

// A 100 KB input encodes and decodes back to itself. The encode time is recorded as a test
// property for the log (a quadratic pass would show as seconds), not asserted: timing
// belongs to benchmarks on this shared machine, not to tests.
TEST_P(TokenizerPerfTest, Encodes100KbFaithfully) {
  auto tok = testing::LoadSharedTokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const std::string text = MakeText(100 * 1024);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(text, true, true);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("encode_ms", std::to_string(ms));
  EXPECT_GT(ids.size(), 10000u);
  // And the result is still a faithful encoding.
  EXPECT_EQ(tok->Decode(ids), (tok->add_space_prefix() ? " " : "") + text);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerPerfTest,
                         ::testing::Values("models/llama-2-tiny-random.gguf",
                                           "reference/tokenizer/ggml-vocab-gpt-2.gguf",
                                           "reference/tokenizer/ggml-vocab-deepseek-llm.gguf"));

TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
  for (const char* rel : {"models/llama-2-tiny-random.gguf", "reference/tokenizer/ggml-vocab-falcon.gguf"}) {
    auto tok = testing::LoadSharedTokenizer(rel);
    ASSERT_NE(tok, nullptr);
    std::vector<std::string> texts;
    for (int i = 0; i < 8; ++i) texts.push_back(MakeText(4000 + 500 * i));
    std::vector<std::vector<int32_t>> serial;
    for (const auto& t : texts) serial.push_back(tok->Encode(t, true, true));
    std::vector<std::vector<int32_t>> parallel(texts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < texts.size(); ++i) {
      threads.emplace_back([&, i] {
        for (int rep = 0; rep < 5; ++rep) parallel[i] = tok->Encode(texts[i], true, true);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(parallel, serial) << rel;
  }
}

}  // namespace
}  // namespace lifeline
