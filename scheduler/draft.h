// Prompt-lookup drafting for speculative decoding (draft-free: no second model). Text that
// repeats or edits a passage of the prompt -- code edits, quoting, extraction, templated
// answers -- continues the way it went the last time the same few tokens appeared, so the
// tokens that followed the latest earlier occurrence of the sequence's trailing n-gram are a
// cheap guess at what comes next. The target model then checks all of them in one forward
// pass (Scheduler, knobs spec_tokens): each one it would have sampled anyway is a token
// gained for the price of a row of a batch, which at batch 1 is nearly free because decode
// is bound by reading the weights, not by arithmetic.
//
// A Drafter is where the scheduler gets a decode's draft: prompt lookup by default, or a
// smaller model of the same vocabulary (serving/model_drafter.h). Whatever it proposes, the
// output is what the target model samples: a bad draft only costs time.
//
// Ownership / thread-safety: PromptLookupDraft is a pure function; a Drafter is called from
// the scheduler's thread only. Failure: none (no match or no draft -> empty draft).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lifeline {

struct DraftOptions {
  int32_t max_tokens = 4;  // at most this many drafted tokens
  int32_t max_ngram = 3;   // the longest trailing n-gram tried first ...
  int32_t min_ngram = 1;   // ... down to this one
  // Only the last this-many tokens are searched (bounds the cost per step on long contexts).
  int64_t window_tokens = 4096;
};

// The tokens that followed the most recent earlier occurrence of the longest trailing n-gram
// (n from max_ngram down to min_ngram) of `tokens` that occurs earlier at all, up to
// max_tokens of them (fewer when the occurrence is near the end). Empty when no n-gram of
// those lengths recurs.
std::vector<int32_t> PromptLookupDraft(std::span<const int32_t> tokens, const DraftOptions& options);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_tokens tokens guessed to follow `tokens` (request `id`'s prompt and generated
  // tokens so far); may return fewer, or none.
  virtual std::vector<int32_t> Draft(int64_t id, std::span<const int32_t> tokens,
                                     int32_t max_tokens) = 0;
  // The request finished: drop whatever was kept for it.
  virtual void Forget(int64_t id) { (void)id; }
  // What one drafted token costs to produce, in ms (the scheduler weighs it against what
  // the draft is expected to save); 0 = free next to a forward pass.
  virtual double ms_per_token() const { return 0; }
};

// The default: PromptLookupDraft with DraftOptions' n-gram lengths and window.
class PromptLookupDrafter final : public Drafter {
 public:
  std::vector<int32_t> Draft(int64_t id, std::span<const int32_t> tokens,
                             int32_t max_tokens) override {
    (void)id;
    DraftOptions o;
    o.max_tokens = max_tokens;
    return PromptLookupDraft(tokens, o);
  }
};

}  // namespace lifeline
