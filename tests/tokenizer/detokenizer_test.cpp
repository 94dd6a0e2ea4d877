// IncrementalDetokenizer and the UTF-8 helpers behind it. Byte tokens come from the
// stories260K vocab, where <0xXX> has id 3 + 0xXX (models README).
#include <gtest/gtest.h>

#include "engine/tokenizer/utf8.h"
#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

constexpr const char* kFffd = "\xEF\xBF\xBD";

int32_t ByteId(uint8_t b) { return 3 + b; }

class DetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = testing::LoadSharedTokenizer("models/stories260K.gguf");
    ASSERT_NE(tok_, nullptr);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(DetokenizerTest, MultiByteCharacterSplitAcrossByteTokensIsEmittedOnceWhole) {
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.Push(ByteId(0xE2)), "");
  EXPECT_EQ(d.Push(ByteId(0x82)), "");
  EXPECT_EQ(d.Push(ByteId(0xAC)), "\xE2\x82\xAC");  // U+20AC
  EXPECT_EQ(d.Flush(), "");
  // A 4-byte character (U+1F600) fed one byte at a time, after normal text.
  IncrementalDetokenizer e(*tok_);
  std::string all;
  all += e.Push(403);  // "▁Once"
  EXPECT_EQ(all, " Once");
  for (uint8_t b : {0xF0, 0x9F, 0x98}) EXPECT_EQ(e.Push(ByteId(b)), "");
  EXPECT_EQ(e.Push(ByteId(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(e.Flush(), "");
}

TEST_F(DetokenizerTest, StreamEqualsDecodeForEncodedText) {
  const std::string text = "Lily saw 3 € and 😀 — ok\nend";
  const std::vector<int32_t> ids = tok_->Encode(text, true, false);
  IncrementalDetokenizer d(*tok_);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = d.Push(id);
    // Every emitted chunk is valid UTF-8 on its own.
    EXPECT_EQ(utf8::SanitizeUtf8(piece), piece);
    streamed += piece;
  }
  streamed += d.Flush();
  EXPECT_EQ(streamed, tok_->Decode(ids));
  EXPECT_EQ(streamed, " " + text);
}

TEST_F(DetokenizerTest, InvalidBytesBecomeReplacementOnceTheyCannotComplete) {
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.Push(ByteId(0xFF)), kFffd);  // can never start a character
  EXPECT_EQ(d.Push(ByteId(0xE2)), "");
  // A normal token after an unfinished prefix: the prefix can no longer complete.
  EXPECT_EQ(d.Push(403), std::string(kFffd) + " Once");
  EXPECT_EQ(d.Push(ByteId(0xC3)), "");
  EXPECT_EQ(d.Push(ByteId(0xC3)), kFffd);  // a lead byte where a continuation was needed
  EXPECT_EQ(d.Push(ByteId(0xA9)), "\xC3\xA9");
  EXPECT_EQ(d.Push(ByteId(0xF0)), "");
  EXPECT_EQ(d.Push(ByteId(0x9F)), "");
  EXPECT_EQ(d.Flush(), kFffd);  // a truncated character at the end is one U+FFFD
  EXPECT_EQ(d.Flush(), "");
}

TEST_F(DetokenizerTest, ControlTokensContributeNothing) {
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.Push(1), "");
  EXPECT_EQ(d.Push(2), "");
  EXPECT_EQ(d.Push(-3), "");
  EXPECT_EQ(d.Flush(), "");
}

TEST(Utf8, SanitizeReplacesEachInvalidByte) {
  EXPECT_EQ(utf8::SanitizeUtf8("abc"), "abc");
  EXPECT_EQ(utf8::SanitizeUtf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8::SanitizeUtf8("\xC0\xAF"), std::string(kFffd) + kFffd);              // overlong '/'
  EXPECT_EQ(utf8::SanitizeUtf8("\xED\xA0\x80"), std::string(kFffd) + kFffd + kFffd);  // surrogate
  EXPECT_EQ(utf8::SanitizeUtf8("\xF4\x90\x80\x80").size(), 12u);                       // > U+10FFFF
  EXPECT_EQ(utf8::SanitizeUtf8("a\xE2\x82"), std::string("a") + kFffd + kFffd);       // truncated
}

TEST(Utf8, CompletePrefixLengthHoldsBackOnlyCompletablePrefixes) {
  EXPECT_EQ(utf8::CompletePrefixLength("abc"), 3u);
  EXPECT_EQ(utf8::CompletePrefixLength("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8::CompletePrefixLength("ab\xE2"), 2u);
  EXPECT_EQ(utf8::CompletePrefixLength("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8::CompletePrefixLength("\xE2\x82\xAC"), 3u);
  EXPECT_EQ(utf8::CompletePrefixLength("a\xFF"), 2u);      // never completes
  EXPECT_EQ(utf8::CompletePrefixLength("a\xE0\x80"), 3u);  // E0 80 is an overlong start
}

TEST(Utf8, Gpt2ByteAlphabet) {
  const auto& m = utf8::ByteToCodepoint();
  EXPECT_EQ(m['A'], static_cast<uint32_t>('A'));
  EXPECT_EQ(m[' '], 0x120u);   // "Ġ": bytes 0x00..0x20 are the first 33 remapped
  EXPECT_EQ(m['\n'], 0x10Au);  // "Ċ"
  EXPECT_EQ(m[0x7F], 0x121u);  // next remapped range starts at 0x7F
  EXPECT_EQ(m[0xAD], 0x143u);  // the last of the 68 remapped bytes
  for (int b = 0; b < 256; ++b) EXPECT_EQ(utf8::CodepointToByte(m[b]), b);
  EXPECT_EQ(utf8::CodepointToByte(0x144), -1);
}

}  // namespace
}  // namespace lifeline
