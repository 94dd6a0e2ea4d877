// Tokenizer::FromGguf on small GGUF files written with GgufWriter: a valid vocab loads with
// the stored flags, and every kind of bad metadata is rejected with the key in the message.
#include <gtest/gtest.h>

#include <functional>

#include "engine/gguf/gguf_writer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace lifeline {
namespace {

// A 6-token SentencePiece vocab with the usual keys; `edit` may change or add keys (a
// later Add* of the same key is not allowed, so edits use keys the base leaves out, or
// `skip` to drop a base key).
GgufWriter SmallVocab(const std::function<void(GgufWriter*)>& edit, const std::string& skip = "") {
  GgufWriter w;
  auto want = [&](const char* key) { return skip != key; };
  if (want("tokenizer.ggml.model")) w.AddString("tokenizer.ggml.model", "llama");
  if (want("tokenizer.ggml.tokens")) {
    w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"});
  }
  if (want("tokenizer.ggml.scores")) w.AddFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -0.5f});
  if (want("tokenizer.ggml.token_type")) w.AddInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1});
  if (want("tokenizer.ggml.bos_token_id")) w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  if (want("tokenizer.ggml.eos_token_id")) w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  if (edit) edit(&w);
  return w;
}

Result<std::unique_ptr<Tokenizer>> Load(const GgufWriter& w, const std::string& name) {
  return testing::TokenizerFromGgufPath(testing::WriteTempGguf(w, name));
}

void ExpectRejected(const GgufWriter& w, const std::string& name, const std::string& needle) {
  auto r = Load(w, name);
  ASSERT_FALSE(r.ok()) << name << ": loaded, expected an error naming " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << name << ": " << r.status().ToString();
}

TEST(TokenizerFromGguf, ValidSmallVocab) {
  auto r = Load(SmallVocab([](GgufWriter* w) {
                  w->AddUint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // unset marker
                  w->AddBool("tokenizer.ggml.add_bos_token", false);
                  w->AddBool("tokenizer.ggml.add_eos_token", true);
                }),
                "valid");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tokenizer& tok = **r;
  EXPECT_EQ(tok.n_vocab(), 6);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.pad_id(), -1);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_TRUE(tok.add_eos());
  // "a a" -> "▁a▁a": ▁a (-0.5) twice.
  EXPECT_EQ(tok.Encode("a a", false, false), (std::vector<int32_t>{5, 5}));
}

TEST(TokenizerFromGguf, MissingRequiredKeys) {
  ExpectRejected(SmallVocab(nullptr, "tokenizer.ggml.model"), "no_model", "tokenizer.ggml.model is missing");
  ExpectRejected(SmallVocab(nullptr, "tokenizer.ggml.tokens"), "no_tokens", "tokenizer.ggml.tokens is missing");
  GgufWriter gpt2;
  gpt2.AddString("tokenizer.ggml.model", "gpt2");
  gpt2.AddStringArray("tokenizer.ggml.tokens", {"a", "b"});
  ExpectRejected(gpt2, "no_merges", "tokenizer.ggml.merges is missing");
}

TEST(TokenizerFromGguf, WrongElementTypes) {
  GgufWriter tokens_as_ints;
  tokens_as_ints.AddString("tokenizer.ggml.model", "llama");
  tokens_as_ints.AddInt32Array("tokenizer.ggml.tokens", {1, 2, 3});
  ExpectRejected(tokens_as_ints, "tokens_ints", "tokenizer.ggml.tokens");

  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddInt32Array("tokenizer.ggml.scores", {0, 0, 0, 0, 0, 0}); },
                            "tokenizer.ggml.scores"),
                 "scores_ints", "tokenizer.ggml.scores");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddFloat32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1}); },
                            "tokenizer.ggml.token_type"),
                 "types_floats", "tokenizer.ggml.token_type");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddString("tokenizer.ggml.bos_token_id", "1"); },
                            "tokenizer.ggml.bos_token_id"),
                 "bos_string", "tokenizer.ggml.bos_token_id has type string");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddUint32("tokenizer.ggml.add_bos_token", 1); }),
                 "add_bos_uint", "tokenizer.ggml.add_bos_token");
}

TEST(TokenizerFromGguf, ShortArraysAndBadIds) {
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddFloat32Array("tokenizer.ggml.scores", {0, 0, 0}); },
                            "tokenizer.ggml.scores"),
                 "short_scores", "tokenizer.ggml.scores has 3 entries but tokenizer.ggml.tokens has 6");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 9}); },
                            "tokenizer.ggml.token_type"),
                 "bad_type", "tokenizer.ggml.token_type[5] = 9");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddUint32("tokenizer.ggml.eos_token_id", 6); },
                            "tokenizer.ggml.eos_token_id"),
                 "eos_range", "tokenizer.ggml.eos_token_id = 6 is out of range for n_vocab 6");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddInt32("tokenizer.ggml.unknown_token_id", -2); }),
                 "unk_negative", "tokenizer.ggml.unknown_token_id = -2");
  ExpectRejected(SmallVocab([](GgufWriter* w) { w->AddUint64("tokenizer.ggml.eot_token_id", 1ull << 63); }),
                 "eot_huge", "tokenizer.ggml.eot_token_id");
}

TEST(TokenizerFromGguf, BadByteTokenAndMerges) {
  GgufWriter bad_byte;
  bad_byte.AddString("tokenizer.ggml.model", "llama");
  bad_byte.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<0x0Z>"});
  bad_byte.AddInt32Array("tokenizer.ggml.token_type", {2, 6});
  ExpectRejected(bad_byte, "byte_token2", "tokenizer.ggml.tokens[1] = '<0x0Z>' has type byte");

  GgufWriter merges;
  merges.AddString("tokenizer.ggml.model", "gpt2");
  merges.AddString("tokenizer.ggml.pre", "gpt-2");
  merges.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  merges.AddStringArray("tokenizer.ggml.merges", {"a b", "a c"});
  ExpectRejected(merges, "merges", "tokenizer.ggml.merges[1] = 'a c' names 'c', which is not a token");
}

}  // namespace
}  // namespace lifeline
