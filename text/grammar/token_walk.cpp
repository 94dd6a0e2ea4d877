#include "text/grammar/token_walk.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace lifeline::grammar {

TokenWalker::TokenWalker(const Grammar& g, const GrammarVocab& vocab)
    : g_(g), vocab_(vocab), trie_(vocab.trie()), stepper_(g) {
  levels_.resize(static_cast<size_t>(trie_.max_depth) + 1);
  marks_.resize(static_cast<size_t>(trie_.max_depth) + 1);
}

template <bool kBuild>
void TokenWalker::Walk(FrameArena& arena, const std::vector<int32_t>& start,
                       const VocabTrie& trie, uint64_t* bits, std::vector<int32_t>* accepted,
                       std::vector<int32_t>* escapes, int64_t* visited) {
  const size_t mark0 = arena.Mark();
  levels_[0] = start;
  marks_[0] = mark0;
  const int32_t end = trie.n_nodes();
  int64_t n_visited = 0;
  for (int32_t k = 1; k < end;) {
    ++n_visited;
    const int32_t level = trie.depth[k];
    arena.Reset(marks_[level - 1]);
    const std::vector<int32_t>& from = levels_[level - 1];
    std::vector<int32_t>& to = levels_[level];
    bool bottom = false;
    stepper_.Advance(arena, from.data(), from.size(), trie.byte[k], &to, &bottom);
    const bool alive = !to.empty();
    if (alive || bottom) {
      // The prefix is valid: every token ending here is allowed (in build mode a finished
      // bottom frame is a valid end too: the caller's stacks exist at run time).
      for (int32_t i = trie.tok_begin[k]; i < trie.tok_begin[k + 1]; ++i) {
        int32_t id = trie.tokens[i];
        if constexpr (kBuild) {
          accepted->push_back(id);
        } else {
          bits[id >> 6] |= uint64_t{1} << (id & 63);
        }
      }
    }
    if constexpr (kBuild) {
      if (bottom && trie.end[k] > k + 1) escapes->push_back(k);
    }
    if (!alive) {
      k = trie.end[k];
      continue;
    }
    marks_[level] = arena.Mark();
    ++k;
  }
  arena.Reset(mark0);
  if (visited) *visited = n_visited;
}

std::shared_ptr<PositionMask> TokenWalker::BuildMask(int32_t state) {
  build_arena_.Clear();
  std::vector<int32_t> start{build_arena_.Add(-1, state)};
  std::vector<int32_t> accepted;
  auto mask = std::make_shared<PositionMask>();
  Walk<true>(build_arena_, start, trie_, nullptr, &accepted, &mask->escapes, &mask->walk_nodes);
  const int32_t n_vocab = vocab_.n_vocab();
  if (static_cast<int64_t>(accepted.size()) * 32 > n_vocab) {
    mask->bits.assign((static_cast<size_t>(n_vocab) + 63) / 64, 0);
    for (int32_t id : accepted) mask->bits[id >> 6] |= uint64_t{1} << (id & 63);
  } else {
    std::sort(accepted.begin(), accepted.end());
    mask->ids = std::move(accepted);
  }
  return mask;
}

VocabTrie TokenWalker::SuffixTrie(const PositionMask& mask, int32_t rule) const {
  std::vector<std::pair<std::string_view, int32_t>> rest;
  for (int32_t k : mask.escapes) {
    const size_t cut = trie_.depth[k];
    for (int32_t c = k + 1; c < trie_.end[k]; c = trie_.end[c]) {
      if (!g_.Follows(rule, trie_.byte[c])) continue;
      for (int32_t i = trie_.tok_begin[c]; i < trie_.tok_begin[trie_.end[c]]; ++i) {
        const int32_t id = trie_.tokens[i];
        rest.emplace_back(std::string_view(vocab_.token_bytes(id)).substr(cut), id);
      }
    }
  }
  return BuildTrie(std::move(rest));
}

void TokenWalker::WalkTrie(FrameArena& arena, const std::vector<int32_t>& start,
                           const VocabTrie& trie, uint64_t* bits) {
  Walk<false>(arena, start, trie, bits, nullptr, nullptr, nullptr);
}

}  // namespace lifeline::grammar
