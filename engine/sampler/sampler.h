// Token sampler: turns one row of logits into one token id.
//
// Chain (same order as llama.cpp's default chain):
//   penalties -> top-k -> top-p -> min-p -> temperature -> softmax -> seeded draw
// temperature == 0 short-circuits after the penalties to greedy argmax (ties -> lowest id).
//
// Semantics of each stage (p_i below is softmax of the surviving logits at temperature 1):
//   penalties  For every token counted in the last `repeat_last_n` accepted ids (count c > 0):
//              logit /= repeat_penalty if logit > 0, else logit *= repeat_penalty; then
//              logit -= c * frequency_penalty + presence_penalty. All three penalties share
//              the one window, as in llama.cpp. Skipped when repeat_last_n == 0.
//   top-k      keep the k highest logits (ties broken by lower id); one O(n_vocab) pass with
//              a k-sized heap, no sort of the vocabulary.
//   top-p      keep the shortest prefix (by descending p_i, ties by lower id) whose mass
//              reaches top_p; at least one token. Sorts only the part of the vocabulary the
//              nucleus needs (bucketed by logit first above 4096 candidates).
//   min-p      keep tokens with p_i >= min_p * max_j p_j.
//   temperature / softmax / draw: p_i ∝ exp((logit_i - max) / temperature); one uniform
//              double from the RNG picks the token by inverse CDF.
//
// Non-finite logits: NaN is treated as -inf; +inf is treated as the largest finite float (so
// several +inf tokens share the mass equally). If no logit is finite-or-+inf (all NaN/-inf),
// Sample returns the documented fallback: the lowest token id (0), and
// last_sample_degenerate() reports true so the caller can fail the request instead.
//
// Ownership: a Sampler owns its RNG state, its penalty window and its scratch buffers; it
// borrows the logits row only for the duration of Sample(). Thread-safety: none — one
// Sampler per request, used by one thread at a time. Failure: invalid parameters are
// rejected by ValidateSamplerParams (call it at the request edge); the constructor assumes
// validated parameters and LL_CHECKs the few invariants needed for memory safety.
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "base/rng.h"
#include "base/status.h"

namespace lifeline {

// Seed sentinel: "pick a random seed". Any other value gives a deterministic sequence.
inline constexpr uint64_t kSamplerRandomSeed = std::numeric_limits<uint64_t>::max();

// Documented limits enforced by ValidateSamplerParams.
inline constexpr float kSamplerMaxTemperature = 100.0f;
inline constexpr float kSamplerMaxRepeatPenalty = 100.0f;
inline constexpr int32_t kSamplerMaxRepeatLastN = 65536;
inline constexpr float kSamplerMaxAbsPresenceFrequency = 2.0f;  // OpenAI's documented range

struct SamplerParams {
  float temperature = 0.8f;         // [0, 100]; 0 => greedy (argmax, ties -> lowest id)
  int32_t top_k = 40;               // <= 0 => disabled; > n_vocab behaves as n_vocab
  float top_p = 0.95f;              // [0, 1]; 1 => disabled; 0 => keep the top token only
  float min_p = 0.05f;              // [0, 1]; 0 => disabled
  float repeat_penalty = 1.0f;      // (0, 100]; 1 => disabled
  int32_t repeat_last_n = 64;       // [0, 65536] ids in the penalty window; 0 => no penalties
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  uint64_t seed = kSamplerRandomSeed;
};

// Ok, or InvalidArgument/OutOfRange naming the field, its value and the allowed range.
Status ValidateSamplerParams(const SamplerParams& params);

// xoshiro256** seeded through splitmix64 (base/rng.h): fixed, library-independent output for
// a seed.
using SamplerRng = Xoshiro256StarStar;

class Sampler {
 public:
  // Parameters must have passed ValidateSamplerParams. A kSamplerRandomSeed seed is replaced
  // by a fresh random one (see seed()).
  explicit Sampler(const SamplerParams& params);

  // logits: [n_vocab], n_vocab > 0. Returns a token id in [0, n_vocab). On return logits[]
  // holds the sanitized (NaN -> -inf, +inf -> FLT_MAX) and penalized values, i.e. exactly
  // what the filters saw (callers can derive logprobs from it); filters and temperature do
  // not write to it.
  int32_t Sample(float* logits, int32_t n_vocab);

  // Records a token in the penalty window (callers may also feed prompt tokens).
  void Accept(int32_t id);

  // Clears the penalty window; the RNG stream continues.
  void ResetHistory();

  // The seed actually in use (the drawn one when the params asked for a random seed), so a
  // run can be reproduced.
  uint64_t seed() const { return seed_; }

  // True when the last Sample() saw no usable logit (all NaN / -inf) and fell back to id 0.
  bool last_sample_degenerate() const { return last_degenerate_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  bool PenaltiesEnabled() const;
  void ApplyPenalties(float* logits, int32_t n_vocab) const;
  // Fills cand_ with the usable (> -inf) logits, or only the k best when 0 < k < n_vocab
  // (one pass with a k-sized heap: O(n_vocab) plus O(k log k)-ish heap work).
  void BuildCandidates(const float* logits, int32_t n_vocab, int32_t k);
  void ApplyTopP(float p);
  void ApplyMinP(float min_p);
  int32_t DrawFromCandidates();
  // Strict total order (logit desc, id asc): the kept sets do not depend on the standard
  // library's selection/sort algorithms.
  static bool Before(const Candidate& a, const Candidate& b);
  // Sorts as long a prefix of v as needed for the running mass (starting at cum) to reach
  // target; returns the prefix length (>= 1 for non-empty v, v.size() if never reached).
  static size_t NucleusPrefix(std::vector<Candidate>& v, float max_logit, double cum,
                              double target);

  SamplerParams params_;
  uint64_t seed_;
  SamplerRng rng_;
  bool last_degenerate_ = false;

  // Penalty window: ring buffer of the last repeat_last_n ids and their counts.
  std::vector<int32_t> window_;        // [repeat_last_n] ring buffer
  size_t window_head_ = 0;             // next slot to overwrite
  size_t window_size_ = 0;             // valid entries
  std::unordered_map<int32_t, int32_t> window_counts_;

  // Scratch, reused across calls to avoid a per-token allocation.
  std::vector<Candidate> cand_;        // [n_surviving] candidates of the current step
  std::vector<Candidate> keep_;        // [n_surviving] top-p: survivors above the edge bucket
  std::vector<Candidate> edge_;        // [edge bucket size] top-p: the bucket crossing p
  std::vector<uint16_t> bucket_;       // [n_surviving] top-p: bucket of each candidate
  std::vector<double> bucket_mass_;    // [kTopPBuckets]
  std::vector<double> probs_;          // [n_surviving]
};

}  // namespace lifeline
