// Tokenizer logic on small hand-built vocabularies (expected ids worked out by hand in the
// comments), special-token splitting, and rejection of bad vocab metadata.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

using testing::IdsToString;

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581

// SentencePiece vocab: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then normal pieces.
constexpr int32_t kByte0 = 3;
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kAB = 262, kSpAB = 263, kBA = 264;

VocabSpec SpmSpec() {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.token_types.push_back(6);
    s.scores.push_back(0);
  }
  const std::pair<std::string, float> pieces[] = {
      {kSp, -1.0f}, {"a", -2.0f}, {"b", -3.0f}, {"ab", -0.5f}, {std::string(kSp) + "ab", -0.2f}, {"ba", -0.1f}};
  for (const auto& [text, score] : pieces) {
    s.tokens.push_back(text);
    s.token_types.push_back(1);
    s.scores.push_back(score);
  }
  return s;
}

std::unique_ptr<Tokenizer> Build(VocabSpec spec) {
  auto r = Tokenizer::FromVocab(std::move(spec));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(SpmEncode, MergesHighestScoringPairFirst) {
  auto tok = Build(SpmSpec());
  ASSERT_NE(tok, nullptr);
  // "ab" -> "▁ab": pairs ▁a (not a token) and ab (-0.5): merge ab; then ▁+ab = "▁ab" (-0.2).
  EXPECT_EQ(tok->Encode("ab", false, false), (std::vector<int32_t>{kSpAB}));
  // "aba" -> ▁ a b a: ab (-0.5) vs ba (-0.1): ba wins, leaving ▁ a ba; "aba"/"▁a" are no
  // tokens, so nothing else merges.
  EXPECT_EQ(tok->Encode("aba", false, false), (std::vector<int32_t>{kSpace, kA, kBA}));
  // "b a": ▁ b ▁ a: no pair is a token.
  EXPECT_EQ(tok->Encode("b a", false, false), (std::vector<int32_t>{kSpace, kB, kSpace, kA}));
}

TEST(SpmEncode, BosAndSpacePrefix) {
  auto tok = Build(SpmSpec());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("ab", true, false), (std::vector<int32_t>{1, kSpAB}));
  EXPECT_EQ(tok->Encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->Encode("", false, false).empty());
  VocabSpec no_prefix = SpmSpec();
  no_prefix.add_space_prefix = false;
  auto tok2 = Build(std::move(no_prefix));
  ASSERT_NE(tok2, nullptr);
  EXPECT_FALSE(tok2->add_space_prefix());
  EXPECT_EQ(tok2->Encode("ab", false, false), (std::vector<int32_t>{kAB}));
  EXPECT_EQ(tok2->Decode(tok2->Encode("ab b", false, false)), "ab b");
}

TEST(SpmEncode, ByteFallbackAndUnknown) {
  auto tok = Build(SpmSpec());
  ASSERT_NE(tok, nullptr);
  // "é" (C3 A9) is no token: "▁" then its two byte tokens.
  EXPECT_EQ(tok->Encode("\xC3\xA9", false, false),
            (std::vector<int32_t>{kSpace, kByte0 + 0xC3, kByte0 + 0xA9}));
  // Without byte tokens the bytes become <unk>.
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>", kSp, "a"};
  s.token_types = {2, 3, 3, 1, 1};
  auto bare = Build(std::move(s));
  ASSERT_NE(bare, nullptr);
  EXPECT_EQ(bare->Encode("a\xC3\xA9", false, false), (std::vector<int32_t>{3, 4, 0, 0}));
}

// Byte-level BPE vocab: id b (0..255) is the GPT-2 alphabet character of byte b, so the
// ids of plain ASCII letters are their byte values; merged tokens follow.
VocabSpec BpeSpec(const std::string& pre) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = pre;
  // Independent spelling of the GPT-2 alphabet: printable Latin-1 maps to itself, the
  // other bytes to U+0100.. in byte order.
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = direct ? static_cast<uint32_t>(b) : next++;
    std::string t;
    if (cp < 0x80) {
      t.push_back(static_cast<char>(cp));
    } else {
      t.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      t.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    s.tokens.push_back(t);
  }
  for (const char* t : {"he", "ll", "hell", "hello", "\xC4\xA0h", "<|endoftext|>", "<|user|>"}) s.tokens.push_back(t);
  s.token_types.assign(s.tokens.size(), 1);
  s.token_types[261] = 3;  // <|endoftext|> control
  s.token_types[262] = 4;  // <|user|> user-defined
  s.merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 h", "x y"};
  return s;
}
constexpr int32_t kHe = 256, kLl = 257, kHell = 258, kHello = 259, kEot = 261, kUser = 262;

