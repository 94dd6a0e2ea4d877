// Syntax tree of a GBNF text (internal): what gbnf_parse.cpp produces and grammar_compile.cpp
// turns into automata. Nodes live in one vector and refer to each other by index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/grammar/grammar.h"

namespace lifeline::grammar {

struct CpRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
};

enum class AstKind : uint8_t {
  kEmpty,    // matches ""
  kLiteral,  // code points in `ranges` (lo == hi each), in order
  kClass,    // one code point out of `ranges` (normalized: sorted, merged, no surrogates)
  kRef,      // rule `ref`
  kSeq,      // kids in order
  kAlt,      // one of kids
  kRepeat,   // kids[0] repeated min..max times (max -1 = unbounded)
};

struct AstNode {
  AstKind kind = AstKind::kEmpty;
  int32_t line = 0, col = 0;  // where it starts in the source (1-based)
  int32_t ref = -1;
  int32_t min = 0, max = 0;
  std::vector<int32_t> kids;
  std::vector<CpRange> ranges;
};

struct GbnfAst {
  std::vector<AstNode> nodes;
  std::vector<std::string> rule_names;  // index = rule id (defined or only referenced)
  std::vector<int32_t> rule_body;       // node id, -1 while undefined
  std::vector<int32_t> rule_ref_line, rule_ref_col;  // first reference (for "undefined" errors)
  std::vector<int32_t> rule_def_line, rule_def_col;  // definition (0 while undefined)
};

Result<GbnfAst> ParseGbnfAst(std::string_view text, const GrammarLimits& limits);

// Normalizes ranges: sorted, overlapping/adjacent merged, surrogates removed.
std::vector<CpRange> NormalizeRanges(std::vector<CpRange> ranges);
// Complement over U+0000..U+10FFFF (input normalized).
std::vector<CpRange> ComplementRanges(const std::vector<CpRange>& ranges);

}  // namespace lifeline::grammar
