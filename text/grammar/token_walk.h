// Depth-first walks of the vocabulary trie against parse stacks (internal): the one place where
// tokens are checked. A walk advances the stacks one byte per trie edge and skips a whole
// subtree as soon as no stack survives its first byte, so shared prefixes are checked once.
//
// Thread-safety: one TokenWalker per matcher (scratch buffers inside).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "text/grammar/grammar_vocab.h"
#include "text/grammar/mask_internal.h"
#include "text/grammar/stack_machine.h"

namespace lifeline::grammar {

class TokenWalker {
 public:
  TokenWalker(const Grammar& g, const GrammarVocab& vocab);

  // The context-independent mask of position `state` (see mask_internal.h).
  std::shared_ptr<PositionMask> BuildMask(int32_t state);

  // The bytes after each escape of `mask` whose first byte can follow `rule` in this grammar,
  // as a trie of (remaining bytes, token id).
  VocabTrie SuffixTrie(const PositionMask& mask, int32_t rule) const;

  // From the waiting stacks `start` (frames in `arena`), walks `trie` (a suffix trie) and sets
  // the bits of the tokens whose bytes there the stacks accept. The arena is truncated back to
  // its size at entry.
  void WalkTrie(FrameArena& arena, const std::vector<int32_t>& start, const VocabTrie& trie,
                uint64_t* bits);

  StackStepper& stepper() { return stepper_; }

 private:
  template <bool kBuild>
  void Walk(FrameArena& arena, const std::vector<int32_t>& start, const VocabTrie& trie,
            uint64_t* bits, std::vector<int32_t>* accepted, std::vector<int32_t>* escapes,
            int64_t* visited);

  const Grammar& g_;
  const GrammarVocab& vocab_;
  const VocabTrie& trie_;
  StackStepper stepper_;
  std::vector<std::vector<int32_t>> levels_;
  std::vector<size_t> marks_;
  FrameArena build_arena_;
  int32_t bottom_rule_ = -1;  // rule of the position whose mask is being built
};

}  // namespace lifeline::grammar
