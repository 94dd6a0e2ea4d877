// GrammarVocab: validation, the byte trie of the vocabulary, and the shared mask memo.
#include "text/grammar/grammar_vocab.h"

#include <algorithm>
#include <numeric>

#include "text/grammar/mask_internal.h"

namespace lifeline::grammar {

GrammarVocab::GrammarVocab() = default;
GrammarVocab::~GrammarVocab() = default;

// Sorted entries -> preorder trie. In sorted order a prefix comes before its extensions, so each
// entry ends on the current path.
VocabTrie BuildTrie(std::vector<std::pair<std::string_view, int32_t>> entries) {
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  VocabTrie t;
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.end.push_back(0);
  std::vector<int32_t> path{0};     // path[d] = node at depth d
  std::vector<int32_t> entry_node;  // node of each entry, in sorted order
  std::string_view prev;
  for (const auto& [s, id] : entries) {
    size_t common = 0;
    const size_t lim = std::min(prev.size(), s.size());
    while (common < lim && prev[common] == s[common]) ++common;
    while (path.size() > common + 1) {
      t.end[path.back()] = t.n_nodes();
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.end.push_back(0);
      path.push_back(t.n_nodes() - 1);
    }
    entry_node.push_back(path[s.size()]);
    t.max_depth = std::max<int32_t>(t.max_depth, static_cast<int32_t>(s.size()));
    prev = s;
  }
  while (!path.empty()) {
    t.end[path.back()] = t.n_nodes();
    path.pop_back();
  }
  // Entries are appended in node order, so each node's tokens are one contiguous run.
  t.tok_begin.assign(t.byte.size() + 1, 0);
  for (int32_t node : entry_node) ++t.tok_begin[node + 1];
  std::partial_sum(t.tok_begin.begin(), t.tok_begin.end(), t.tok_begin.begin());
  t.tokens.reserve(entries.size());
  for (const auto& e : entries) t.tokens.push_back(e.second);
  return t;
}

Result<std::shared_ptr<const GrammarVocab>> GrammarVocab::Build(
    std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids,
    const GrammarVocabOptions& options) {
  if (token_bytes.empty()) return InvalidArgument("grammar vocab: no tokens");
  if (static_cast<int64_t>(token_bytes.size()) > options.max_vocab) {
    return ResourceExhausted("grammar vocab: " + std::to_string(token_bytes.size()) +
                             " tokens, above the limit of " + std::to_string(options.max_vocab));
  }
  std::shared_ptr<GrammarVocab> v(new GrammarVocab());
  v->is_eog_.assign(token_bytes.size(), 0);
  for (int32_t id : eog_ids) {
    if (id < 0 || static_cast<size_t>(id) >= token_bytes.size()) {
      return InvalidArgument("grammar vocab: end-of-generation id " + std::to_string(id) +
                             " outside [0, " + std::to_string(token_bytes.size()) + ")");
    }
    if (!v->is_eog_[id]) v->eog_ids_.push_back(id);
    v->is_eog_[id] = 1;
  }
  // Tokens longer than max_token_bytes stay out of the trie (never allowed) rather than failing
  // the whole vocabulary; the trie's depth is 16-bit.
  const size_t max_len = static_cast<size_t>(std::clamp<int64_t>(options.max_token_bytes, 1, 65535));
  std::vector<int32_t> in_trie;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const size_t len = token_bytes[id].size();
    if (len > 0 && len <= max_len && !v->is_eog_[id]) in_trie.push_back(static_cast<int32_t>(id));
  }
  v->token_bytes_ = std::move(token_bytes);
  std::vector<std::pair<std::string_view, int32_t>> entries;
  entries.reserve(in_trie.size());
  for (int32_t id : in_trie) entries.emplace_back(v->token_bytes_[id], id);
  v->trie_ = std::make_unique<VocabTrie>(BuildTrie(std::move(entries)));
  v->memo_ = std::make_unique<MaskMemo>(options.mask_memo_bytes);
  return std::shared_ptr<const GrammarVocab>(std::move(v));
}

std::shared_ptr<const PositionMask> MaskMemo::Find(const MaskKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.mask;
}

void MaskMemo::Insert(const MaskKey& key, std::shared_ptr<const PositionMask> mask) {
  int64_t size = mask->bytes() + 64;
  std::lock_guard<std::mutex> lock(mu_);
  if (size > budget_bytes_ || map_.count(key)) return;
  while (bytes_ + size > budget_bytes_ && !lru_.empty()) {
    auto it = map_.find(lru_.back());
    bytes_ -= it->second.mask->bytes() + 64;
    map_.erase(it);
    lru_.pop_back();
  }
  lru_.push_front(key);
  map_.emplace(key, Entry{std::move(mask), lru_.begin()});
  bytes_ += size;
}

int64_t MaskMemo::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
int64_t MaskMemo::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
int64_t MaskMemo::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace lifeline::grammar
