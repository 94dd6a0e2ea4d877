// A thinking model's output path (ChoiceOutput with a reasoning setup), driven by scripted
// logits over the real stories260K vocabulary: the test decides which token each step's
// logits favour, so every case is exact.
//   - at the thinking budget the close is forced token by token and the answer follows;
//   - budget 0 with the block already open closes it first;
//   - thinking cut by the end of generation stays reasoning;
//   - a grammar constrains the answer, never the thinking, and with no thinking allowed the
//     block cannot open;
//   - a budget lowered mid-thinking ends it at the next token.
// The split is checked against an independent detokenization of all the tokens.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "text/grammar/grammar.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/choice_output.h"
#include "serving/request_prep.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

const Tokenizer& Tok() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto file = GgufFile::Open(testing::SharedPath("models/stories260K.gguf"), GgufOpenOptions{});
    EXPECT_TRUE(file.ok());
    auto t = Tokenizer::FromGguf(**file);
    EXPECT_TRUE(t.ok());
    return std::move(t).value();
  }();
  return *tok;
}

PreparedRequest Prep(bool starts_in_reasoning, int64_t budget_tokens,
                     const char* gbnf = nullptr) {
  PreparedRequest p;
  p.sampler.temperature = 0;
  p.max_tokens = 200;
  p.reasoning = BuildReasoningSetup(Tok(), toolcall::ReasoningFormat::kThinkTags);
  p.starts_in_reasoning = starts_in_reasoning;
  p.reasoning_budget_tokens = budget_tokens;
  p.render_ids = p.reasoning->marker_ids;
  if (gbnf != nullptr) {
    auto g = grammar::ParseGbnf(gbnf);
    EXPECT_TRUE(g.ok()) << g.status().message();
    p.grammar = std::move(g).value();
    Status s;
    p.grammar_vocab = BuildGrammarVocab(Tok(), toolcall::ToolCallFormat::kNone, &s);
  }
  return p;
}

struct Driven {
  std::vector<int32_t> tokens;
  std::string reasoning, content;
  TokenStep::Outcome last = TokenStep::Outcome::kContinue;
};

// Up to `steps` tokens, each step's logits favouring want(step) by a wide margin.
Driven Drive(ChoiceOutput& out, const std::function<int32_t(size_t)>& want, size_t steps) {
  Driven r;
  const int32_t n = Tok().n_vocab();
  for (size_t i = 0; i < steps; ++i) {
    std::vector<float> row(static_cast<size_t>(n), 0.0f);
    row[static_cast<size_t>(want(i))] = 20.0f;
    TokenStep s = out.Next(row.data(), n);
    if (s.token >= 0) r.tokens.push_back(s.token);
    r.reasoning += s.reasoning;
    r.content += s.text;
    r.last = s.outcome;
    if (s.outcome != TokenStep::Outcome::kContinue) break;
  }
  TokenStep tail = out.Flush();
  r.reasoning += tail.reasoning;
  r.content += tail.text;
  return r;
}

// The tokens' text as the detokenizer alone writes it (no splitting).
std::string Whole(const std::vector<int32_t>& tokens, const PreparedRequest& p) {
  IncrementalDetokenizer d(Tok(), p.render_ids);
  std::string s;
  for (int32_t id : tokens) s += d.Push(id);
  return s + d.Flush();
}

std::string TrimLeft(std::string s) {
  s.erase(0, s.find_first_not_of(" \n\r\t") == std::string::npos ? s.size()
                                                                 : s.find_first_not_of(" \n\r\t"));
  return s;
}

// Both ends, as the reasoning is trimmed (llama.cpp strips it).
std::string Trim(std::string s) {
  s = TrimLeft(std::move(s));
  s.erase(s.find_last_not_of(" \n\r\t") + 1);
  return s;
}

int32_t Piece(const char* text) {
  const std::vector<int32_t> ids = Tok().Encode(text, false, false);
  EXPECT_FALSE(ids.empty());
  return ids.back();
}

// The text of token `id` (a piece of a word: "at" of "cat").
std::string Text(int32_t id) { return Tok().TokenToPiece(id, false); }

TEST(ThinkingOutput, TheBudgetForcesTheCloseAndTheAnswerFollows) {
  const PreparedRequest p = Prep(/*starts_in_reasoning=*/true, /*budget_tokens=*/6);
  const std::vector<int32_t> prompt = {Tok().bos_id()};
  ChoiceOutput out(Tok(), p, prompt, 0);
  const int32_t cat = Piece("cat");
  Driven r = Drive(out, [&](size_t) { return cat; }, 20);
  const std::vector<int32_t>& close = p.reasoning->close_ids;
  ASSERT_GE(r.tokens.size(), 6 + close.size());
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(r.tokens[i], cat) << i;
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin() + 6, r.tokens.begin() + 6 + close.size()), close)
      << "the close follows the sixth thinking token";
  for (size_t i = 6 + close.size(); i < r.tokens.size(); ++i) EXPECT_EQ(r.tokens[i], cat) << i;
  EXPECT_TRUE(out.reasoning_cut());
  EXPECT_GE(out.reasoning_tokens(), 7);
  EXPECT_LE(out.reasoning_tokens(), static_cast<int64_t>(6 + close.size()));

  const std::string whole = Whole(r.tokens, p);
  const size_t at = whole.find("</think>");
  ASSERT_NE(at, std::string::npos) << whole;
  EXPECT_EQ(r.reasoning, Trim(whole.substr(0, at)));
  EXPECT_EQ(r.content, TrimLeft(whole.substr(at + 8)));
  EXPECT_FALSE(r.content.empty());
}

