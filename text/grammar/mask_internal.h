// Token masks per grammar position (internal).
//
// A position is a DFA state that can be the top of a waiting stack. Its PositionMask is what
// the context below the top frame cannot change (the adaptive token mask of XGrammar, computed
// by one trie walk from a stack holding only that frame):
//   accepted: tokens whose bytes are all consumed while the frame (or rules it calls) is still
//             matching, or exactly when it finishes: allowed whatever the caller is;
//   escapes:  trie nodes at which the frame finished with children still to come: those tokens
//             depend on the caller. Per grammar (the matcher does it once per position), the
//             children whose byte can follow the rule there (its FOLLOW set) are gathered into
//             a trie of the remaining bytes (one entry per token and finishing point), walked
//             at run time from the caller's stacks once for all such tokens: inside a JSON
//             string the tokens `",` `"}` `name":` ... share a handful of suffixes.
// The mask itself does not depend on FOLLOW, so grammars with different callers of the same
// rule share it.
//   all other tokens are refused whatever the caller is.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <unordered_map>
#include <vector>

namespace lifeline::grammar {

struct VocabTrie {
  // Nodes in depth-first preorder; node 0 is the root (empty prefix).
  std::vector<uint8_t> byte;       // byte on the edge into the node
  std::vector<uint16_t> depth;     // prefix length
  std::vector<int32_t> end;        // one past the node's subtree
  std::vector<int32_t> tok_begin;  // tokens[tok_begin[k] .. tok_begin[k+1]) end at node k
  std::vector<int32_t> tokens;
  int32_t max_depth = 0;
  int32_t n_nodes() const { return static_cast<int32_t>(byte.size()); }
};

// Entries (bytes, token id) -> trie; equal byte strings share a node.
VocabTrie BuildTrie(std::vector<std::pair<std::string_view, int32_t>> entries);

struct PositionMask {
  std::vector<uint64_t> bits;     // accepted tokens as a bitset (dense masks) ...
  std::vector<int32_t> ids;       // ... or as a sorted id list (sparse masks)
  std::vector<int32_t> escapes;   // vocabulary trie nodes
  int64_t walk_nodes = 0;         // trie nodes visited to compute it
  int64_t bytes() const {
    return static_cast<int64_t>(sizeof(PositionMask) + bits.size() * 8 + ids.size() * 4 +
                                escapes.size() * 4);
  }
};

struct MaskKey {
  uint64_t lo = 0, hi = 0;  // rule fingerprint
  int32_t local_state = 0;  // state index within the rule
  bool operator==(const MaskKey& o) const {
    return lo == o.lo && hi == o.hi && local_state == o.local_state;
  }
};

struct MaskKeyHash {
  size_t operator()(const MaskKey& k) const {
    return static_cast<size_t>(k.lo ^ (k.hi * 31) ^ (static_cast<uint64_t>(k.local_state) << 7));
  }
};

// LRU memo of masks shared by all matchers of one vocabulary; thread-safe.
class MaskMemo {
 public:
  explicit MaskMemo(int64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  std::shared_ptr<const PositionMask> Find(const MaskKey& key);
  void Insert(const MaskKey& key, std::shared_ptr<const PositionMask> mask);
  int64_t bytes() const;
  int64_t hits() const;
  int64_t misses() const;

 private:
  struct Entry {
    std::shared_ptr<const PositionMask> mask;
    std::list<MaskKey>::iterator lru;
  };
  mutable std::mutex mu_;
  const int64_t budget_bytes_;
  int64_t bytes_ = 0, hits_ = 0, misses_ = 0;
  std::list<MaskKey> lru_;  // front = most recent
  std::unordered_map<MaskKey, Entry, MaskKeyHash> map_;
};

}  // namespace lifeline::grammar
