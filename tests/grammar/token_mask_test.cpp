// Token masks against a naive per-token check on real vocabularies: at every byte of several
// documents, the mask (trie walk + per-position masks + escape walks + shared memo) must equal
// "feed this token's bytes to the current parse state" for every token of the vocabulary.
// Also partial UTF-8 (byte-fallback tokens), end of generation, and matcher state handling.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "grammar/grammar_test_util.h"
#include "test_paths.h"

namespace lifeline::grammar {
namespace {

using testing::RealVocab;

const RealVocab& Spm32k() {
  static const RealVocab v =
      testing::LoadGgufVocab(lifeline::testing::SharedPath("models/llama-2-tiny-random.gguf"));
  return v;
}
const RealVocab& Bpe128k() {
  static const RealVocab v = testing::LoadGgufVocab(
      lifeline::testing::SharedPath("reference/tokenizer/ggml-vocab-llama-bpe.gguf"));
  return v;
}

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":4},
  "age":{"type":"integer"},
  "score":{"type":["number","null"]},
  "kind":{"enum":["cat","dog",null]},
  "nested":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},
  "required":["name","tags","age"]})";
const char* kSchemaDoc =
    "{\"name\": \"Zoë \\\"Z\\\" 日本 \xF0\x9F\x98\x80\\u00e9\", \"tags\": [\"a\", \"b c\"],\n"
    "  \"age\": -12, \"score\": 3.25e-2, \"kind\": \"dog\", \"nested\": {\"ok\": true}}";
const char* kObjectDoc =
    "{\"list\": [1, -0.5, 2e10, true, null, {\"k\": []}], \"s\": \"x\\ty\", \"e\": {}}";

// Compares the mask with IsAllowed for every token at every `stride`-th byte of `doc`, and
// with Accept on a copy of the matcher for a sample of tokens. Returns the states checked.
int CompareAlong(const std::shared_ptr<const Grammar>& g, const RealVocab& v,
                 const std::string& doc, size_t stride) {
  GrammarMatcher m(g, v.vocab);
  std::vector<uint8_t> mask;
  int states = 0;
  for (size_t i = 0; i <= doc.size(); ++i) {
    if (i % stride == 0 || i == doc.size()) {
      ++states;
      m.FillAllowed(&mask);
      int mismatches = 0;
      for (int32_t id = 0; id < v.vocab->n_vocab(); ++id) {
        const bool naive = m.IsAllowed(id);
        if (naive != (mask[id] != 0) && ++mismatches <= 5) {
          ADD_FAILURE() << "after " << i << " bytes of " << doc.substr(0, i) << "| token " << id
                        << " '" << v.pieces[id] << "': mask " << int(mask[id]) << ", naive " << naive;
        }
      }
      // The copy-and-accept route, for a sample of tokens and every allowed one among them.
      for (int32_t id = static_cast<int32_t>(i % 53); id < v.vocab->n_vocab(); id += 53) {
        GrammarMatcher copy(m);
        EXPECT_EQ(copy.Accept(id).ok(), mask[id] != 0) << "token " << id << " at byte " << i;
      }
      EXPECT_EQ(mismatches, 0) << "at byte " << i;
      if (mismatches) return states;
    }
    if (i < doc.size()) {
      Status s = m.AcceptBytes(doc.substr(i, 1));
      EXPECT_TRUE(s.ok()) << s.ToString() << " at byte " << i;
      if (!s.ok()) return states;
    }
  }
  EXPECT_TRUE(m.CanEnd());
  return states;
}

TEST(TokenMask, EqualsNaiveCheckOnSpm32kAlongJsonSchemaDocument) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  ASSERT_EQ(v.vocab->n_vocab(), 32000);
  auto g = testing::SchemaGrammar(kSchema);
  ASSERT_TRUE(testing::Matches(g, kSchemaDoc));
  EXPECT_GT(CompareAlong(g, v, kSchemaDoc, 1), 100);
}

TEST(TokenMask, EqualsNaiveCheckOnSpm32kAlongJsonObjectDocument) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto g = testing::MustParse(JsonObjectGbnf());
  EXPECT_GT(CompareAlong(g, v, kObjectDoc, 1), 60);
}

TEST(TokenMask, EqualsNaiveCheckOnSpm32kForAHandWrittenUnicodeGrammar) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto g = testing::MustParse(R"g(root ::= "名前: " [一-龥]+ "\n" item+ "!"
item ::= ("é" | "ü" | [a-z]) " "?
)g");
  EXPECT_GT(CompareAlong(g, v, "名前: 日本語\né ü abc!", 1), 20);
}