TEST(ThinkingOutput, BudgetZeroInsideAnOpenBlockClosesFirst) {
  const PreparedRequest p = Prep(true, 0);
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  Driven r = Drive(out, [&](size_t) { return Piece("cat"); }, 12);
  const std::vector<int32_t>& close = p.reasoning->close_ids;
  ASSERT_GE(r.tokens.size(), close.size());
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + close.size()), close);
  EXPECT_EQ(r.reasoning.find(Text(Piece("cat"))), std::string::npos) << r.reasoning;
  EXPECT_NE(r.content.find(Text(Piece("cat"))), std::string::npos) << r.content;
  EXPECT_TRUE(out.reasoning_cut());
}

TEST(ThinkingOutput, ThinkingCutByTheEndOfGenerationStaysReasoning) {
  const PreparedRequest p = Prep(true, -1);
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  Driven r = Drive(out, [&](size_t) { return Piece("cat"); }, 10);
  EXPECT_EQ(r.tokens.size(), 10u);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.reasoning, Whole(r.tokens, p));
  EXPECT_FALSE(out.reasoning_cut());
  EXPECT_EQ(out.reasoning_tokens(), 10);
}

TEST(ThinkingOutput, TheGrammarConstrainsTheAnswerNotTheThinking) {
  const PreparedRequest p = Prep(true, 4, R"(root ::= "yes" | "no")");
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  const int32_t cat = Piece("cat");
  Driven r = Drive(out, [&](size_t) { return cat; }, 40);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.tokens[i], cat) << "thinking is free";
  EXPECT_EQ(r.last, TokenStep::Outcome::kStop);
  EXPECT_TRUE(r.content == "yes" || r.content == "no") << r.content;
  EXPECT_NE(r.reasoning.find(Text(cat)), std::string::npos);
}

TEST(ThinkingOutput, WithNoThinkingAllowedTheBlockCannotOpenUnderAGrammar) {
  const PreparedRequest p = Prep(/*starts_in_reasoning=*/false, 0, R"(root ::= "yes" | "no")");
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  const std::vector<int32_t> open = Tok().Encode("<think>", false, false);
  Driven r = Drive(out, [&](size_t i) { return open[std::min(i, open.size() - 1)]; }, 40);
  EXPECT_EQ(r.reasoning, "");
  EXPECT_TRUE(r.content == "yes" || r.content == "no") << r.content;
}

TEST(ThinkingOutput, UnderAGrammarTheBlockMayOpenFirst) {
  const PreparedRequest p = Prep(false, 3, R"(root ::= "yes" | "no")");
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  const std::vector<int32_t> open = Tok().Encode("<think>", false, false);
  const int32_t cat = Piece("cat");
  Driven r = Drive(out, [&](size_t i) { return i < open.size() ? open[i] : cat; }, 60);
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + open.size()), open)
      << "the opening marker was allowed";
  EXPECT_TRUE(out.reasoning_cut());
  EXPECT_NE(r.reasoning.find(Text(cat)), std::string::npos) << r.reasoning;
  EXPECT_TRUE(r.content == "yes" || r.content == "no") << r.content;
}

TEST(ThinkingOutput, ALoweredBudgetEndsTheThinkingAtTheNextToken) {
  const PreparedRequest p = Prep(true, -1);
  ChoiceOutput out(Tok(), p, {Tok().bos_id()}, 0);
  const int32_t cat = Piece("cat");
  const int32_t n = Tok().n_vocab();
  std::vector<float> row(static_cast<size_t>(n), 0.0f);
  for (int i = 0; i < 5; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    row[static_cast<size_t>(cat)] = 20.0f;
    ASSERT_EQ(out.Next(row.data(), n).token, cat);
  }
  EXPECT_EQ(out.reasoning_tokens(), 5);
  out.LowerReasoningBudget(3);  // already spent: the close comes next
  std::fill(row.begin(), row.end(), 0.0f);
  row[static_cast<size_t>(cat)] = 20.0f;
  TokenStep s = out.Next(row.data(), n);
  EXPECT_EQ(s.token, p.reasoning->close_ids.front());
  EXPECT_TRUE(out.reasoning_cut());
  EXPECT_EQ(out.reasoning_budget_tokens(), 3);
  out.LowerReasoningBudget(10);  // never raised
  EXPECT_EQ(out.reasoning_budget_tokens(), 3);
}

}  // namespace
}  // namespace lifeline::serving
