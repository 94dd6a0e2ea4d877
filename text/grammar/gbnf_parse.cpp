// GBNF text -> GbnfAst (llama.cpp's dialect; see grammar.h). Recursive descent over the bytes,
// every node stamped with its line and column so that compile errors can point at the source.
#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "text/grammar/gbnf_ast.h"

namespace lifeline::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

std::string Printable(char c) {
  if (c >= 0x20 && c < 0x7F) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<unsigned char>(c));
  return buf;
}

class Parser {
 public:
  Parser(std::string_view src, const GrammarLimits& limits) : src_(src), limits_(limits) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<GbnfAst> Run() {
    SkipSpace(true);
    while (ok() && !AtEnd()) {
      ParseRule();
      SkipSpace(true);
    }
    if (!ok()) return status_;
    for (size_t r = 0; r < ast_.rule_names.size(); ++r) {
      if (ast_.rule_body[r] < 0) {
        return InvalidArgument(Where(ast_.rule_ref_line[r], ast_.rule_ref_col[r]) +
                               "undefined rule '" + ast_.rule_names[r] + "'");
      }
    }
    return std::move(ast_);
  }

 private:
  bool ok() const { return status_.ok(); }
  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  void LineCol(size_t at, int32_t* line, int32_t* col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    size_t l = static_cast<size_t>(it - line_starts_.begin());  // 1-based
    *line = static_cast<int32_t>(l);
    *col = static_cast<int32_t>(at - line_starts_[l - 1] + 1);
  }
  static std::string Where(int32_t line, int32_t col) {
    return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
  }
  void Fail(const std::string& msg, size_t at) {
    if (!ok()) return;
    int32_t line, col;
    LineCol(at, &line, &col);
    status_ = InvalidArgument(Where(line, col) + msg);
  }
  void Fail(const std::string& msg) { Fail(msg, pos_); }
  void Exhausted(const std::string& what, int64_t limit) { Exhausted(what, limit, pos_); }
  void Exhausted(const std::string& what, int64_t limit, size_t at) {
    if (!ok()) return;
    int32_t line, col;
    LineCol(at, &line, &col);
    status_ = ResourceExhausted(Where(line, col) + "grammar has more than " +
                                std::to_string(limit) + " " + what);
  }
  std::string Found() const { return AtEnd() ? "end of input" : Printable(Peek()); }

  int32_t NewNode(AstKind kind, size_t at) {
    if (static_cast<int64_t>(ast_.nodes.size()) >= limits_.max_elements) {
      Exhausted("elements (max_elements)", limits_.max_elements);
      return -1;
    }
    AstNode n;
    n.kind = kind;
    LineCol(at, &n.line, &n.col);
    ast_.nodes.push_back(std::move(n));
    return static_cast<int32_t>(ast_.nodes.size() - 1);
  }

  // Spaces, tabs, comments; newlines only when newline_ok (inside parentheses, after `|`).
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  int32_t RuleId(std::string_view name, size_t at) {
    auto it = rule_ids_.find(std::string(name));
    if (it != rule_ids_.end()) return it->second;
    if (static_cast<int64_t>(ast_.rule_names.size()) >= limits_.max_rules) {
      Exhausted("rules (max_rules)", limits_.max_rules, at);
      return -1;
    }
    int32_t id = static_cast<int32_t>(ast_.rule_names.size());
    rule_ids_.emplace(std::string(name), id);
    ast_.rule_names.emplace_back(name);
    ast_.rule_body.push_back(-1);
    int32_t line, col;
    LineCol(at, &line, &col);
    ast_.rule_ref_line.push_back(line);
    ast_.rule_ref_col.push_back(col);
    ast_.rule_def_line.push_back(0);
    ast_.rule_def_col.push_back(0);
    return id;
  }

