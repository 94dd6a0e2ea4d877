// Regex pre-tokenizers: every supported name compiles, and hand-checked splits for the
// regexes (expected words follow from reading each regex by hand).
#include <gtest/gtest.h>

#include "engine/tokenizer/pretokenizer.h"

namespace lifeline::tokenizer_internal {
namespace {

std::vector<std::string> SplitWith(const std::string& pre, const std::string& text) {
  auto p = PreTokenizer::Create(pre);
  EXPECT_TRUE(p.ok()) << pre << ": " << p.status().ToString();
  if (!p.ok()) return {};
  std::vector<std::pair<size_t, size_t>> ranges;
  (*p)->Split(text, &ranges);
  std::vector<std::string> words;
  size_t expect_begin = 0;
  for (const auto& [b, e] : ranges) {
    EXPECT_EQ(b, expect_begin) << "words must tile the text";
    EXPECT_LT(b, e) << "no empty words";
    words.push_back(text.substr(b, e - b));
    expect_begin = e;
  }
  EXPECT_EQ(expect_begin, text.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, EverySupportedNameCompiles) {
  for (const char* name :
       {"default", "llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe", "deepseek-llm",
        "deepseek-coder", "deepseek-v3", "falcon", "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
        "minerva-7b", "gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais", "qwen2", "stablelm2", "megrez",
        "poro-chat", "bloom", "gpt3-finnish", "viking", "tekken", "gpt-4o"}) {
    auto p = PreTokenizer::Create(name);
    EXPECT_TRUE(p.ok()) << name << ": " << p.status().ToString();
  }
  auto bad = PreTokenizer::Create("no-such-pre");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bad.status().message().find("'no-such-pre'"), std::string::npos);
}

TEST(PreTokenizer, Gpt2) {
  // "  test": \s+(?!\S) keeps one space back for the word, so the first space stands alone.
  EXPECT_EQ(SplitWith("gpt-2", "Hello world's  test 123!!"),
            (Words{"Hello", " world", "'s", " ", " test", " 123", "!!"}));
  EXPECT_EQ(SplitWith("gpt-2", "a\n\nb  "), (Words{"a", "\n", "\n", "b", "  "}));
  EXPECT_TRUE(SplitWith("gpt-2", "").empty());
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(SplitWith("llama-bpe", "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(SplitWith("llama-bpe", "I'M here\n\n  now"), (Words{"I", "'M", " here", "\n\n", " ", " now"}));
  EXPECT_EQ(SplitWith("llama-bpe", "x=(y)\n"), (Words{"x", "=(", "y", ")\n"}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
  EXPECT_EQ(SplitWith("qwen2", "ab123"), (Words{"ab", "1", "2", "3"}));
}

TEST(PreTokenizer, SequencesApplyInOrder) {
  // starcoder: digits first become single pieces, then the GPT-2 regex splits the rest.
  EXPECT_EQ(SplitWith("starcoder", "x 42"), (Words{"x", " ", "4", "2"}));
  // falcon: punctuation runs first, then GPT-2, then groups of three ASCII digits (the
  // third regex cuts " 12345" into the gap " ", the match "123" and the gap "45").
  EXPECT_EQ(SplitWith("falcon", "a,b 12345"), (Words{"a", ",", "b", " ", "123", "45"}));
  // default: like falcon without the backquote, plus \p{N}+ before the digit triples.
  EXPECT_EQ(SplitWith("default", "ok!? 7"), (Words{"ok", "!?", " ", "7"}));
}

TEST(PreTokenizer, DeepSeekLlm) {
  // [\r\n] first, then letters with an optional leading space, punctuation, then `\s+$`
  // (end of a piece, not before a final newline).
  EXPECT_EQ(SplitWith("deepseek-llm", "Hi there.\nok  "), (Words{"Hi", " there", ".", "\n", "ok", "  "}));
  EXPECT_EQ(SplitWith("deepseek-llm", "ab 99"), (Words{"ab", " ", "99"}));
}

TEST(PreTokenizer, Gpt4oCaseAwareWithContractions) {
  EXPECT_EQ(SplitWith("gpt-4o", "HelloWorld don't"), (Words{"Hello", "World", " don't"}));
  EXPECT_EQ(SplitWith("gpt-4o", "12345/\n"), (Words{"123", "45", "/\n"}));
}

TEST(PreTokenizer, UnicodeCategories) {
  // \p{L} covers non-Latin letters, \p{N} non-ASCII digits; U+3000 is whitespace.
  EXPECT_EQ(SplitWith("gpt-2", "Привет мир"), (Words{"Привет", " мир"}));
  EXPECT_EQ(SplitWith("gpt-2", "a\xE3\x80\x80" "b"), (Words{"a", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(SplitWith("qwen2", "\xD9\xA3\xD9\xA4"), (Words{"\xD9\xA3", "\xD9\xA4"}));  // Arabic-Indic 3 4
}

}  // namespace
}  // namespace lifeline::tokenizer_internal
