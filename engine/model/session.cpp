#include "engine/model/session.h"

#include "base/check.h"

namespace lifeline {

Result<std::unique_ptr<Session>> Session::Create(const LlamaModel& model, ComputePool& pool,
                                                 const ContextOptions& options) {
  std::unique_ptr<Session> s(new Session(model, pool));
  LL_ASSIGN_OR_RETURN(s->ctx_, LlamaContext::Create(model.config(), options));
  s->seq_ = s->ctx_->NewSequence();
  s->logits_.resize(static_cast<size_t>(model.config().n_vocab));
  return s;
}

Result<std::span<const float>> Session::Prefill(std::span<const int32_t> tokens) {
  if (tokens.empty()) return InvalidArgument("Prefill: no tokens");
  const int64_t start = n_past();
  batch_.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    BatchToken t;
    t.token = tokens[i];
    t.pos = start + static_cast<int64_t>(i);
    t.seq = seq_;
    t.want_logits = i + 1 == tokens.size();
    batch_.push_back(t);
  }
  LL_RETURN_IF_ERROR(model_.Eval(batch_, *ctx_, pool_, logits_));
  return std::span<const float>(logits_);
}

Result<std::span<const float>> Session::Decode(int32_t token) {
  return Prefill(std::span<const int32_t>(&token, 1));
}

void Session::Reset() { LL_CHECK(ctx_->TruncateSequence(seq_, 0).ok()); }

}  // namespace lifeline