TEST(TokenMask, EqualsNaiveCheckOnBpe128k) {
  const RealVocab& v = Bpe128k();
  if (!v.vocab) GTEST_SKIP() << "ggml-vocab-llama-bpe.gguf not found";
  EXPECT_GT(v.vocab->n_vocab(), 128000);
  auto g = testing::SchemaGrammar(kSchema);
  EXPECT_GT(CompareAlong(g, v, kSchemaDoc, 5), 20);
}

std::vector<int32_t> IdsWithPiece(const RealVocab& v, const std::string& piece) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(v.pieces.size()); ++id)
    if (v.pieces[id] == piece) ids.push_back(id);
  return ids;
}

TEST(TokenMask, PartialUtf8WithByteFallbackTokens) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  // U+4E00..U+9FA5 is E4 B8 80 .. E9 BE A5 in UTF-8.
  auto g = testing::MustParse("root ::= \"x\" [一-龥]\n");
  GrammarMatcher m(g, v.vocab);
  ASSERT_TRUE(m.AcceptBytes("x").ok());
  std::vector<uint8_t> mask;
  m.FillAllowed(&mask);
  auto allowed = [&](const std::string& piece) {
    auto ids = IdsWithPiece(v, piece);
    EXPECT_FALSE(ids.empty()) << "no token for piece";
    bool all = !ids.empty();
    for (int32_t id : ids) all = all && mask[id];
    return all;
  };
  EXPECT_TRUE(allowed("\xE4"));
  EXPECT_TRUE(allowed("\xE9"));
  EXPECT_FALSE(allowed("\xE3"));
  EXPECT_FALSE(allowed("\xEA"));
  EXPECT_FALSE(allowed("a"));
  // Whole characters as tokens are allowed too (the vocab has 一 as a token).
  EXPECT_TRUE(allowed("一"));
  ASSERT_TRUE(m.Accept(IdsWithPiece(v, "\xE4")[0]).ok());
  EXPECT_FALSE(m.CanEnd());  // inside a character
  m.FillAllowed(&mask);
  for (int b = 0x80; b <= 0xBF; ++b)
    EXPECT_EQ(allowed(std::string(1, static_cast<char>(b))), b >= 0xB8) << std::hex << b;
  EXPECT_FALSE(allowed("\xE4"));
  ASSERT_TRUE(m.Accept(IdsWithPiece(v, "\xB8")[0]).ok());
  m.FillAllowed(&mask);
  EXPECT_TRUE(allowed("\x80"));
  EXPECT_TRUE(allowed("\xBF"));
  ASSERT_TRUE(m.Accept(IdsWithPiece(v, "\x80")[0]).ok());  // 一 complete
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.MustEnd());
}

TEST(TokenMask, EndOfGenerationOnlyWhenComplete) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  ASSERT_FALSE(v.eog.empty());
  const int32_t eos = v.eog[0];
  auto g = testing::MustParse("root ::= \"ab\" \"c\"?\n");
  GrammarMatcher m(g, v.vocab);
  EXPECT_FALSE(m.IsAllowed(eos));
  EXPECT_FALSE(m.Accept(eos).ok());
  ASSERT_TRUE(m.AcceptBytes("ab").ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());  // "c" may follow
  std::vector<uint8_t> mask;
  m.FillAllowed(&mask);
  EXPECT_TRUE(mask[eos]);
  for (int32_t id : IdsWithPiece(v, "c")) EXPECT_TRUE(mask[id]);
  // Control tokens (no bytes) are never allowed; a token outside the grammar is refused and
  // leaves the state as it was.
  for (int32_t id = 0; id < v.vocab->n_vocab(); ++id)
    if (v.pieces[id].empty() && !v.vocab->is_eog(id)) {
      EXPECT_FALSE(mask[id]) << id;
    }
  EXPECT_FALSE(m.Accept(IdsWithPiece(v, "x")[0]).ok());
  EXPECT_TRUE(m.CanEnd());
  ASSERT_TRUE(m.Accept(eos).ok());
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(m.MustEnd());
  EXPECT_FALSE(m.Accept(IdsWithPiece(v, "c")[0]).ok());
  m.FillAllowed(&mask);
  int allowed = 0;
  for (uint8_t a : mask) allowed += a;
  EXPECT_EQ(allowed, static_cast<int>(v.eog.size()));
}