TEST(BpeEncode, MergesByRank) {
  auto tok = Build(BpeSpec("gpt-2"));
  ASSERT_NE(tok, nullptr);
  // "hello" -> h e l l o -> (rank 0) he l l o -> (1) he ll o -> (2) hell o -> (3) hello.
  EXPECT_EQ(tok->Encode("hello", false, false), (std::vector<int32_t>{kHello}));
  // " hello" is one word; rank 0 (he) beats rank 4 (Ġh), after which Ġ stays alone.
  EXPECT_EQ(tok->Encode("hello hello", false, false), (std::vector<int32_t>{kHello, ' ', kHello}));
  // "hel": he l; "lll": ll l (leftmost pair first on equal rank).
  EXPECT_EQ(tok->Encode("hel", false, false), (std::vector<int32_t>{kHe, 'l'}));
  EXPECT_EQ(tok->Encode("lll", false, false), (std::vector<int32_t>{kLl, 'l'}));
  // A merge whose result is not a token: the pieces are looked up byte by byte.
  EXPECT_EQ(tok->Encode("xy", false, false), (std::vector<int32_t>{'x', 'y'}));
  EXPECT_EQ(tok->Decode(tok->Encode("hello hell\n", false, false)), "hello hell\n");
  (void)kHell;
}

TEST(BpeEncode, IgnoreMergesForLlama3) {
  VocabSpec s = BpeSpec("llama-bpe");
  s.merges = {"h e"};  // "hello" is unreachable by merges but is a token
  auto tok = Build(std::move(s));
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->add_bos());     // llama.cpp's default for this pre-tokenizer
  EXPECT_EQ(tok->bos_id(), -1);    // but this vocab has no BOS, so none is added
  EXPECT_EQ(tok->Encode("hello", true, false), (std::vector<int32_t>{kHello}));
  EXPECT_EQ(tok->Encode("hello", false, false), (std::vector<int32_t>{kHello}));
  auto gpt2 = Build([] {
    VocabSpec t = BpeSpec("gpt-2");
    t.merges = {"h e"};
    return t;
  }());
  ASSERT_NE(gpt2, nullptr);
  EXPECT_EQ(gpt2->Encode("hello", false, false), (std::vector<int32_t>{kHe, 'l', 'l', 'o'}));
}

TEST(BpeEncode, InvalidUtf8BecomesReplacementCharacter) {
  auto tok = Build(BpeSpec("gpt-2"));
  ASSERT_NE(tok, nullptr);
  // 0xFF is no UTF-8; like llama.cpp it is encoded as U+FFFD (EF BF BD).
  EXPECT_EQ(tok->Decode(tok->Encode("a\xFF", false, false)), "a\xEF\xBF\xBD");
}

