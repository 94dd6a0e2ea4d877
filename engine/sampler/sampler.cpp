#include "engine/sampler/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "base/check.h"

namespace lifeline {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMax = std::numeric_limits<float>::max();

// Top-p sorts only the prefix it needs: start with the 64 best and grow 4x, since most real
// distributions put p of their mass in a few dozen tokens.
constexpr size_t kTopPInitialPrefix = 64;
constexpr size_t kTopPGrowth = 4;
// Above this many candidates top-p first buckets by logit so that a flat distribution (a
// nucleus of most of a 150K vocabulary) never needs a full sort.
constexpr size_t kTopPSortLimit = 4096;
constexpr size_t kTopPBuckets = 1024;
// Buckets span 40 nats below the max (a token there weighs < 5e-18 of the top one); anything
// further down shares the last bucket.
constexpr float kTopPBucketRangeNats = 40.0f;

std::string FormatFloat(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

// Checks lo <= v <= hi (inclusive unless the flags say otherwise) and finiteness.
Status CheckFloatRange(const char* field, float v, float lo, bool lo_open, float hi,
                       const char* range_text) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (ok) return Status::Ok();
  return OutOfRange(std::string(field) + ": " + FormatFloat(v) + " is outside the allowed range " +
                    range_text);
}

// NaN carries no ordering information, so it can never be chosen; +inf is clamped so that
// softmax arithmetic stays finite (inf - inf would be NaN).
inline float Sanitize(float x) {
  if (std::isnan(x)) return kNegInf;
  if (x == kPosInf) return kFloatMax;
  return x;
}

// Unnormalized probability at temperature 1, relative to the max logit (in (0, 1]).
inline double Weight(float logit, float max_logit) {
  return static_cast<double>(std::exp(logit - max_logit));
}

uint64_t ResolveSeed(uint64_t requested) {
  if (requested != kSamplerRandomSeed) return requested;
  uint64_t seed = 0;
  try {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  } catch (...) {
    // random_device may throw where no entropy source exists; the clock is good enough to
    // make independent requests differ, which is all a random seed promises.
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  // Never hand out the sentinel itself: seed() must reproduce the run when passed back.
  if (seed == kSamplerRandomSeed) seed ^= 1;
  return seed;
}

}  // namespace

Status ValidateSamplerParams(const SamplerParams& p) {
  LL_RETURN_IF_ERROR(CheckFloatRange("temperature", p.temperature, 0.0f, false,
                                     kSamplerMaxTemperature, "[0, 100]"));
  LL_RETURN_IF_ERROR(CheckFloatRange("top_p", p.top_p, 0.0f, false, 1.0f, "[0, 1]"));
  LL_RETURN_IF_ERROR(CheckFloatRange("min_p", p.min_p, 0.0f, false, 1.0f, "[0, 1]"));
  LL_RETURN_IF_ERROR(CheckFloatRange("repeat_penalty", p.repeat_penalty, 0.0f, true,
                                     kSamplerMaxRepeatPenalty, "(0, 100]"));
  LL_RETURN_IF_ERROR(CheckFloatRange("presence_penalty", p.presence_penalty,
                                     -kSamplerMaxAbsPresenceFrequency, false,
                                     kSamplerMaxAbsPresenceFrequency, "[-2, 2]"));
  LL_RETURN_IF_ERROR(CheckFloatRange("frequency_penalty", p.frequency_penalty,
                                     -kSamplerMaxAbsPresenceFrequency, false,
                                     kSamplerMaxAbsPresenceFrequency, "[-2, 2]"));
  if (p.repeat_last_n < 0 || p.repeat_last_n > kSamplerMaxRepeatLastN) {
    return OutOfRange("repeat_last_n: " + std::to_string(p.repeat_last_n) +
                      " is outside the allowed range [0, " +
                      std::to_string(kSamplerMaxRepeatLastN) + "]");
  }
  // top_k: every value is meaningful (<= 0 disables it, > n_vocab keeps everything).
  return Status::Ok();
}

// ---- RNG ----------------------------------------------------------------------------------

// ---- Sampler ------------------------------------------------------------------------------

Sampler::Sampler(const SamplerParams& params)
    : params_(params), seed_(ResolveSeed(params.seed)), rng_(seed_) {
  LL_CHECK(params_.repeat_last_n >= 0);
  LL_CHECK(params_.repeat_penalty > 0.0f);
}

bool Sampler::PenaltiesEnabled() const {
  return params_.repeat_last_n > 0 &&
         (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
          params_.presence_penalty != 0.0f);
}

void Sampler::Accept(int32_t id) {
  const size_t capacity = static_cast<size_t>(params_.repeat_last_n);
  if (capacity == 0) return;
  if (window_size_ < capacity) {
    window_.push_back(id);
    ++window_size_;
  } else {
    const int32_t evicted = window_[window_head_];
    auto it = window_counts_.find(evicted);
    if (it != window_counts_.end() && --it->second == 0) window_counts_.erase(it);
    window_[window_head_] = id;
    window_head_ = (window_head_ + 1) % capacity;
  }
  ++window_counts_[id];
}

void Sampler::ResetHistory() {
  window_.clear();
  window_head_ = 0;
  window_size_ = 0;
  window_counts_.clear();
}

void Sampler::ApplyPenalties(float* logits, int32_t n_vocab) const {
  for (const auto& [id, count] : window_counts_) {
    if (id < 0 || id >= n_vocab) continue;  // ids from another vocabulary: nothing to penalize
    float& l = logits[id];
    if (l <= 0.0f) {
      l *= params_.repeat_penalty;
    } else {
      l /= params_.repeat_penalty;
    }
    l -= static_cast<float>(count) * params_.frequency_penalty +
         (count > 0 ? params_.presence_penalty : 0.0f);
    l = Sanitize(l);
  }
}

bool Sampler::Before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void Sampler::BuildCandidates(const float* logits, int32_t n_vocab, int32_t k) {
  cand_.clear();
  if (k <= 0 || k >= n_vocab) {
    cand_.reserve(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (logits[i] != kNegInf) cand_.push_back({logits[i], i});  // -inf has zero probability
    }
    return;
  }
  // Heap ordered by Before: front() is the worst of the current k best. Ids arrive in
  // ascending order, so an equal logit never displaces an earlier (lower) id.
  cand_.reserve(static_cast<size_t>(k));
  for (int32_t i = 0; i < n_vocab; ++i) {
    const Candidate c{logits[i], i};
    if (c.logit == kNegInf) continue;
    if (cand_.size() < static_cast<size_t>(k)) {
      cand_.push_back(c);
      std::push_heap(cand_.begin(), cand_.end(), Before);
    } else if (Before(c, cand_.front())) {
      std::pop_heap(cand_.begin(), cand_.end(), Before);
      cand_.back() = c;
      std::push_heap(cand_.begin(), cand_.end(), Before);
    }
  }
}

size_t Sampler::NucleusPrefix(std::vector<Candidate>& v, float max_logit, double cum,
                              double target) {
  const size_t n = v.size();
  size_t sorted = 0;
  size_t want = std::min(n, kTopPInitialPrefix);
  size_t i = 0;
  while (i < n) {
    // Select the next-best block with nth_element (O(n)) and sort only that block.
    if (want > sorted) {
      auto first = v.begin() + static_cast<ptrdiff_t>(sorted);
      auto mid = v.begin() + static_cast<ptrdiff_t>(want);
      if (want < n) std::nth_element(first, mid, v.end(), Before);
      std::sort(first, mid, Before);
      sorted = want;
    }
    for (; i < sorted; ++i) {
      cum += Weight(v[i].logit, max_logit);
      if (cum >= target) return i + 1;
    }
    want = std::min(n, sorted * kTopPGrowth);
  }
  return n;  // rounding kept the sum just under target: keep everything
}

void Sampler::ApplyTopP(float p) {
  if (p >= 1.0f || cand_.size() <= 1) return;
  const size_t n = cand_.size();
  float max_logit = kNegInf;
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, c.logit);