TEST(TokenMask, ApplyMaskSetsMinusInfinityAndHandlesPaddedLogits) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto g = testing::MustParse(JsonObjectGbnf());
  GrammarMatcher m(g, v.vocab);
  std::vector<float> logits(32000 + 64, 1.0f);  // output rows padded past the vocabulary
  int32_t count = m.ApplyMask(logits.data(), static_cast<int32_t>(logits.size()));
  std::vector<uint8_t> mask;
  m.FillAllowed(&mask);
  int32_t expected = 0;
  for (int32_t id = 0; id < 32000; ++id) {
    expected += mask[id];
    EXPECT_EQ(std::isinf(logits[id]), !mask[id]) << id;
  }
  for (size_t id = 32000; id < logits.size(); ++id) EXPECT_TRUE(std::isinf(logits[id]));
  EXPECT_EQ(count, expected);
  EXPECT_GT(count, 0);
  for (int32_t id : IdsWithPiece(v, "{")) EXPECT_EQ(logits[id], 1.0f);
}

TEST(TokenMask, PositionMasksAreSharedAcrossMatchersAndGrammars) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  // A fresh vocabulary so that earlier tests' memo entries do not count.
  auto vocab = GrammarVocab::Build(v.pieces, v.eog);
  ASSERT_TRUE(vocab.ok());
  auto g1 = testing::SchemaGrammar(R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})");
  auto g2 = testing::SchemaGrammar(R"({"type":"array","items":{"type":"string"}})");
  auto run = [&](const std::shared_ptr<const Grammar>& g, const std::string& text,
                 std::vector<std::vector<uint8_t>>* masks) {
    GrammarMatcher m(g, *vocab);
    for (char c : text) {
      masks->emplace_back();
      m.FillAllowed(&masks->back());
      EXPECT_TRUE(m.AcceptBytes(std::string(1, c)).ok());
    }
    return m.stats();
  };
  std::vector<std::vector<uint8_t>> first, second, third;
  MatcherStats s1 = run(g1, R"({"a":"hello"})", &first);
  MatcherStats s2 = run(g1, R"({"a":"hello"})", &second);
  EXPECT_GT(s1.positions_built, 0);
  EXPECT_EQ(s2.positions_built, 0);
  EXPECT_EQ(s2.positions_shared, s1.positions_built + s1.positions_shared);
  EXPECT_EQ(first, second);
  // Another schema: its string rule is the same structure, so inside the string the
  // position masks come from the memo.
  MatcherStats s3 = run(g2, R"(["hello"])", &third);
  EXPECT_GT(s3.positions_shared, 0);
}

TEST(TokenMask, PrecomputeFillsTheMemoForLaterRequests) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto vocab = GrammarVocab::Build(v.pieces, v.eog);
  ASSERT_TRUE(vocab.ok());
  auto g = testing::MustParse(JsonObjectGbnf());
  GrammarMatcher pre(g, *vocab);
  EXPECT_GT(pre.Precompute(), 100);
  EXPECT_GT(pre.stats().positions_built, 100);
  GrammarMatcher m(g, *vocab);
  std::vector<uint8_t> mask;
  for (char c : std::string(kObjectDoc)) {
    m.FillAllowed(&mask);
    ASSERT_TRUE(m.AcceptBytes(std::string(1, c)).ok());
  }
  EXPECT_EQ(m.stats().positions_built, 0);
  EXPECT_GT(m.stats().positions_shared, 10);
}

// One vocabulary (and its memo) shared by matchers on several threads, as by the engine loops
// of models with the same vocabulary: masks equal those of a single-threaded run.
TEST(TokenMask, SharedVocabularyAcrossThreads) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto g = testing::SchemaGrammar(kSchema);
  auto masks_of = [&](const std::shared_ptr<const GrammarVocab>& vocab) {
    std::vector<std::vector<uint8_t>> out;
    GrammarMatcher m(g, vocab);
    for (char c : std::string(kSchemaDoc)) {
      out.emplace_back();
      m.FillAllowed(&out.back());
      if (!m.AcceptBytes(std::string(1, c)).ok()) break;
    }
    return out;
  };
  auto solo = GrammarVocab::Build(v.pieces, v.eog);
  auto shared = GrammarVocab::Build(v.pieces, v.eog);
  ASSERT_TRUE(solo.ok() && shared.ok());
  const auto expected = masks_of(*solo);
  std::vector<std::vector<std::vector<uint8_t>>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[t] = masks_of(*shared); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], expected) << "thread " << t;
}

TEST(TokenMask, CopiedMatcherIsIndependent) {
  const RealVocab& v = Spm32k();
  if (!v.vocab) GTEST_SKIP() << "llama-2-tiny-random.gguf not found";
  auto g = testing::MustParse("root ::= \"a\" (\"b\" | \"c\")\n");
  GrammarMatcher m(g, v.vocab);
  ASSERT_TRUE(m.AcceptBytes("a").ok());
  GrammarMatcher copy(m);
  ASSERT_TRUE(copy.AcceptBytes("b").ok());
  EXPECT_TRUE(copy.MustEnd());
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.AcceptBytes("c").ok());
}

}  // namespace
}  // namespace lifeline::grammar
