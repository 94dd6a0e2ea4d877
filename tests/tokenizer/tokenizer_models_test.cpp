// Tokenizers of the shared model files: stories260K (512-token SentencePiece vocab with byte
// fallback) and llama-2-tiny-random (the real 32K Llama 2 vocab). Expected prompts come from
// the models README and the llama.cpp logits recordings in ../shared/reference/logits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

using testing::IdsToString;
using testing::Printable;

constexpr const char* kStories = "models/stories260K.gguf";
constexpr const char* kLlama2 = "models/llama-2-tiny-random.gguf";

// In stories260K the 256 byte tokens <0x00>..<0xFF> follow <unk>, <s>, </s> (models README).
int32_t StoriesByteId(uint8_t b) { return 3 + b; }

TEST(StoriesTokenizer, SpecialIdsAndFlags) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_EQ(tok->pad_id(), -1);  // stored as 4294967295, the "unset" marker
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->IsEndOfGeneration(2));
  EXPECT_FALSE(tok->IsEndOfGeneration(1));
  EXPECT_FALSE(tok->IsEndOfGeneration(403));
  EXPECT_TRUE(tok->IsControl(1));
  EXPECT_FALSE(tok->IsControl(403));
  EXPECT_FALSE(tok->IsControl(-1));
  EXPECT_FALSE(tok->IsControl(512));
}

TEST(StoriesTokenizer, OnceUponATime) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("Once upon a time", true, true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->Encode("Once upon a time", false, true), (std::vector<int32_t>{403, 407, 261, 378}));
}

// Every prompt llama.cpp recorded for a model with this vocab must tokenize identically.
void ExpectReferencePrompts(const Tokenizer& tok, const std::string& model) {
  for (const char* p : {"p1", "p2"}) {
    const std::string path = lifeline::testing::SharedPath("reference/logits/" + model + "." + p + ".json");
    const auto j = nlohmann::json::parse(testing::ReadFileOrDie(path), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << path;
    const std::string prompt = j.at("prompt").get<std::string>();
    const auto want = j.at("prompt_tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.Encode(prompt, tok.add_bos(), true), want) << model << " " << p << ": " << prompt;
  }
}

TEST(StoriesTokenizer, ReferencePromptsFromLogitsFiles) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  ExpectReferencePrompts(*tok, "stories260K");
}

TEST(Llama2Tokenizer, ReferencePromptsFromLogitsFiles) {
  auto tok = testing::LoadSharedTokenizer(kLlama2);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 32000);
  ExpectReferencePrompts(*tok, "llama-2-tiny-random");
}

TEST(StoriesTokenizer, ByteTokensAreTheDocumentedIds) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof(text), "<0x%02X>", b);
    EXPECT_EQ(tok->TokenText(StoriesByteId(b)), text);
    EXPECT_EQ(tok->token_attr(StoriesByteId(b)), TokenAttr::kByte);
    EXPECT_EQ(tok->TokenToPiece(StoriesByteId(b)), std::string(1, static_cast<char>(b)));
  }
}

TEST(StoriesTokenizer, CharactersOutsideTheVocabFallBackToBytes) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  // U+00FC "ü" (C3 BC) is not one of this vocab's 512 pieces (only a handful of non-ASCII
  // characters are, e.g. é and €); the space prefix "▁" is a piece of its own.
  const std::vector<int32_t> ids = tok->Encode("\xC3\xBC", false, false);
  ASSERT_EQ(ids.size(), 3u) << IdsToString(ids);
  EXPECT_EQ(tok->TokenText(ids[0]), "\xE2\x96\x81");
  EXPECT_EQ(ids[1], StoriesByteId(0xC3));
  EXPECT_EQ(ids[2], StoriesByteId(0xBC));
  // Two such characters in a row: each byte on its own, no merges across them ("▁a" = 261).
  EXPECT_EQ(tok->Encode("a\xC3\xBC\xC3\xBC", false, false),
            (std::vector<int32_t>{261, StoriesByteId(0xC3), StoriesByteId(0xBC), StoriesByteId(0xC3),
                                  StoriesByteId(0xBC)}));
  // A newline is never merged into a normal token here: it is its byte token.
  const std::vector<int32_t> nl = tok->Encode("a\nb", false, false);
  EXPECT_NE(std::find(nl.begin(), nl.end(), StoriesByteId('\n')), nl.end()) << IdsToString(nl);
}

TEST(StoriesTokenizer, InvalidUtf8SurvivesAsBytes) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  const std::string bad = "ok \xFF\xC3 end \xE2\x82";  // stray byte, truncated sequences
  EXPECT_EQ(tok->Decode(tok->Encode(bad, false, false)), " " + bad);
}

const char* const kVariedUtf8[] = {
    "Once upon a time, there was a little girl named Lily.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n",
    "Ünïcödé wörds: Äpfel, straße, naïve café",
    "Русский текст и ελληνικά",
    "中文测试，日本語のテキスト、한국어",
    "emoji: 😀🚀👩‍👩‍👧 and flags 🇺🇸",
    "combining: e\xCC\x81 a\xCC\x8A",
    "math ∑∫√∞ ≤ ≥ ≠ and symbols €£¥",
    "<s> and </s> as text",
    "",
    " ",
};

void ExpectRoundTrip(const Tokenizer& tok, bool space_prefix) {
  for (const char* text : kVariedUtf8) {
    const std::string in = text;
    const std::string want = (space_prefix && !in.empty()) ? " " + in : in;
    EXPECT_EQ(tok.Decode(tok.Encode(in, false, false)), want) << Printable(in);
    // With BOS the BOS renders as nothing, so the result is the same.
    EXPECT_EQ(tok.Decode(tok.Encode(in, true, false)), want) << Printable(in);
  }
}

TEST(StoriesTokenizer, DecodeInvertsEncodeForVariedUtf8) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  ExpectRoundTrip(*tok, /*space_prefix=*/true);
}

TEST(Llama2Tokenizer, DecodeInvertsEncodeForVariedUtf8) {
  auto tok = testing::LoadSharedTokenizer(kLlama2);
  ASSERT_NE(tok, nullptr);
  ExpectRoundTrip(*tok, /*space_prefix=*/true);
}

TEST(Gpt2Tokenizer, DecodeInvertsEncodeForVariedUtf8) {
  auto tok = testing::LoadSharedTokenizer("reference/tokenizer/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  ExpectRoundTrip(*tok, /*space_prefix=*/false);
}

TEST(StoriesTokenizer, ParseSpecialTurnsControlTextIntoIds) {
  auto tok = testing::LoadSharedTokenizer(kStories);
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> parsed = tok->Encode("<s>Once</s>", false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(parsed.back(), 2);
  // The text after a special token gets the space prefix again (llama.cpp): "▁Once" = 403.
  EXPECT_EQ(parsed[1], 403);
  const std::vector<int32_t> plain = tok->Encode("<s>Once</s>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0) << IdsToString(plain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0) << IdsToString(plain);
  EXPECT_EQ(tok->Decode(plain), " <s>Once</s>");
  // Control tokens are invisible in output unless asked for.
  EXPECT_EQ(tok->Decode(parsed), " Once");
  EXPECT_EQ(tok->Decode(parsed, /*render_special=*/true), "<s> Once</s>");
}

}  // namespace
}  // namespace lifeline