  if (n <= kTopPSortLimit) {
    double total = 0.0;
    for (const Candidate& c : cand_) total += Weight(c.logit, max_logit);
    cand_.resize(NucleusPrefix(cand_, max_logit, 0.0, static_cast<double>(p) * total));
    return;
  }

  // Large vocabulary without top-k: bucket candidates by distance below the max logit (one
  // O(n) pass), find the bucket where the cumulative mass crosses p, and sort only inside
  // that bucket. Everything in earlier buckets is more probable and kept unsorted.
  constexpr float kScale = static_cast<float>(kTopPBuckets - 1) / kTopPBucketRangeNats;
  bucket_.resize(n);
  bucket_mass_.assign(kTopPBuckets, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float d = max_logit - cand_[i].logit;  // >= 0
    size_t b = kTopPBuckets - 1;                 // catch-all for the far tail
    if (d < kTopPBucketRangeNats) b = std::min(kTopPBuckets - 2, static_cast<size_t>(d * kScale));
    bucket_[i] = static_cast<uint16_t>(b);
    const double w = Weight(cand_[i].logit, max_logit);
    bucket_mass_[b] += w;
    total += w;
  }
  const double target = static_cast<double>(p) * total;
  double cum = 0.0;
  size_t edge = kTopPBuckets;
  for (size_t b = 0; b < kTopPBuckets; ++b) {
    if (cum + bucket_mass_[b] >= target) {
      edge = b;
      break;
    }
    cum += bucket_mass_[b];
  }
  if (edge == kTopPBuckets) return;  // rounding: the whole mass is needed

