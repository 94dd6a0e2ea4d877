#include "serving/choice_output.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace lifeline::serving {

ChoiceOutput::ChoiceOutput(const Tokenizer& tokenizer, const PreparedRequest& prepared,
                           const std::vector<int32_t>& prompt, int32_t seed_offset)
    : tok_(tokenizer),
      logit_bias_(prepared.logit_bias),
      logprobs_(prepared.logprobs),
      top_logprobs_(prepared.top_logprobs),
      ignore_eos_(prepared.ignore_eos) {
  SamplerParams sp = prepared.sampler;
  if (sp.seed != kSamplerRandomSeed) sp.seed += static_cast<uint64_t>(seed_offset);
  sampler_ = std::make_unique<Sampler>(sp);
  for (int32_t id : prompt) sampler_->Accept(id);
  detok_ = std::make_unique<IncrementalDetokenizer>(tokenizer, prepared.render_ids);
  if (prepared.grammar != nullptr && prepared.grammar_vocab != nullptr) {
    matcher_ = std::make_unique<grammar::GrammarMatcher>(prepared.grammar, prepared.grammar_vocab);
  } else if (prepared.lazy_grammar != nullptr && prepared.grammar_vocab != nullptr &&
             !prepared.grammar_trigger.empty()) {
    lazy_grammar_ = prepared.lazy_grammar;
    grammar_vocab_ = prepared.grammar_vocab;
    grammar_trigger_ = prepared.grammar_trigger;
  }
  auto stop = StopMatcher::Create(prepared.stop);
  LL_CHECK(stop.ok());  // validated by PrepareRequest
  stop_.emplace(std::move(stop).value());
  if (prepared.reasoning != nullptr) {
    reasoning_ = prepared.reasoning;
    text_split_ = std::make_unique<toolcall::ReasoningSplitter>(reasoning_->format,
                                                                prepared.starts_in_reasoning);
    token_split_ = std::make_unique<toolcall::ReasoningSplitter>(reasoning_->format,
                                                                 prepared.starts_in_reasoning);
    reasoning_budget_tokens_ = prepared.reasoning_budget_tokens;
    if (matcher_ != nullptr) {  // the grammar waits for the answer
      answer_grammar_ = prepared.grammar;
      grammar_vocab_ = prepared.grammar_vocab;
      matcher_ = nullptr;
    }
    // A budget of 0 with the block already open: the close comes first.
    if (token_split_->in_reasoning() && reasoning_budget_tokens_ == 0) {
      forced_.assign(reasoning_->close_ids.rbegin(), reasoning_->close_ids.rend());
      reasoning_cut_ = true;
    }
  }
}

void ChoiceOutput::LowerReasoningBudget(int64_t budget_tokens) {
  if (reasoning_ == nullptr || budget_tokens < 0) return;
  if (reasoning_budget_tokens_ >= 0 && budget_tokens >= reasoning_budget_tokens_) return;
  reasoning_budget_tokens_ = budget_tokens;
  if (token_split_->in_reasoning() && forced_.empty() && !reasoning_cut_ &&
      reasoning_tokens_ >= reasoning_budget_tokens_) {
    forced_.assign(reasoning_->close_ids.rbegin(), reasoning_->close_ids.rend());
    reasoning_cut_ = true;
  }
}

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view TrimLeft(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsBlank(s[i])) ++i;
  return s.substr(i);
}

}  // namespace

void ChoiceOutput::MaskThinkingStart(float* row, int32_t n_vocab) {
  // The answer's grammar, continuing what was held (its leading blanks are not the
  // grammar's: an answer may start after a line break).
  grammar::GrammarMatcher probe(answer_grammar_, grammar_vocab_);
  std::vector<uint8_t> allowed;
  if (probe.AcceptBytes(TrimLeft(start_held_)).ok()) probe.FillAllowed(&allowed);
  allowed.resize(static_cast<size_t>(n_vocab), 0);
  const std::string_view open = toolcall::MarkersOf(reasoning_->format).open;
  // No thinking allowed: only the answer's grammar.
  const bool may_open = reasoning_budget_tokens_ != 0;
  for (const auto& [id, piece] : reasoning_->start_pieces) {
    if (!may_open) break;
    if (id >= n_vocab) continue;
    const std::string t = start_held_ + piece;
    const std::string_view rest = TrimLeft(t);
    if (rest.empty() || open.starts_with(rest) || rest.starts_with(open)) {
      allowed[static_cast<size_t>(id)] = 1;
    }
  }
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (allowed[static_cast<size_t>(i)] == 0) row[i] = -std::numeric_limits<float>::infinity();
  }
}

