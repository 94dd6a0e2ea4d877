// Session: the simple single-sequence case on top of LlamaModel::Eval. It owns a LlamaContext
// with one sequence and a logits buffer: Prefill(prompt) then Decode(token) repeatedly, each
// returning the logits of the last token.
//
// Ownership: owns its context and logits buffer; borrows the model and the pool (both must
// outlive the session). Thread-safety: one thread at a time.
// Failure: the errors of LlamaModel::Eval (e.g. OutOfRange once the context is full); a
// failed call leaves the session's cache as it was.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/kernels/compute_pool.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"

namespace lifeline {

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(const LlamaModel& model, ComputePool& pool,
                                                 const ContextOptions& options = {});

  // Appends tokens to the sequence; returns the last token's logits [n_vocab], valid until
  // the next call. An empty span is InvalidArgument.
  Result<std::span<const float>> Prefill(std::span<const int32_t> tokens);
  // Appends one token; returns its logits [n_vocab].
  Result<std::span<const float>> Decode(int32_t token);
  // Forgets every position (keeps the memory).
  void Reset();

  int64_t n_past() const { return ctx_->SequenceLength(seq_); }
  int64_t n_ctx() const { return ctx_->n_ctx(); }
  LlamaContext& context() { return *ctx_; }
  SeqId sequence() const { return seq_; }

 private:
  Session(const LlamaModel& model, ComputePool& pool) : model_(model), pool_(pool) {}

  const LlamaModel& model_;
  ComputePool& pool_;
  std::unique_ptr<LlamaContext> ctx_;
  SeqId seq_ = 0;
  std::vector<BatchToken> batch_;
  std::vector<float> logits_;  // [n_vocab]
};

}  // namespace lifeline
