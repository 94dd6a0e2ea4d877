#include "engine/model/pooling.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace lifeline {

PoolingAccumulator::PoolingAccumulator(PoolingType pooling, int64_t n_embd)
    : pooling_(pooling), n_embd_(n_embd) {
  LL_CHECK(pooling == PoolingType::kMean || pooling == PoolingType::kCls ||
           pooling == PoolingType::kLast || pooling == PoolingType::kRank);
  if (pooling == PoolingType::kMean) sum_.assign(static_cast<size_t>(n_embd), 0.0);
}

bool PoolingAccumulator::Wants(int64_t pos, int64_t n_tokens) const {
  switch (pooling_) {
    case PoolingType::kMean: return true;
    case PoolingType::kCls: return pos == 0;
    default: return pos == n_tokens - 1;  // kLast, kRank: a causal model's last state
  }
}

void PoolingAccumulator::Add(int64_t /*pos*/, const float* row) {
  ++n_added_;
  if (pooling_ == PoolingType::kMean) {
    for (int64_t i = 0; i < n_embd_; ++i) sum_[static_cast<size_t>(i)] += row[i];
  } else {
    row_.assign(row, row + n_embd_);
  }
}

void PoolingAccumulator::Reset() {
  n_added_ = 0;
  std::fill(sum_.begin(), sum_.end(), 0.0);
  row_.clear();
}

std::vector<float> PoolingAccumulator::Pooled() const {
  if (n_added_ == 0) return {};
  if (pooling_ != PoolingType::kMean) return row_;
  std::vector<float> out(static_cast<size_t>(n_embd_));
  for (int64_t i = 0; i < n_embd_; ++i) {
    out[static_cast<size_t>(i)] =
        static_cast<float>(sum_[static_cast<size_t>(i)] / static_cast<double>(n_added_));
  }
  return out;
}

std::vector<float> RankScores(const ModelConfig& c, const LlamaWeights& w,
                              const std::vector<float>& pooled) {
  if (w.cls_out.empty() || static_cast<int64_t>(pooled.size()) != c.n_embd) return {};
  const auto n = static_cast<size_t>(c.n_embd);
  std::vector<float> x = pooled;
  if (!w.cls.empty()) {  // BERT-style pooler: dense + tanh before the output layer
    std::vector<float> y(n);
    for (size_t r = 0; r < n; ++r) {
      double acc = w.cls_b.empty() ? 0.0 : w.cls_b[r];
      for (size_t k = 0; k < n; ++k) acc += static_cast<double>(w.cls[r * n + k]) * x[k];
      y[r] = static_cast<float>(std::tanh(acc));
    }
    x = std::move(y);
  }
  const auto n_out = static_cast<size_t>(c.n_cls_out);
  std::vector<float> scores(n_out);
  for (size_t r = 0; r < n_out; ++r) {
    double acc = w.cls_out_b.empty() ? 0.0 : w.cls_out_b[r];
    for (size_t k = 0; k < n; ++k) acc += static_cast<double>(w.cls_out[r * n + k]) * x[k];
    scores[r] = static_cast<float>(acc);
  }
  if (c.arch == ModelArch::kQwen3 && n_out > 1) {
    const float mx = *std::max_element(scores.begin(), scores.end());
    double total = 0;
    for (float& s : scores) {
      s = std::exp(s - mx);
      total += s;
    }
    for (float& s : scores) s = static_cast<float>(s / total);
  }
  return scores;
}

}  // namespace lifeline
