// Output processing of one choice (one sequence of a request), run by the engine thread for
// every step that gives it a token: logits -> logit bias -> grammar mask -> sampler ->
// log-probabilities -> end-of-generation -> grammar advance -> detokenizer -> stop sequences
// -> the text to send.
//
// A lazy grammar (tool_choice "auto") applies from the moment its trigger text appears.
// With a grammar, only tokens that keep the text a prefix of a sentence of the grammar are
// sampled, end-of-generation only once the text is a whole sentence, and the choice stops as
// soon as no further byte is possible. A cut by max_tokens stays "length" (the text is then
// an unfinished sentence, as OpenAI reports it).
//
// A thinking model's output (chat, PreparedRequest::reasoning) splits into reasoning and
// answer text (TokenStep::reasoning / text), the same split at every chunk boundary. Two
// splitters run: one over the released text (what the client sees), one over each sampled
// token's bytes (what the grammar and the budget act on, without the detokenizer's and stop
// matcher's hold-back). A grammar applies to the answer only: while the output may still open
// its thinking block, tokens that continue the opening marker stay allowed; inside the block
// sampling is free; from the close on the grammar constrains the answer. At the thinking
// budget the close is forced token by token (budget forcing) and the answer starts.
//
// Log-probabilities are the log-softmax of the logits the sampler saw (bias and penalties
// applied, before temperature and the top-k/p filters), as OpenAI reports them. Entries of
// tokens whose text is still held back (half a UTF-8 character, a possible stop-sequence
// prefix) wait and ride with the next text that goes out, so every sent token has its entry.
//
// Ownership: owns the sampler, detokenizer, stop matcher and a copy of the logit bias of its
// choice; borrows the tokenizer (it outlives every request). Thread-safety: engine thread only.
// Failure: a degenerate logits row (nothing finite) is reported as kError.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/grammar/grammar_matcher.h"
#include "engine/sampler/sampler.h"
#include "engine/sampler/stop.h"
#include "engine/tokenizer/tokenizer.h"
#include "text/toolcall/reasoning.h"
#include "api/serving_api.h"
#include "serving/request_prep.h"

namespace lifeline::serving {

struct TokenStep {
  enum class Outcome : uint8_t { kContinue, kStop, kError };
  Outcome outcome = Outcome::kContinue;
  int32_t token = -1;      // the sampled id, appended to the sequence (kContinue and a stop
                           // string's kStop); -1 when end-of-generation ended the choice
  std::string text;        // answer text released by this token (may be empty)
  std::string reasoning;   // thinking text released by this token (may be empty)
  std::vector<api::TokenLogprobs> logprobs;  // entries released with `text`
  std::string error;       // kError
};

class ChoiceOutput {
 public:
  // `seed_offset` makes choice k of a seeded request draw its own stream (seed + k).
  ChoiceOutput(const Tokenizer& tokenizer, const PreparedRequest& prepared,
               const std::vector<int32_t>& prompt, int32_t seed_offset);

  // `row` is the choice's logits [n_vocab]; it is modified (bias, sampler sanitizing).
  TokenStep Next(float* row, int32_t n_vocab);

  // Generation ended (length, end-of-generation): whatever the detokenizer and the stop
  // matcher still hold, with the log-probability entries still waiting.
  TokenStep Flush();

  bool stopped_by_string() const { return stop_->stopped(); }
  bool sampled() const { return sampled_; }  // Next has run at least once

  // Thinking: tokens spent in the block so far, the budget in force (-1 unlimited), and
  // whether the close was forced at the budget.
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  int64_t reasoning_budget_tokens() const { return reasoning_budget_tokens_; }
  bool reasoning_cut() const { return reasoning_cut_; }
  // The engine lowers the budget (class ceiling, SLO ladder); only ever down, and a budget
  // already spent ends the thinking at the next token.
  void LowerReasoningBudget(int64_t budget_tokens);

 private:
  api::TokenLogprobs Logprobs(const float* row, int32_t n_vocab, int32_t id) const;
  // Token `id` chosen (sampled or forced): into the sampler's history, the detokenizer, the
  // thinking splitters, the stop matcher; the released text.
  TokenStep Emit(const float* row, int32_t n_vocab, int32_t id);
  // Released text into the step: answer and reasoning (final: the splitter's held text too).
  void Split(const std::string& text, bool final, TokenStep* step);

  const Tokenizer& tok_;
  std::vector<std::pair<int32_t, float>> logit_bias_;
  bool logprobs_ = false;
  int32_t top_logprobs_ = 0;
  bool ignore_eos_ = false;
  // Starts the lazy grammar when its trigger has appeared in the output: the matcher takes
  // the text from the trigger on (a model that wrote something the grammar refuses after the
  // trigger keeps free output: its text stays content).
  void WatchTrigger(std::string_view released);

  // Thinking (null reasoning_: none). The grammar of the answer waits in answer_grammar_
  // until the token splitter says the answer has begun.
  void MaskThinkingStart(float* row, int32_t n_vocab);
  void OnThinkingToken(int32_t id);
  std::shared_ptr<const ReasoningSetup> reasoning_;
  std::unique_ptr<toolcall::ReasoningSplitter> text_split_;   // released text -> client
  std::unique_ptr<toolcall::ReasoningSplitter> token_split_;  // sampled bytes -> grammar
  std::shared_ptr<const grammar::Grammar> answer_grammar_;
  std::string start_held_;  // token bytes the token splitter holds while the block may open
  int64_t reasoning_tokens_ = 0;
  int64_t reasoning_budget_tokens_ = -1;
  bool reasoning_cut_ = false;
  std::vector<int32_t> forced_;  // close tokens still to write (reverse order)

  std::unique_ptr<grammar::GrammarMatcher> matcher_;  // null: free output
  std::shared_ptr<const grammar::Grammar> lazy_grammar_;  // waiting for grammar_trigger_
  std::shared_ptr<const grammar::GrammarVocab> grammar_vocab_;
  std::string grammar_trigger_;
  std::string trigger_window_;  // the output's tail that may hold the trigger's start
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<IncrementalDetokenizer> detok_;
  std::optional<StopMatcher> stop_;
  bool sampled_ = false;
  std::vector<api::TokenLogprobs> pending_;  // entries whose text is still held back
};

}  // namespace lifeline::serving
