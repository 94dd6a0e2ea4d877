// GrammarMatcher: the per-request state of constrained decoding. It tracks the parse of the
// text generated so far and, before each sampled token, says which tokens may come next.
//
// Per step: ApplyMask (or FillAllowed) -> sample -> Accept(token). The mask of a step is the
// union, over the parse stacks alive, of the stack top's precomputed position mask (shared
// across requests through the vocabulary's memo) and a trie walk of the few tokens that
// depend on the rules below the top (see mask_internal.h). The first use of a position costs
// one trie walk (a whole-vocabulary walk inside a JSON string: a few ms on a 128k vocab, then
// memoized for every later request with the same rule); later steps cost microseconds.
//
// End of generation: the vocabulary's EOG ids are allowed exactly when CanEnd(). Accepting one
// ends the match (finished(): afterwards only EOG ids are allowed). MustEnd() means the text
// is complete and no byte can follow: the caller should stop (or force EOG) there.
//
// Partial UTF-8: the grammar is compiled to bytes, so a token may end inside a character (byte
// tokens <0xE2>, BPE pieces of a CJK character); it is allowed when some completion of the
// character is, and the next token must complete it.
//
// Failure: Accept / AcceptBytes return InvalidArgument for a token or byte the grammar does not
// allow (the state is unchanged), ResourceExhausted when a GrammarLimits matcher cap was hit.
// Thread-safety: one thread at a time per matcher; the Grammar and GrammarVocab it holds are
// shared and immutable. Copying a matcher copies its parse state (cheap: the live stacks).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/grammar/grammar.h"
#include "text/grammar/grammar_vocab.h"

namespace lifeline::grammar {

struct MatcherStats {
  int64_t masks = 0;             // masks computed
  int64_t positions_built = 0;   // position masks computed by a trie walk
  int64_t positions_shared = 0;  // position masks found in the vocabulary's memo
  int64_t suffix_walks = 0;      // run-time walks of tokens that outlive a position's rule
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher& other);
  GrammarMatcher& operator=(const GrammarMatcher& other);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Sets logits[id] = -infinity for every token not allowed next. Logits beyond the vocab's
  // n_vocab (padded output rows) are masked too; a shorter array is masked as far as it goes.
  // Returns the number of allowed tokens (0: the grammar is stuck; only possible after a cap).
  int32_t ApplyMask(float* logits, int32_t n_vocab);
  // The same set: (*allowed)[id] = 1 when allowed, size n_vocab.
  void FillAllowed(std::vector<uint8_t>* allowed);
  // The same set as a bitset of (n_vocab + 63) / 64 words; returns the allowed count.
  int32_t FillBitmask(std::vector<uint64_t>* bits);

  // One token, without computing the whole mask (a sample-first fast path).
  bool IsAllowed(int32_t token) const;

  Status Accept(int32_t token);
  Status AcceptBytes(std::string_view bytes);

  // OK, or ResourceExhausted when the initial parse state already exceeded a GrammarLimits cap
  // (a hostile, hugely ambiguous grammar): nothing is then allowed and Accept fails.
  Status status() const;

  bool CanEnd() const;
  bool MustEnd() const;
  bool finished() const;  // an EOG token was accepted

  // Computes the mask of every position of the grammar now and leaves it in the vocabulary's
  // memo: e.g. once at model load with the json_object grammar, so that no request pays the
  // first trie walks inside a JSON string (a few ms each on a 128k vocabulary). Returns the
  // number of positions.
  int32_t Precompute();

  const MatcherStats& stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lifeline::grammar