TEST(SpecialTokens, ControlOnlyWithParseSpecialUserDefinedAlways) {
  auto tok = Build(BpeSpec("gpt-2"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("hello<|endoftext|>", false, true), (std::vector<int32_t>{kHello, kEot}));
  const std::vector<int32_t> plain = tok->Encode("hello<|endoftext|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kEot), 0) << IdsToString(plain);
  EXPECT_EQ(tok->Decode(plain), "hello<|endoftext|>");
  // User-defined tokens are split out even without parse_special (HF and llama.cpp do).
  EXPECT_EQ(tok->Encode("<|user|>hello", false, false), (std::vector<int32_t>{kUser, kHello}));
  EXPECT_EQ(tok->Decode({kUser, kHello}), "<|user|>hello");
  EXPECT_EQ(tok->Decode({kEot}), "");
  EXPECT_EQ(tok->Decode({kEot}, true), "<|endoftext|>");
  EXPECT_TRUE(tok->IsEndOfGeneration(kEot));  // found by its text
  EXPECT_TRUE(tok->IsControl(kEot));
}

TEST(SpecialTokens, LongestTextWins) {
  VocabSpec s = SpmSpec();
  for (const char* t : {"[A]", "[A][B]", "[B]"}) {
    s.tokens.push_back(t);
    s.token_types.push_back(3);
    s.scores.push_back(0);
  }
  auto tok = Build(std::move(s));
  ASSERT_NE(tok, nullptr);
  const int32_t a = 265, ab = 266, b = 267;
  EXPECT_EQ(tok->Encode("[A][B][A]", false, true), (std::vector<int32_t>{ab, a}));
  EXPECT_EQ(tok->Encode("[B][A][B]", false, true), (std::vector<int32_t>{b, ab}));
}

TEST(Decode, OutOfRangeIdsAreSkipped) {
  auto tok = Build(SpmSpec());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode({-5, kSpAB, 1 << 30}), " ab");
  EXPECT_EQ(tok->TokenToPiece(-1), "");
  EXPECT_EQ(tok->TokenText(100000), "");
  EXPECT_FALSE(tok->IsEndOfGeneration(-1));
}

// ---- validation of VocabSpec contents ----

void ExpectError(VocabSpec spec, StatusCode code, const std::string& needle) {
  auto r = Tokenizer::FromVocab(std::move(spec));
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
}

TEST(VocabValidation, ArrayLengthsMustMatch) {
  VocabSpec s = SpmSpec();
  s.scores.pop_back();
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.scores has 264 entries");
  s = SpmSpec();
  s.token_types.push_back(1);
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.token_type has 266 entries");
}

TEST(VocabValidation, TokenContents) {
  VocabSpec s = SpmSpec();
  s.token_types[kA] = 7;
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.token_type[260] = 7");
  s = SpmSpec();
  s.scores[kA] = std::numeric_limits<float>::quiet_NaN();
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.scores[260] is NaN");
  s = SpmSpec();
  s.tokens[kB] = "a";
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.tokens[261] = 'a' duplicates tokenizer.ggml.tokens[260]");
  s = SpmSpec();
  s.tokens.clear();
  s.scores.clear();
  s.token_types.clear();
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.tokens is empty");
  s = SpmSpec();
  s.model = "bert";
  ExpectError(s, StatusCode::kUnimplemented, "tokenizer.ggml.model = 'bert'");
}

TEST(VocabValidation, ByteTokensParsedStrictly) {
  for (const char* bad : {"<0xG1>", "<0x1>", "<0x411>", "<0X41>", "(0x41)", "<0x41 "}) {
    VocabSpec s = SpmSpec();
    s.tokens[kByte0 + 0x41] = bad;
    ExpectError(s, StatusCode::kDataLoss, "has type byte but is not of the form <0xXX>");
  }
  VocabSpec s = SpmSpec();
  s.tokens[kByte0 + 0x41] = "<0x4a>";  // a second token for byte 0x4A (text differs in case)
  ExpectError(s, StatusCode::kDataLoss, "repeats the byte");
}

TEST(VocabValidation, Merges) {
  VocabSpec s = BpeSpec("gpt-2");
  s.merges.push_back("hello");
  ExpectError(s, StatusCode::kDataLoss, "tokenizer.ggml.merges[6] = 'hello' has no ' '");
  s = BpeSpec("gpt-2");
  s.merges.push_back("he zzz");
  ExpectError(s, StatusCode::kDataLoss, "names 'zzz', which is not a token");
  s = BpeSpec("no-such-pre");
  ExpectError(s, StatusCode::kUnimplemented, "tokenizer.ggml.pre = 'no-such-pre'");
}

TEST(VocabValidation, SpecialIds) {
  VocabSpec s = SpmSpec();
  s.bos_id = 265;  // n_vocab is 265
  ExpectError(s, StatusCode::kOutOfRange, "tokenizer.ggml.bos_token_id = 265 is out of range for n_vocab 265");
  s = SpmSpec();
  s.eot_id = -7;
  ExpectError(s, StatusCode::kOutOfRange, "tokenizer.ggml.eot_token_id = -7");
  s = SpmSpec();
  s.unk_id = 1ll << 40;
  ExpectError(s, StatusCode::kOutOfRange, "tokenizer.ggml.unknown_token_id");
  // -1 and 0xFFFFFFFF mean "no such token".
  s = SpmSpec();
  s.bos_id = 0xFFFFFFFFll;
  s.eos_id = -1;
  auto tok = Build(std::move(s));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_EQ(tok->Encode("ab", true, false), (std::vector<int32_t>{kSpAB}));
}

TEST(VocabValidation, Limits) {
  TokenizerLimits lim;
  lim.max_vocab = 100;
  auto r = Tokenizer::FromVocab(SpmSpec(), lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("above the limit of 100"), std::string::npos);
  lim = TokenizerLimits();
  lim.max_token_bytes = 4;
  r = Tokenizer::FromVocab(SpmSpec(), lim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.tokens[0] is 5 bytes"), std::string::npos)
      << r.status().ToString();
  lim = TokenizerLimits();
  lim.max_merges = 2;
  r = Tokenizer::FromVocab(BpeSpec("gpt-2"), lim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.merges has 6 entries"), std::string::npos);
}

}  // namespace
}  // namespace lifeline