  void ParseRule() {
    size_t start = pos_;
    while (!AtEnd() && IsWordChar(Peek())) ++pos_;
    if (pos_ == start) return Fail("expected a rule name, found " + Found());
    std::string_view name = src_.substr(start, pos_ - start);
    SkipSpace(false);
    if (src_.substr(pos_, 3) != "::=")
      return Fail("expected '::=' after rule name '" + std::string(name) + "', found " + Found());
    pos_ += 3;
    int32_t id = RuleId(name, start);
    if (!ok()) return;
    if (ast_.rule_body[id] >= 0) return Fail("rule '" + std::string(name) + "' is defined twice", start);
    SkipSpace(true);
    int32_t body = ParseAlternates(false, 0);
    if (!ok()) return;
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r')
      return Fail("expected an item, '|' or the end of the line, found " + Found());
    ast_.rule_body[id] = body;
    LineCol(start, &ast_.rule_def_line[id], &ast_.rule_def_col[id]);
  }

  // After a top-level sequence stopped at a newline: does the rule continue with `|` on a later
  // line? Consumes the blank space only when it does.
  bool ContinuesOnNextLine() {
    size_t save = pos_;
    SkipSpace(true);
    if (Peek() == '|') return true;
    pos_ = save;
    return false;
  }

  int32_t ParseAlternates(bool nested, int depth) {
    size_t at = pos_;
    std::vector<int32_t> seqs;
    seqs.push_back(ParseSequence(nested, depth));
    while (ok()) {
      if (Peek() == '|' || (!nested && (Peek() == '\n' || Peek() == '\r') && ContinuesOnNextLine())) {
        if (++alternatives_ > limits_.max_alternatives) {
          Exhausted("alternatives (max_alternatives)", limits_.max_alternatives);
          return -1;
        }
        ++pos_;
        SkipSpace(true);
        seqs.push_back(ParseSequence(nested, depth));
      } else {
        break;
      }
    }
    if (!ok()) return -1;
    if (seqs.size() == 1) return seqs[0];
    int32_t n = NewNode(AstKind::kAlt, at);
    if (n >= 0) ast_.nodes[n].kids = std::move(seqs);
    return n;
  }

