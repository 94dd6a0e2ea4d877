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
}

server::TokenLogprobs ChoiceOutput::Logprobs(const float* row, int32_t n_vocab,
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
  server::TokenLogprobs out;
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
  if (matcher_ != nullptr) {
    if (Status s = matcher_->Accept(id); !s.ok()) {
      step.outcome = TokenStep::Outcome::kError;
      step.error = "the output grammar: " + s.message();
      return step;
    }
  }
  sampler_->Accept(id);
  step.token = id;
  if (logprobs_) pending_.push_back(Logprobs(row, n_vocab, id));
  const std::string released = detok_->Push(id);
  if (lazy_grammar_ != nullptr) WatchTrigger(released);
  const StopPush pushed = stop_->Push(released);
  step.text = pushed.emit;
  if (pushed.stopped || (matcher_ != nullptr && matcher_->MustEnd())) {
    step.outcome = TokenStep::Outcome::kStop;
  }
  if (!step.text.empty() || step.outcome == TokenStep::Outcome::kStop) {
    step.logprobs = std::move(pending_);
    pending_.clear();
  }
  return step;
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
  if (!stop_->stopped()) {
    StopPush tail = stop_->Push(detok_->Flush());
    step.text = tail.emit + (tail.stopped ? "" : stop_->Finish());
  }
  step.logprobs = std::move(pending_);
  pending_.clear();
  return step;
}

}  // namespace lifeline::serving