void ChoiceOutput::OnThinkingToken(int32_t id) {
  const bool was_start = !token_split_->in_reasoning() && !token_split_->answering();
  const bool was_reasoning = token_split_->in_reasoning();
  const std::string piece = tok_.TokenToPiece(id, /*render_special=*/true);
  toolcall::ReasoningDelta d = token_split_->Feed(piece);
  if (was_reasoning || token_split_->in_reasoning()) ++reasoning_tokens_;
  const bool is_start = !token_split_->in_reasoning() && !token_split_->answering();
  if (is_start) {
    start_held_ += piece;
  } else {
    start_held_.clear();
  }
  std::string_view content = d.content;
  if (was_start) content = TrimLeft(content);  // as MaskThinkingStart probed it
  if (answer_grammar_ != nullptr && matcher_ == nullptr && token_split_->answering()) {
    matcher_ = std::make_unique<grammar::GrammarMatcher>(answer_grammar_, grammar_vocab_);
  }
  if (content.empty()) {
  } else if (matcher_ != nullptr) {
    (void)matcher_->AcceptBytes(content);  // its status is checked by Emit
  } else if (lazy_grammar_ != nullptr) {
    WatchTrigger(content);  // a call's marker in the answer (never in the thinking)
  }
  if (token_split_->in_reasoning() && forced_.empty() && !reasoning_cut_ &&
      reasoning_budget_tokens_ >= 0 && reasoning_tokens_ >= reasoning_budget_tokens_) {
    forced_.assign(reasoning_->close_ids.rbegin(), reasoning_->close_ids.rend());
    reasoning_cut_ = true;
  }
}

api::TokenLogprobs ChoiceOutput::Logprobs(const float* row, int32_t n_vocab,
                                             int32_t id) const {
  // log p_i = l_i - max - log(sum_j exp(l_j - max)), over the finite logits.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) max_logit = std::max(max_logit, row[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (row[i] > -std::numeric_limits<float>::infinity()) sum += std::exp(double(row[i]) - max_logit);
  }
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto lp = [&](int32_t i) { return static_cast<float>(double(row[i]) - log_z); };
  api::TokenLogprobs out;
  out.token = tok_.TokenToPiece(id, /*render_special=*/true);
  out.logprob = lp(id);
  if (top_logprobs_ > 0) {
    // The k best ids (ties: lower id first), without sorting the vocabulary.
    std::vector<int32_t> best;
    best.reserve(static_cast<size_t>(top_logprobs_) + 1);
    auto before = [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (static_cast<int32_t>(best.size()) < top_logprobs_) {
        best.push_back(i);
        std::push_heap(best.begin(), best.end(), before);
      } else if (before(i, best.front())) {
        std::pop_heap(best.begin(), best.end(), before);
        best.back() = i;
        std::push_heap(best.begin(), best.end(), before);
      }
    }
    std::sort(best.begin(), best.end(), before);
    for (int32_t i : best) out.top.push_back({tok_.TokenToPiece(i, true), lp(i)});
  }
  return out;
}