  int32_t ParseSequence(bool nested, int depth) {
    size_t at = pos_;
    std::vector<int32_t> items;
    while (ok() && !AtEnd()) {
      char c = Peek();
      size_t item_at = pos_;
      int32_t item = -1;
      if (c == '"') {
        item = ParseLiteral();
      } else if (c == '[') {
        item = ParseClass();
      } else if (IsWordChar(c)) {
        while (!AtEnd() && IsWordChar(Peek())) ++pos_;
        int32_t rule = RuleId(src_.substr(item_at, pos_ - item_at), item_at);
        if (rule < 0) return -1;
        item = NewNode(AstKind::kRef, item_at);
        if (item >= 0) ast_.nodes[item].ref = rule;
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          Exhausted("nested parentheses (max_nesting)", limits_.max_nesting);
          return -1;
        }
        ++pos_;
        SkipSpace(true);
        item = ParseAlternates(true, depth + 1);
        if (!ok()) return -1;
        if (Peek() != ')') {
          Fail("expected ')' to close the '(' at " + LineColText(item_at) + ", found " + Found());
          return -1;
        }
        ++pos_;
      } else if (c == '.') {
        ++pos_;
        item = NewNode(AstKind::kClass, item_at);
        if (item >= 0) ast_.nodes[item].ranges = NormalizeRanges({{0, kMaxCodePoint}});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) {
          Fail(std::string("expected an item before '") + c + "'");
          return -1;
        }
        // Stacked operators (x*?+...) nest syntax nodes; a handful is plenty, and the cap keeps
        // the compiler's recursion shallow on hostile input.
        int stacked = 0;
        for (int32_t k = items.back(); ast_.nodes[k].kind == AstKind::kRepeat;
             k = ast_.nodes[k].kids[0]) {
          ++stacked;
        }
        if (stacked >= 4) {
          Fail(std::string("too many repetition operators on one item (at most 4)"));
          return -1;
        }
        items.back() = ParsePostfix(items.back());
        if (!ok()) return -1;
        SkipSpace(nested);
        continue;
      } else if (c == '<' || c == '!') {
        Fail("token references are not supported (the grammar knows no vocabulary)");
        return -1;
      } else {
        break;
      }
      if (!ok() || item < 0) return -1;
      items.push_back(item);
      SkipSpace(nested);
    }
    if (!ok()) return -1;
    if (items.size() == 1) return items[0];
    int32_t n = NewNode(items.empty() ? AstKind::kEmpty : AstKind::kSeq, at);
    if (n >= 0) ast_.nodes[n].kids = std::move(items);
    return n;
  }

  std::string LineColText(size_t at) const {
    int32_t line, col;
    LineCol(at, &line, &col);
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }

  bool ParseInt(int64_t* out) {
    size_t start = pos_;
    int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = std::min<int64_t>(v * 10 + (Peek() - '0'), int64_t{1} << 40);
      ++pos_;
    }
    if (pos_ == start) {
      Fail("expected a number, found " + Found());
      return false;
    }
    *out = v;
    return true;
  }

  int32_t ParsePostfix(int32_t item) {
    size_t at = pos_;
    char c = Peek();
    int64_t min = 0, max = -1;
    ++pos_;
    if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else if (c == '{') {
      SkipSpace(false);
      if (!ParseInt(&min)) return -1;
      SkipSpace(false);
      max = min;
      if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        max = -1;
        if (Peek() != '}' && !ParseInt(&max)) return -1;
        SkipSpace(false);
      }
      if (Peek() != '}') {
        Fail("expected '}' to close the repetition, found " + Found());
        return -1;
      }
      ++pos_;
      if (min > limits_.max_repetition || max > limits_.max_repetition) {
        int32_t line, col;
        LineCol(at, &line, &col);
        status_ = ResourceExhausted(Where(line, col) + "repetition count above " +
                                    std::to_string(limits_.max_repetition) + " (max_repetition)");
        return -1;
      }
      if (max >= 0 && max < min) {
        Fail("repetition {" + std::to_string(min) + "," + std::to_string(max) +
                 "}: expected the maximum to be at least the minimum",
             at);
        return -1;
      }
    }
    int32_t n = NewNode(AstKind::kRepeat, at);
    if (n < 0) return -1;
    AstNode& node = ast_.nodes[n];
    node.kids = {item};
    node.min = static_cast<int32_t>(min);
    node.max = static_cast<int32_t>(max);
    return n;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  bool ParseChar(uint32_t* cp) {
    size_t at = pos_;
    if (AtEnd()) {
      Fail("unexpected end of input");
      return false;
    }
    unsigned char c = static_cast<unsigned char>(Peek());
    if (c == '\\') {
      char e = Peek(1);
      int hex = 0;
      switch (e) {
        case 'n': *cp = '\n'; pos_ += 2; return true;
        case 'r': *cp = '\r'; pos_ += 2; return true;
        case 't': *cp = '\t'; pos_ += 2; return true;
        case '\\': case '"': case '[': case ']':
          *cp = static_cast<unsigned char>(e);
          pos_ += 2;
          return true;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
          Fail("unknown escape '\\" + std::string(e ? 1 : 0, e) +
               "' (expected one of \\n \\r \\t \\\\ \\\" \\[ \\] \\x \\u \\U)");
          return false;
      }
      pos_ += 2;
      uint32_t v = 0;
      for (int i = 0; i < hex; ++i) {
        char h = Peek();
        int d = (h >= '0' && h <= '9') ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) {
          Fail("expected " + std::to_string(hex) + " hex digits after '\\" + std::string(1, e) +
               "', found " + Found());
          return false;
        }
        v = v * 16 + static_cast<uint32_t>(d);
        ++pos_;
      }
      if (v > kMaxCodePoint) {
        Fail("code point above U+10FFFF", at);
        return false;
      }
      *cp = v;
      return true;
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + len > src_.size()) {
      Fail("invalid UTF-8");
      return false;
    }
    uint32_t v = len == 1 ? c : (c & (0x7F >> len));
    for (int i = 1; i < len; ++i) {
      unsigned char b = static_cast<unsigned char>(src_[pos_ + i]);
      if ((b & 0xC0) != 0x80) {
        Fail("invalid UTF-8");
        return false;
      }
      v = (v << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[len] || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      Fail("invalid UTF-8");
      return false;
    }
    pos_ += len;
    *cp = v;
    return true;
  }

  int32_t ParseLiteral() {
    size_t at = pos_;
    ++pos_;
    std::vector<CpRange> cps;
    while (true) {
      if (AtEnd()) {
        Fail("expected '\"' to close the string started at " + LineColText(at));
        return -1;
      }
      if (Peek() == '"') break;
      size_t char_at = pos_;
      uint32_t cp;
      if (!ParseChar(&cp)) return -1;
      if (++literal_chars_ + static_cast<int64_t>(ast_.nodes.size()) > limits_.max_elements) {
        Exhausted("elements (max_elements)", limits_.max_elements, char_at);
        return -1;
      }
      cps.push_back({cp, cp});
    }
    ++pos_;
    int32_t n = NewNode(cps.empty() ? AstKind::kEmpty : AstKind::kLiteral, at);
    if (n >= 0) ast_.nodes[n].ranges = std::move(cps);
    return n;
  }

  int32_t ParseClass() {
    size_t at = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CpRange> ranges;
    while (true) {
      if (AtEnd()) {
        Fail("expected ']' to close the class started at " + LineColText(at));
        return -1;
      }
      if (Peek() == ']') break;
      size_t char_at = pos_;
      uint32_t lo, hi;
      if (!ParseChar(&lo)) return -1;
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        if (!ParseChar(&hi)) return -1;
        if (hi < lo) {
          Fail("character range with its end below its start", char_at);
          return -1;
        }
      }
      if (++literal_chars_ + static_cast<int64_t>(ast_.nodes.size()) > limits_.max_elements) {
        Exhausted("elements (max_elements)", limits_.max_elements, char_at);
        return -1;
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    ranges = NormalizeRanges(std::move(ranges));
    if (negated) ranges = ComplementRanges(ranges);
    int32_t n = NewNode(AstKind::kClass, at);
    if (n >= 0) ast_.nodes[n].ranges = std::move(ranges);
    return n;
  }

  std::string_view src_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  GbnfAst ast_;
  std::unordered_map<std::string, int32_t> rule_ids_;
  int64_t alternatives_ = 0;
  int64_t literal_chars_ = 0;
  Status status_;
};

}  // namespace

std::vector<CpRange> NormalizeRanges(std::vector<CpRange> ranges) {
  std::vector<CpRange> split;
  for (const CpRange& r : ranges) {
    // Surrogates are not characters: valid UTF-8 never encodes them.
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      split.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) split.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) split.push_back({0xE000, r.hi});
  }
  std::sort(split.begin(), split.end(),
            [](const CpRange& a, const CpRange& b) { return a.lo < b.lo; });
  std::vector<CpRange> out;
  for (const CpRange& r : split) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CpRange> ComplementRanges(const std::vector<CpRange>& ranges) {
  std::vector<CpRange> out;
  uint32_t next = 0;
  for (const CpRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return NormalizeRanges(std::move(out));
}

Result<GbnfAst> ParseGbnfAst(std::string_view text, const GrammarLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_text_bytes) {
    return ResourceExhausted("grammar text is " + std::to_string(text.size()) +
                             " bytes, above the limit of " +
                             std::to_string(limits.max_text_bytes) + " (max_text_bytes)");
  }
  return Parser(text, limits).Run();
}

}  // namespace lifeline::grammar
