// Depth-first walks of the vocabulary trie against parse stacks (internal): the one place where
// tokens are checked. A walk advances the stacks one byte per trie edge and skips a whole
// subtree as soon as no stack survives its first byte, so shared prefixes are checked once.
//
// Thread-safety: one TokenWalker per matcher (scratch buffers inside).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/grammar/grammar_vocab.h"
#include "engine/grammar/mask_internal.h"
#include "engine/grammar/stack_machine.h"

namespace lifeline::grammar {

class TokenWalker {
 public:
  TokenWalker(const Grammar& g, const GrammarVocab& vocab);

  // The context-independent mask of position `state` (see mask_internal.h).
  std::shared_ptr<PositionMask> BuildMask(int32_t state);

  // From the waiting stacks `start` (frames in `arena`), walks the trie below `node` and sets
  // the bits of the tokens whose remaining bytes (after the node's prefix) the stacks accept.
  // The arena is truncated back to its size at entry.
  void WalkBelow(FrameArena& arena, const std::vector<int32_t>& start, int32_t node,
                 uint64_t* bits);

  StackStepper& stepper() { return stepper_; }

 private:
  template <bool kBuild>
  void Walk(FrameArena& arena, const std::vector<int32_t>& start, int32_t node, uint64_t* bits,
            std::vector<int32_t>* accepted, std::vector<int32_t>* escapes, int64_t* visited);

  const GrammarVocab& vocab_;
  const VocabTrie& trie_;
  StackStepper stepper_;
  std::vector<std::vector<int32_t>> levels_;
  std::vector<size_t> marks_;
  FrameArena build_arena_;
};

}  // namespace lifeline::grammar
