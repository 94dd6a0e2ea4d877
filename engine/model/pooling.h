// Pooling: how an embedding or reranking model turns one sequence's final hidden states
// (LlamaModel::Eval's want_hidden rows) into its answer, as llama.cpp's build_pooling does:
//   mean  the average of every position's row
//   cls   the first position's row
//   last  the last position's row (Qwen3-Embedding and other decoder embedders)
//   rank  the last position's row through the classifier head (RankScores): a reranker's
//         scores, softmaxed for qwen3 (Qwen3-Reranker's head holds its "yes" / "no" rows, so
//         the first score is p(yes)); the first score is the relevance.
// The rows may come over several prefill chunks: PoolingAccumulator keeps one sequence's sum
// or row between them, so a long document is never held whole.
//
// Ownership: values. Thread-safety: one accumulator per sequence, one thread at a time;
// RankScores is pure.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace lifeline {

// Only the last position's row is read (last, rank): a prefix cache may serve the rest of a
// prompt; mean and cls read positions a cache hit would skip.
inline bool ReadsOnlyTheLast(PoolingType pooling) {
  return pooling == PoolingType::kLast || pooling == PoolingType::kRank;
}

class PoolingAccumulator {
 public:
  // pooling: kMean, kCls, kLast or kRank (kNone / kUnspecified are the caller's to resolve).
  PoolingAccumulator(PoolingType pooling, int64_t n_embd);

  // Whether the hidden row of position `pos` of a sequence of `n_tokens` positions is read.
  bool Wants(int64_t pos, int64_t n_tokens) const;
  // The row of position `pos` (n_embd floats), one the accumulator Wants.
  void Add(int64_t pos, const float* row);
  bool ReadsOnlyTheLast() const { return lifeline::ReadsOnlyTheLast(pooling_); }
  // Forgets every row (the sequence is computed again from its start: preempted).
  void Reset();
  // Rows added so far.
  int64_t n_added() const { return n_added_; }
  // The pooled vector (n_embd floats; for kRank the row the head reads). Empty when no row
  // was added.
  std::vector<float> Pooled() const;

 private:
  PoolingType pooling_;
  int64_t n_embd_;
  int64_t n_added_ = 0;
  std::vector<double> sum_;  // kMean: running sum in double (thousands of rows)
  std::vector<float> row_;   // kCls / kLast / kRank: the row kept
};

// A reranker's scores for a pooled row: cls_out . [tanh(cls . x + cls_b)] + cls_out_b, then
// softmax over the outputs for qwen3 (llama.cpp's rule). Empty when the model has no head.
std::vector<float> RankScores(const ModelConfig& config, const LlamaWeights& weights,
                              const std::vector<float>& pooled);

}  // namespace lifeline