TokenStep ChoiceOutput::Next(float* row, int32_t n_vocab) {
  TokenStep step;
  sampled_ = true;
  if (!forced_.empty()) {  // the thinking budget ran out: the close, whatever the logits
    const int32_t id = forced_.back();
    forced_.pop_back();
    return Emit(row, n_vocab, id);
  }
  for (const auto& [id, bias] : logit_bias_) {
    // -100 bans the token outright (OpenAI's meaning), not just lowers it.
    row[id] = bias <= -100.0f ? -std::numeric_limits<float>::infinity() : row[id] + bias;
  }
  if (matcher_ != nullptr) {
    if (matcher_->MustEnd()) {  // the sentence is complete and nothing may follow
      step.outcome = TokenStep::Outcome::kStop;
      return step;
    }
    if (matcher_->ApplyMask(row, n_vocab) == 0) {
      step.outcome = TokenStep::Outcome::kError;
      step.error = "the output grammar allows no next token (" +
                   (matcher_->status().ok() ? std::string("no token of the vocabulary fits")
                                            : matcher_->status().message()) +
                   ")";
      return step;
    }
  }
  if (answer_grammar_ != nullptr && matcher_ == nullptr && !token_split_->in_reasoning()) {
    MaskThinkingStart(row, n_vocab);  // the thinking block may still open
  }
  const int32_t id = sampler_->Sample(row, n_vocab);
  if (sampler_->last_sample_degenerate()) {
    step.outcome = TokenStep::Outcome::kError;
    step.error = "the model produced no finite logits";
    return step;
  }
  // Under a grammar end-of-generation was only possible where the sentence may end.
  if ((!ignore_eos_ || matcher_ != nullptr) && tok_.IsEndOfGeneration(id)) {
    step.outcome = TokenStep::Outcome::kStop;
    return step;
  }
  // With thinking, OnThinkingToken feeds the grammar the answer's bytes only.
  if (matcher_ != nullptr && reasoning_ == nullptr) {
    if (Status s = matcher_->Accept(id); !s.ok()) {
      step.outcome = TokenStep::Outcome::kError;
      step.error = "the output grammar: " + s.message();
      return step;
    }
  }
  return Emit(row, n_vocab, id);
}

TokenStep ChoiceOutput::Emit(const float* row, int32_t n_vocab, int32_t id) {
  TokenStep step;
  sampler_->Accept(id);
  step.token = id;
  if (logprobs_) pending_.push_back(Logprobs(row, n_vocab, id));
  const std::string released = detok_->Push(id);
  if (reasoning_ != nullptr) {
    OnThinkingToken(id);
    if (matcher_ != nullptr && !matcher_->status().ok()) {
      step.outcome = TokenStep::Outcome::kError;
      step.error = "the output grammar: " + matcher_->status().message();
      return step;
    }
  } else if (lazy_grammar_ != nullptr) {
    WatchTrigger(released);
  }
  const StopPush pushed = stop_->Push(released);
  Split(pushed.emit, /*final=*/false, &step);
  if (pushed.stopped || (matcher_ != nullptr && matcher_->MustEnd())) {
    step.outcome = TokenStep::Outcome::kStop;
  }
  if (!step.text.empty() || !step.reasoning.empty() ||
      step.outcome == TokenStep::Outcome::kStop) {
    step.logprobs = std::move(pending_);
    pending_.clear();
  }
  return step;
}

void ChoiceOutput::Split(const std::string& text, bool final, TokenStep* step) {
  if (text_split_ == nullptr) {
    step->text += text;
    return;
  }
  toolcall::ReasoningDelta d = text_split_->Feed(text);
  if (final) {
    toolcall::ReasoningDelta tail = text_split_->Finish();
    d.reasoning += tail.reasoning;
    d.content += tail.content;
  }
  step->reasoning += d.reasoning;
  step->text += d.content;
}

void ChoiceOutput::WatchTrigger(std::string_view released) {
  trigger_window_ += released;
  const size_t at = trigger_window_.find(grammar_trigger_);
  if (at == std::string::npos) {
    // Keep only what could still be the start of the trigger.
    const size_t keep = grammar_trigger_.size() - 1;
    if (trigger_window_.size() > keep) trigger_window_.erase(0, trigger_window_.size() - keep);
    return;
  }
  auto matcher = std::make_unique<grammar::GrammarMatcher>(lazy_grammar_, grammar_vocab_);
  const bool fits = matcher->AcceptBytes(std::string_view(trigger_window_).substr(at)).ok();
  lazy_grammar_ = nullptr;
  trigger_window_.clear();
  if (fits) matcher_ = std::move(matcher);
}

TokenStep ChoiceOutput::Flush() {
  TokenStep step;
  std::string text;
  if (!stop_->stopped()) {
    StopPush tail = stop_->Push(detok_->Flush());
    text = tail.emit + (tail.stopped ? "" : stop_->Finish());
  }
  Split(text, /*final=*/true, &step);
  step.logprobs = std::move(pending_);
  pending_.clear();
  return step;
}

}  // namespace lifeline::serving