  keep_.clear();
  edge_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (bucket_[i] < edge) {
      keep_.push_back(cand_[i]);
    } else if (bucket_[i] == edge) {
      edge_.push_back(cand_[i]);
    }
  }
  const size_t take = NucleusPrefix(edge_, max_logit, cum, target);
  keep_.insert(keep_.end(), edge_.begin(), edge_.begin() + static_cast<ptrdiff_t>(take));
  cand_.swap(keep_);
}

void Sampler::ApplyMinP(float min_p) {
  if (min_p <= 0.0f || cand_.size() <= 1) return;
  double max_logit = kNegInf;
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, static_cast<double>(c.logit));
  // p_i >= min_p * p_max  <=>  logit_i - max_logit >= log(min_p); no softmax needed.
  const double log_min_p = std::log(static_cast<double>(min_p));
  // remove_if keeps the survivors in order, so the draw order stays deterministic.
  auto end = std::remove_if(cand_.begin(), cand_.end(), [&](const Candidate& c) {
    return static_cast<double>(c.logit) - max_logit < log_min_p;
  });
  cand_.erase(end, cand_.end());
}

int32_t Sampler::DrawFromCandidates() {
  // Subtract the max before dividing by the temperature: (l - max) <= 0 stays finite in
  // double even for clamped +inf logits and tiny temperatures.
  double max_logit = kNegInf;
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, static_cast<double>(c.logit));
  const double inv_temp = 1.0 / static_cast<double>(params_.temperature);
  probs_.resize(cand_.size());
  double total = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    probs_[i] = std::exp((static_cast<double>(cand_[i].logit) - max_logit) * inv_temp);
    total += probs_[i];
  }
  // One draw per Sample() call regardless of how many candidates survived, so token t always
  // consumes the t-th number of the stream (reproducible across filter settings).
  const double target = rng_.Uniform01() * total;
  double cum = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    cum += probs_[i];
    if (target < cum) return cand_[i].id;
  }
  // target == total can only come from rounding; the last candidate with mass is the answer.
  for (size_t i = cand_.size(); i-- > 0;) {
    if (probs_[i] > 0.0) return cand_[i].id;
  }
  return cand_.front().id;
}

int32_t Sampler::Sample(float* logits, int32_t n_vocab) {
  LL_CHECK(logits != nullptr);
  LL_CHECK(n_vocab > 0);
  last_degenerate_ = false;

  for (int32_t i = 0; i < n_vocab; ++i) logits[i] = Sanitize(logits[i]);
  if (PenaltiesEnabled()) ApplyPenalties(logits, n_vocab);

  if (params_.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
      if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
    }
    if (logits[best] == kNegInf) {
      last_degenerate_ = true;
      return 0;
    }
    return best;
  }

  BuildCandidates(logits, n_vocab, params_.top_k);
  if (cand_.empty()) {
    last_degenerate_ = true;
    rng_.Next();  // keep the one-draw-per-call stream alignment
    return 0;
  }

  ApplyTopP(params_.top_p);
  ApplyMinP(params_.min_p);
  return DrawFromCandidates();
}

}  // namespace lifeline
