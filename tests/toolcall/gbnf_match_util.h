// A small, slow GBNF reader and recognizer for tests: it parses grammar text in llama.cpp's
// dialect (rules "name ::= ...", literals with escapes, [classes] with ranges and ^, grouping,
// * + ? {m} {m,} {m,n}, '.', # comments, newlines only inside parentheses or after '|') and
// says whether a sentence is in the language of a start rule, by set-of-positions matching
// with memoised rule references. It exists to check generated grammars independently of the
// grammar engine; it is not fast and not meant to be.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lifeline::toolcall::testing {

class GbnfGrammar {
 public:
  // Parses `text`; on failure returns false and sets *error (with the byte offset).
  bool Parse(std::string_view text, std::string* error);
  bool Accepts(std::string_view sentence, const std::string& start = "root") const;
  // Rule names referenced but not defined ("" if none).
  std::string FirstUndefinedReference() const;
  size_t rule_count() const { return rules_.size(); }

  struct Node {
    enum class Kind { kSeq, kAlt, kLit, kClass, kRef, kRepeat, kAny };
    Kind kind = Kind::kSeq;
    std::vector<Node> kids;
    std::string text;  // kLit: bytes; kRef: rule name
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool negated = false;
    int min = 0, max = -1;  // kRepeat; max -1 = unbounded
  };

 private:
  std::map<std::string, Node> rules_;
};

}  // namespace lifeline::toolcall::testing
