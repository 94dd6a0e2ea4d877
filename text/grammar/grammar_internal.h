// The compiled form of a grammar (internal to text/grammar).
//
// Every rule is a DFA over bytes. A state has byte-range edges (disjoint, sorted by `lo`),
// rule-reference edges (call `rule`, continue at `target` when it returns) and a final flag
// (the rule may return here). States of all rules share one id space; a rule's states are
// contiguous, numbered in breadth-first order from its start, so a state's index relative to
// its rule's first state is canonical (the key of shared token masks, see grammar_vocab.h).
//
// Immutable after ParseGbnf; shared by all matchers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "text/grammar/grammar.h"

namespace lifeline::grammar {

struct ByteEdge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t target = -1;
};

struct RefEdge {
  int32_t rule = -1;
  int32_t target = -1;
};

struct DfaState {
  int32_t rule = -1;
  uint32_t edge_begin = 0, edge_end = 0;  // into Grammar::edges
  uint32_t ref_begin = 0, ref_end = 0;    // into Grammar::refs
  bool final = false;
  bool has_bytes() const { return edge_end > edge_begin; }
};

struct Grammar {
  std::vector<std::string> rule_names;  // per compiled rule
  std::vector<int32_t> rule_first_state;
  std::vector<int32_t> rule_state_count;
  // 128-bit fingerprint of the rule and every rule it can call (canonical structure, names
  // ignored); {0, 0} when that closure is too large to fingerprint (masks are then not shared
  // across grammars).
  std::vector<uint64_t> rule_fp_lo, rule_fp_hi;
  // Bytes that can come right after the rule returns, in any caller (a 256-bit set; the end of
  // the text is not a byte). A token that finishes a rule and continues with another byte can
  // only be valid when that byte is in the set, whatever the caller is.
  std::vector<std::array<uint64_t, 4>> rule_follow;
  std::vector<DfaState> states;
  std::vector<ByteEdge> edges;
  std::vector<RefEdge> refs;
  int32_t root_rule = 0;
  GrammarLimits limits;

  int32_t rule_start(int32_t rule) const { return rule_first_state[rule]; }
  bool Follows(int32_t rule, uint8_t byte) const {
    return (rule_follow[rule][byte >> 6] >> (byte & 63)) & 1;
  }
  // Next state on `byte` from `state`, or -1.
  int32_t Next(int32_t state, uint8_t byte) const {
    const DfaState& s = states[state];
    for (uint32_t i = s.edge_begin; i < s.edge_end; ++i) {
      const ByteEdge& e = edges[i];
      if (byte < e.lo) return -1;
      if (byte <= e.hi) return e.target;
    }
    return -1;
  }
};

}  // namespace lifeline::grammar
