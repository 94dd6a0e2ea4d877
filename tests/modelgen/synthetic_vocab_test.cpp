#include "modelgen/synthetic_vocab.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace lifeline::modelgen {
namespace {

const std::string kSpace = "\xe2\x96\x81";  // U+2581

TEST(SyntheticVocab, LlamaLayoutOfFixedTokens) {
  auto v = BuildSyntheticSpmVocab(1000);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->tokens.size(), 1000u);
  ASSERT_EQ(v->scores.size(), 1000u);
  ASSERT_EQ(v->types.size(), 1000u);
  EXPECT_EQ(v->tokens[0], "<unk>");
  EXPECT_EQ(v->tokens[1], "<s>");
  EXPECT_EQ(v->tokens[2], "</s>");
  EXPECT_EQ(v->types[0], 2);  // unknown
  EXPECT_EQ(v->types[1], 3);  // control
  EXPECT_EQ(v->types[2], 3);
  EXPECT_EQ(v->unk_id, 0);
  EXPECT_EQ(v->bos_id, 1);
  EXPECT_EQ(v->eos_id, 2);
  EXPECT_EQ(v->tokens[3], "<0x00>");
  EXPECT_EQ(v->tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(v->tokens[3 + 0xFF], "<0xFF>");
  for (int b = 0; b < 256; ++b) EXPECT_EQ(v->types[3 + b], 6) << b;
  // Generated pieces start right after the bytes.
  EXPECT_EQ(v->tokens[259], kSpace);
  EXPECT_EQ(v->tokens[260], "a");
  EXPECT_EQ(v->tokens[261], kSpace + "a");
  EXPECT_EQ(v->tokens[262], "b");
  // After 1 + 2*26 single letters come the two-letter strings.
  EXPECT_EQ(v->tokens[259 + 1 + 52], "aa");
  EXPECT_EQ(v->tokens[259 + 1 + 53], kSpace + "aa");
}

TEST(SyntheticVocab, PiecesAreUniqueNormalDecreasingAndMergeable) {
  auto v = BuildSyntheticSpmVocab(32000);
  ASSERT_TRUE(v.ok());
  std::set<std::string> seen;
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    EXPECT_TRUE(seen.insert(v->tokens[i]).second) << "duplicate " << v->tokens[i];
    if (i < 259) continue;
    EXPECT_EQ(v->types[i], 1) << i;
    if (i > 259) {
      EXPECT_LT(v->scores[i], v->scores[i - 1]) << i;
    }
    // Every multi-character piece splits into two pieces that come before it (an SPM
    // tokenizer builds a piece by merging two existing ones).
    const std::string& t = v->tokens[i];
    if (t == kSpace || t.size() == 1) continue;
    const std::string head = t.substr(0, t.size() - 1), tail = t.substr(t.size() - 1);
    EXPECT_TRUE(seen.count(head) && seen.count(tail)) << t;
  }
}

TEST(SyntheticVocab, DeterministicAndSizeExact) {
  auto a = BuildSyntheticSpmVocab(5000);
  auto b = BuildSyntheticSpmVocab(5000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->scores, b->scores);
  auto smallest = BuildSyntheticSpmVocab(259);
  ASSERT_TRUE(smallest.ok());
  EXPECT_EQ(smallest->tokens.size(), 259u);
  auto odd = BuildSyntheticSpmVocab(261);  // ends between "a" and "▁a"
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->tokens.back(), "a");
}

TEST(SyntheticVocab, RejectsSizesOutsideRangeNamingTheFlag) {
  auto tiny = BuildSyntheticSpmVocab(258);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("--vocab 258"), std::string::npos);
  EXPECT_FALSE(BuildSyntheticSpmVocab(kMaxSyntheticVocab + 1).ok());
}

}  // namespace
}  // namespace lifeline::modelgen
