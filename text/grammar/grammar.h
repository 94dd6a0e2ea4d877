// GBNF grammars (llama.cpp's dialect) compiled for constrained decoding.
//
// Dialect: `name ::= alternatives` rules (names of [A-Za-z0-9_-]), `|` alternatives, sequences,
// "literal strings", [character classes] with ranges and [^negation], `.` (any character),
// ( groups ), postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`, `#` comments to end of line. Escapes in
// literals and classes: \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH. A rule ends at a newline
// outside parentheses (a newline followed by `|` continues it). The entry rule is `root`.
// Characters are Unicode code points matched as UTF-8; surrogates (U+D800-U+DFFF) never match.
// Token references (`<[id]>`, `<|tok|>`) are not supported: the grammar knows no vocabulary.
//
// Compilation: every rule becomes a DFA over bytes whose edges are byte ranges or references to
// other rules; small rules without unbounded repetition are inlined into their callers so that
// most matching never pushes a rule. Grammars the pushdown matcher could loop on are refused
// here: left recursion (a rule reaching itself without consuming input, also through rules that
// can match the empty string) and repetitions of a rule that can match the empty string.
//
// Failure: ParseGbnf returns InvalidArgument "line L, column C: expected ..." for syntax errors
// and undefined rules, and ResourceExhausted naming the limit for grammars over GrammarLimits.
// Thread-safety: a Grammar is immutable; share it freely across threads and matchers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lifeline::grammar {

// Caps on what a (possibly hostile) grammar may make the compiler and the matcher do.
struct GrammarLimits {
  int64_t max_text_bytes = 1 << 20;  // grammar source
  int32_t max_rules = 8192;          // named rules
  int32_t max_alternatives = 65536;  // `|` alternatives, all rules together
  int32_t max_elements = 262144;     // syntax nodes (literal characters, classes, refs, groups)
  int32_t max_nesting = 128;         // parenthesis depth
  int32_t max_repetition = 2000;     // m and n of {m,n}
  int32_t max_states = 262144;       // automaton states after expansion, all rules together
  // Work of the determinization, all rules together, in units of one NFA state visited or
  // one byte edge compared (about a nanosecond each). max_states bounds the automaton's size
  // but not the work per state: `[a-z]{0,1000} [a-y]{0,1000}` spent 6 s of CPU reaching it.
  int64_t max_compile_work = int64_t{1} << 25;
  // Matcher caps. A byte needing more than max_closure_steps is not allowed (by the mask too).
  // Past max_stacks or max_stack_depth, Accept fails with ResourceExhausted and the state is
  // unchanged; masks cannot see these two (a position's mask ignores what is below it).
  int32_t max_stacks = 1024;          // parse stacks alive at once (ambiguity)
  int32_t max_stack_depth = 2048;     // nested rule calls (e.g. JSON nesting x 2)
  int32_t max_closure_steps = 65536;  // rule pushes / pops explored for one byte
};

struct Grammar;  // compiled; defined in grammar_internal.h

// Parses and compiles `text` (the entry rule is `root`).
Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits = {});

// Sizes of a compiled grammar, for logs and tests.
struct GrammarStats {
  int32_t rules = 0;   // compiled rules (after inlining)
  int32_t states = 0;  // DFA states, all rules
};
GrammarStats GetGrammarStats(const Grammar& grammar);

}  // namespace lifeline::grammar
