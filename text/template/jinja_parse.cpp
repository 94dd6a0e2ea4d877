// Lexer and recursive-descent parser for the Jinja2 subset of jinja_ast.h. Whitespace rules
// follow jinja2's lexer: `{%-`/`-%}` strip all whitespace on that side, trim_blocks drops one
// "\n" after a block or comment tag, lstrip_blocks drops spaces/tabs between a line start and
// a block or comment tag (`{%+` keeps them), expression tags are never stripped implicitly.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "text/template/jinja_ast.h"
#include "text/template/jinja_utf8.h"

namespace lifeline::jinja {
namespace {

enum class Tok : uint8_t {
  kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof
};

struct Token {
  Tok kind;
  std::string text;  // text data, name, unescaped string, number spelling or operator
  int line;
};

Status SyntaxError(int line, const std::string& what) {
  return InvalidArgument("template line " + std::to_string(line) + ": " + what);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  Lexer(std::string_view src, const ParseOptions& o) : src_(src), opt_(o) {}

  Result<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t open = FindOpen(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      if (open == src_.size()) {
        Emit(Tok::kText, std::move(text));
        AdvanceTo(open);
        break;
      }
      const char kind = src_[open + 1];  // '{' '%' '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool only_blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) {
            if (!IsSpace(text[i])) only_blank = false;
          }
          if (only_blank) text.resize(l_pos);
        }
      }
      Emit(Tok::kText, std::move(text));
      AdvanceTo(open);
      size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", p);
        if (end == std::string_view::npos) return SyntaxError(line_, "unclosed comment");
        const bool strip = end > p && src_[end - 1] == '-';
        AdvanceTo(end + 2);
        line_starting = AfterClose(strip, /*plus=*/end > p && src_[end - 1] == '+', true);
        continue;
      }
      AdvanceTo(p);
      if (kind == '%' && IsRawTag()) {
        LL_RETURN_IF_ERROR(LexRaw(&line_starting));
        continue;
      }
      tokens_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", line_});
      LL_ASSIGN_OR_RETURN(line_starting, LexTag(kind == '{'));
    }
    tokens_.push_back({Tok::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  void AdvanceTo(size_t p) {
    for (size_t i = pos_; i < p && i < src_.size(); ++i) {
      if (src_[i] == '\n') ++line_;
    }
    pos_ = p;
  }

  void Emit(Tok k, std::string text) {
    if (k == Tok::kText && text.empty()) return;
    tokens_.push_back({k, std::move(text), line_});
  }

  // After a closing delimiter at pos_: `-` eats all whitespace, trim_blocks one newline
  // (block and comment tags only). Returns whether what was consumed ends a line.
  bool AfterClose(bool minus, bool plus, bool is_block) {
    if (minus) {
      size_t p = pos_;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      const bool nl = p > pos_ && src_[p - 1] == '\n';
      AdvanceTo(p);
      return nl;
    }
    if (!plus && is_block && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      AdvanceTo(pos_ + 1);
      return true;
    }
    return false;
  }

  void SkipSpace() {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    AdvanceTo(p);
  }

  bool IsRawTag() {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.substr(p, 3) != "raw") return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return src_.substr(p, 2) == "%}" || src_.substr(p, 3) == "-%}";
  }

  Status LexRaw(bool* line_starting) {
    size_t p = src_.find("%}", pos_);
    const bool minus = src_[p - 1] == '-';
    AdvanceTo(p + 2);
    AfterClose(minus, false, true);
    // Find {% endraw %} (with optional whitespace control).
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t q = i + 2;
      const bool lminus = q < src_.size() && src_[q] == '-';
      if (lminus || (q < src_.size() && src_[q] == '+')) ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.substr(q, 6) != "endraw") continue;
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      const bool rminus = q < src_.size() && src_[q] == '-';
      if (rminus) ++q;
      if (src_.substr(q, 2) != "%}") continue;
      std::string text(src_.substr(pos_, i - pos_));
      if (lminus) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      Emit(Tok::kText, std::move(text));
      AdvanceTo(q + 2);
      *line_starting = AfterClose(rminus, false, true);
      return Status::Ok();
    }
    return SyntaxError(line_, "{% raw %} without {% endraw %}");
  }

  Result<bool> LexTag(bool is_var) {
    int depth = 0;  // brackets open inside the tag: `}}` closes a variable only at depth 0
    const int tag_line = line_;
    while (true) {
      SkipSpace();
      if (pos_ >= src_.size()) {
        return SyntaxError(tag_line, is_var ? "unclosed '{{'" : "unclosed '{%'");
      }
      std::string_view rest = src_.substr(pos_);
      auto closes = [&](std::string_view close) -> int {
        if (rest.substr(0, close.size()) == close) return 0;
        if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, close.size()) == close) return 1;
        return -1;
      };
      const int c = closes(is_var ? "}}" : "%}");
      if (c >= 0 && (!is_var || depth == 0)) {
        const bool minus = c == 1 && rest[0] == '-';
        const bool plus = c == 1 && rest[0] == '+';
        tokens_.push_back({is_var ? Tok::kVarEnd : Tok::kBlockEnd, "", line_});
        AdvanceTo(pos_ + 2 + static_cast<size_t>(c));
        return AfterClose(minus, plus, !is_var);
      }
      const char ch = rest[0];
      if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
        size_t n = 1;
        while (n < rest.size() &&
               (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) {
          ++n;
        }
        tokens_.push_back({Tok::kName, std::string(rest.substr(0, n)), line_});
        AdvanceTo(pos_ + n);
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(ch))) {
        size_t n = 0;
        auto digits = [&]() {
          while (n < rest.size() &&
                 (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) {
            ++n;
          }
        };
        digits();
        bool is_float = false;
        if (n + 1 < rest.size() && rest[n] == '.' &&
            std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
          is_float = true;
          ++n;
          digits();
        }
        if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
          size_t m = n + 1;
          if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
          if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
            is_float = true;
            n = m;
            digits();
          }
        }
        std::string num;
        for (char d : rest.substr(0, n)) {
          if (d != '_') num.push_back(d);
        }
        tokens_.push_back({is_float ? Tok::kFloat : Tok::kInt, num, line_});
        AdvanceTo(pos_ + n);
        continue;
      }
      if (ch == '\'' || ch == '"') {
        std::string s;
        size_t i = 1;
        bool closed = false;
        while (i < rest.size()) {
          const char x = rest[i];
          if (x == ch) {
            closed = true;
            break;
          }
          if (x == '\\' && i + 1 < rest.size()) {
            LL_RETURN_IF_ERROR(Unescape(rest, &i, &s));
            continue;
          }
          s.push_back(x);
          ++i;
        }
        if (!closed) return SyntaxError(line_, "unterminated string literal");
        tokens_.push_back({Tok::kString, std::move(s), line_});
        AdvanceTo(pos_ + i + 1);
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                   "~",  "<",  ">",  "=",  "(",  ")",  "[", "]", "{", "}", ",",
                                   ".",  ":",  "|"};
      bool matched = false;
      for (const char* op : kOps) {
        const size_t len = std::strlen(op);
        if (rest.substr(0, len) == op) {
          if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
          if (op[0] == ')' || op[0] == ']' || op[0] == '}') --depth;
          tokens_.push_back({Tok::kOp, op, line_});
          AdvanceTo(pos_ + len);
          matched = true;
          break;
        }
      }
      if (!matched) {
        return SyntaxError(line_, std::string("unexpected character '") + ch + "'");
      }
    }
  }

  // Python string escapes, as jinja2 decodes literals ("unicode-escape").
  Status Unescape(std::string_view rest, size_t* i, std::string* s) {
    const char e = rest[*i + 1];
    *i += 2;
    auto hex = [&](int n) -> Result<uint32_t> {
      if (*i + static_cast<size_t>(n) > rest.size()) return SyntaxError(line_, "truncated \\x/\\u escape");
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        const char h = rest[*i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          return SyntaxError(line_, "bad \\x/\\u escape in a string literal");
        }
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                 ? h - '0'
                                                 : (std::tolower(h) - 'a' + 10));
      }
      *i += static_cast<size_t>(n);
      return v;
    };
    switch (e) {
      case 'n': s->push_back('\n'); break;
      case 't': s->push_back('\t'); break;
      case 'r': s->push_back('\r'); break;
      case '\\': s->push_back('\\'); break;
      case '\'': s->push_back('\''); break;
      case '"': s->push_back('"'); break;
      case 'a': s->push_back('\a'); break;
      case 'b': s->push_back('\b'); break;
      case 'f': s->push_back('\f'); break;
      case 'v': s->push_back('\v'); break;
      case '\n': break;  // line continuation
      case 'x': { LL_ASSIGN_OR_RETURN(uint32_t v, hex(2)); AppendUtf8(v, s); break; }
      case 'u': { LL_ASSIGN_OR_RETURN(uint32_t v, hex(4)); AppendUtf8(v, s); break; }
      case 'U': {
        LL_ASSIGN_OR_RETURN(uint32_t v, hex(8));
        if (v > 0x10ffff) return SyntaxError(line_, "\\U escape above U+10FFFF");
        AppendUtf8(v, s);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && *i < rest.size() && rest[*i] >= '0' && rest[*i] <= '7'; ++k) {
            v = v * 8 + static_cast<uint32_t>(rest[(*i)++] - '0');
          }
          AppendUtf8(v, s);
        } else {  // unknown escape: Python keeps the backslash
          s->push_back('\\');
          s->push_back(e);
        }
    }
    return Status::Ok();
  }

  std::string_view src_;
  ParseOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Result<std::shared_ptr<const ProgramNode>> Run() {
    auto prog = std::make_shared<ProgramNode>();
    std::string end;
    LL_RETURN_IF_ERROR(ParseBody({}, &prog->body, &end));
    return std::shared_ptr<const ProgramNode>(std::move(prog));
  }

 private:
  const Token& Peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& Next() { const Token& t = t_[i_]; if (i_ + 1 < t_.size()) ++i_; return t; }
  bool IsOp(const char* op, size_t k = 0) const { return Peek(k).kind == Tok::kOp && Peek(k).text == op; }
  bool IsName(const char* n, size_t k = 0) const { return Peek(k).kind == Tok::kName && Peek(k).text == n; }
  int Line() const { return Peek().line; }

  Status Expect(const char* op) {
    if (!IsOp(op)) return SyntaxError(Line(), std::string("expected '") + op + "', got " + Describe(Peek()));
    Next();
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Peek().kind != Tok::kBlockEnd) return SyntaxError(Line(), "expected '%}', got " + Describe(Peek()));
    Next();
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Peek().kind != Tok::kName) return SyntaxError(Line(), "expected a name, got " + Describe(Peek()));
    return Next().text;
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case Tok::kEof: return "end of template";
      case Tok::kBlockEnd: return "'%}'";
      case Tok::kVarEnd: return "'}}'";
      case Tok::kBlockBegin: return "'{%'";
      case Tok::kVarBegin: return "'{{'";
      case Tok::kText: return "text";
      case Tok::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }

  struct DepthGuard {
    int* d;
    explicit DepthGuard(int* depth) : d(depth) { ++*d; }
    ~DepthGuard() { --*d; }
  };
  Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) {
      return SyntaxError(Line(), "nested deeper than " + std::to_string(kMaxParseDepth));
    }
    return Status::Ok();
  }

  // Parses statements until a block tag named in `ends` (consumed up to its name; the
  // caller reads the rest of that tag). `*end` gets the tag name ("" at end of template).
  Status ParseBody(std::initializer_list<const char*> ends, Body* body, std::string* end) {
    DepthGuard g(&depth_);
    LL_RETURN_IF_ERROR(CheckDepth());
    while (true) {
      const Token& t = Peek();
      if (t.kind == Tok::kEof) {
        if (ends.size() != 0) {
          return SyntaxError(t.line, std::string("unexpected end of template, expected '") +
                                         *ends.begin() + "'");
        }
        *end = "";
        return Status::Ok();
      }
      if (t.kind == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = t.text;
        body->push_back(std::move(s));
        Next();
        continue;
      }
      if (t.kind == Tok::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = t.line;
        LL_ASSIGN_OR_RETURN(s->expr, ParseTupleExpr());
        if (Peek().kind != Tok::kVarEnd) {
          return SyntaxError(Line(), "expected '}}', got " + Describe(Peek()));
        }
        Next();
        body->push_back(std::move(s));
        continue;
      }
      if (t.kind != Tok::kBlockBegin) return SyntaxError(t.line, "unexpected " + Describe(t));
      Next();
      if (Peek().kind != Tok::kName) return SyntaxError(Line(), "expected a tag name, got " + Describe(Peek()));
      const std::string tag = Peek().text;
      for (const char* e : ends) {
        if (tag == e) {
          Next();
          *end = tag;
          return Status::Ok();
        }
      }
      LL_ASSIGN_OR_RETURN(StmtPtr s, ParseTag(tag));
      if (s) body->push_back(std::move(s));
    }
  }

  Result<StmtPtr> ParseTag(const std::string& tag) {
    const int line = Line();
    Next();  // the tag name
    auto s = std::make_unique<Stmt>();
    s->line = line;
    std::string end;
    if (tag == "if") {
      s->kind = StmtKind::kIf;
      LL_ASSIGN_OR_RETURN(ExprPtr cond, ParseExpr());
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      while (true) {
        Body b;
        LL_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &b, &end));
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "endif") break;
        if (end == "else") {
          LL_RETURN_IF_ERROR(ExpectBlockEnd());
          Body eb;
          LL_RETURN_IF_ERROR(ParseBody({"endif"}, &eb, &end));
          s->branches.emplace_back(nullptr, std::move(eb));
          break;
        }
        LL_ASSIGN_OR_RETURN(cond, ParseExpr());
        LL_RETURN_IF_ERROR(ExpectBlockEnd());
      }
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "for") {
      s->kind = StmtKind::kFor;
      while (true) {
        LL_ASSIGN_OR_RETURN(std::string n, ExpectName());
        s->targets.push_back(std::move(n));
        if (!IsOp(",")) break;
        Next();
      }
      if (!IsName("in")) return SyntaxError(Line(), "expected 'in' in for loop, got " + Describe(Peek()));
      Next();
      LL_ASSIGN_OR_RETURN(s->expr, ParseOr(/*no_cond=*/true));
      if (IsOp(",")) {  // `for x in a, b`: a tuple
        auto l = std::make_unique<Expr>();
        l->kind = ExprKind::kList;
        l->line = line;
        l->args.push_back(std::move(s->expr));
        while (IsOp(",")) {
          Next();
          LL_ASSIGN_OR_RETURN(ExprPtr e, ParseOr(true));
          l->args.push_back(std::move(e));
        }
        s->expr = std::move(l);
      }
      if (IsName("if")) {
        Next();
        LL_ASSIGN_OR_RETURN(s->cond, ParseOr(true));
      }
      if (IsName("recursive")) return SyntaxError(Line(), "recursive for loops are not supported");
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      const int64_t refs_before = loop_refs_;
      LL_RETURN_IF_ERROR(ParseBody({"else", "endfor"}, &s->body, &end));
      // Any `loop` in the body (nested loops' own included) keeps the object: exact enough.
      s->uses_loop = loop_refs_ != refs_before;
      if (end == "else") {
        LL_RETURN_IF_ERROR(ExpectBlockEnd());
        LL_RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body, &end));
      }
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "set") {
      LL_ASSIGN_OR_RETURN(std::string n, ExpectName());
      s->targets.push_back(std::move(n));
      if (IsOp(".")) {
        Next();
        LL_ASSIGN_OR_RETURN(s->attr, ExpectName());
      } else {
        while (IsOp(",")) {
          Next();
          LL_ASSIGN_OR_RETURN(std::string m, ExpectName());
          s->targets.push_back(std::move(m));
        }
      }
      if (Peek().kind == Tok::kBlockEnd || IsOp("|")) {
        if (s->targets.size() != 1 || !s->attr.empty()) {
          return SyntaxError(line, "a block set assigns one plain name");
        }
        s->kind = StmtKind::kSetBlock;
        while (IsOp("|")) {
          Next();
          LL_ASSIGN_OR_RETURN(ExprPtr f, ParseFilterCall(nullptr));
          s->filters.push_back(std::move(f));
        }
        LL_RETURN_IF_ERROR(ExpectBlockEnd());
        LL_RETURN_IF_ERROR(ParseBody({"endset"}, &s->body, &end));
        LL_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      s->kind = StmtKind::kSet;
      LL_RETURN_IF_ERROR(Expect("="));
      LL_ASSIGN_OR_RETURN(s->expr, ParseTupleExpr());
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      s->macro = std::make_unique<MacroNode>();
      s->macro->line = line;
      LL_ASSIGN_OR_RETURN(s->macro->name, ExpectName());
      LL_RETURN_IF_ERROR(Expect("("));
      while (!IsOp(")")) {
        LL_ASSIGN_OR_RETURN(std::string p, ExpectName());
        s->macro->params.push_back(std::move(p));
        ExprPtr def;
        if (IsOp("=")) {
          Next();
          LL_ASSIGN_OR_RETURN(def, ParseExpr());
        }
        s->macro->defaults.push_back(std::move(def));
        if (!IsOp(",")) break;
        Next();
      }
      LL_RETURN_IF_ERROR(Expect(")"));
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      LL_RETURN_IF_ERROR(ParseBody({"endmacro"}, &s->macro->body, &end));
      if (Peek().kind == Tok::kName) Next();  // {% endmacro name %}
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "call") {
      s->kind = StmtKind::kCallBlock;
      LL_ASSIGN_OR_RETURN(s->expr, ParseExpr());
      if (s->expr->kind != ExprKind::kCall) return SyntaxError(line, "{% call %} needs a macro call");
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      LL_RETURN_IF_ERROR(ParseBody({"endcall"}, &s->body, &end));
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "filter") {
      s->kind = StmtKind::kFilterBlock;
      while (true) {
        LL_ASSIGN_OR_RETURN(ExprPtr f, ParseFilterCall(nullptr));
        s->filters.push_back(std::move(f));
        if (!IsOp("|")) break;
        Next();
      }
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      LL_RETURN_IF_ERROR(ParseBody({"endfilter"}, &s->body, &end));
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "generation") {  // Hugging Face's AssistantTracker: renders its body
      s->kind = StmtKind::kBlock;
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      LL_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &s->body, &end));
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      LL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
        tag == "block") {
      return SyntaxError(line, "'" + tag + "' is not available: a chat template is one file");
    }
    return SyntaxError(line, "unknown tag '" + tag + "'");
  }

  ExprPtr Make(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Records the node's height from its children's and refuses trees taller than
  // kMaxExprHeight.
  Status Seal(Expr* e) const {
    int h = 0;
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) {
      if (c != nullptr) h = std::max(h, c->height);
    }
    for (const ExprPtr& c : e->args) h = std::max(h, c->height);
    for (const auto& kv : e->kwargs) h = std::max(h, kv.second->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) {
      return SyntaxError(e->line, "expression nested deeper than " + std::to_string(kMaxExprHeight));
    }
    return Status::Ok();
  }

  // expr (, expr)*: a bare tuple where jinja2 allows one ({{ a, b }}, {% set x = a, b %}).
  Result<ExprPtr> ParseTupleExpr() {
    LL_ASSIGN_OR_RETURN(ExprPtr first, ParseExpr());
    if (!IsOp(",")) return first;
    auto l = Make(ExprKind::kList, first->line);
    l->name = "tuple";
    l->args.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().kind == Tok::kBlockEnd || Peek().kind == Tok::kVarEnd) break;
      LL_ASSIGN_OR_RETURN(ExprPtr e, ParseExpr());
      l->args.push_back(std::move(e));
    }
    LL_RETURN_IF_ERROR(Seal(l.get()));
    return l;
  }

  Result<ExprPtr> ParseExpr() {
    DepthGuard g(&depth_);
    LL_RETURN_IF_ERROR(CheckDepth());
    LL_ASSIGN_OR_RETURN(ExprPtr e, ParseOr(false));
    while (IsName("if")) {
      const int line = Line();
      Next();
      LL_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr(false));
      auto c = Make(ExprKind::kCond, line);
      c->a = std::move(e);
      c->b = std::move(cond);
      if (IsName("else")) {
        Next();
        LL_ASSIGN_OR_RETURN(c->c, ParseExpr());
      }
      LL_RETURN_IF_ERROR(Seal(c.get()));
      e = std::move(c);
    }
    return e;
  }

  // One left-associative level: operand (op operand)*, where `op` matches the next token and
  // says which node kind and operator name it makes (false: the level ends).
  template <typename Operand, typename Op>
  Result<ExprPtr> ParseLeftAssoc(Operand operand, Op op) {
    LL_ASSIGN_OR_RETURN(ExprPtr e, (this->*operand)());
    ExprKind kind;
    std::string name;
    while (op(&kind, &name)) {
      const int line = Line();
      Next();
      LL_ASSIGN_OR_RETURN(ExprPtr r, (this->*operand)());
      auto n = Make(kind, line);
      n->name = std::move(name);
      n->a = std::move(e);
      n->b = std::move(r);
      LL_RETURN_IF_ERROR(Seal(n.get()));
      e = std::move(n);
    }
    return e;
  }

  bool OpIs(std::initializer_list<const char*> ops, ExprKind k, ExprKind* kind, std::string* name) const {
    for (const char* o : ops) {
      if (IsOp(o)) {
        *kind = k;
        *name = o;
        return true;
      }
    }
    return false;
  }

  Result<ExprPtr> ParseOr(bool /*no_cond*/) {
    return ParseLeftAssoc(&Parser::ParseAnd, [this](ExprKind* k, std::string*) {
      *k = ExprKind::kOr;
      return IsName("or");
    });
  }

  Result<ExprPtr> ParseAnd() {
    return ParseLeftAssoc(&Parser::ParseNot, [this](ExprKind* k, std::string*) {
      *k = ExprKind::kAnd;
      return IsName("and");
    });
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard g(&depth_);
      LL_RETURN_IF_ERROR(CheckDepth());
      const int line = Line();
      Next();
      LL_ASSIGN_OR_RETURN(ExprPtr a, ParseNot());
      auto n = Make(ExprKind::kNot, line);
      n->a = std::move(a);
      LL_RETURN_IF_ERROR(Seal(n.get()));
      return n;
    }
    return ParseCompare();
  }

  // a < b <= c ...: one kCompare node, operands a then args, operators in ops (Python's
  // chain: a < b and b <= c, each operand evaluated once).
  Result<ExprPtr> ParseCompare() {
    LL_ASSIGN_OR_RETURN(ExprPtr e, ParseMath1());
    ExprPtr node;
    while (true) {
      std::string op;
      const int line = Line();
      if (Peek().kind == Tok::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
           Peek().text == ">" || Peek().text == "<=" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        break;
      }
      LL_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      if (!node) {
        node = Make(ExprKind::kCompare, line);
        node->a = std::move(e);
      }
      node->ops.push_back(std::move(op));
      node->args.push_back(std::move(r));
    }
    if (!node) return e;
    LL_RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }

  Result<ExprPtr> ParseMath1() {
    return ParseLeftAssoc(&Parser::ParseConcat, [this](ExprKind* k, std::string* n) {
      return OpIs({"+", "-"}, ExprKind::kBinary, k, n);
    });
  }

  Result<ExprPtr> ParseConcat() {
    return ParseLeftAssoc(&Parser::ParseMath2, [this](ExprKind* k, std::string* n) {
      return OpIs({"~"}, ExprKind::kConcat, k, n);
    });
  }

  Result<ExprPtr> ParseMath2() {
    return ParseLeftAssoc(&Parser::ParseMath2Operand, [this](ExprKind* k, std::string* n) {
      return OpIs({"*", "/", "//", "%"}, ExprKind::kBinary, k, n);
    });
  }
  Result<ExprPtr> ParseMath2Operand() { return ParsePow(); }

  Result<ExprPtr> ParsePow() {
    return ParseLeftAssoc(&Parser::ParsePowOperand, [this](ExprKind* k, std::string* n) {
      return OpIs({"**"}, ExprKind::kBinary, k, n);
    });
  }
  Result<ExprPtr> ParsePowOperand() { return ParseUnary(true); }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard g(&depth_);
    LL_RETURN_IF_ERROR(CheckDepth());
    const int line = Line();
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const bool neg = Next().text == "-";
      LL_ASSIGN_OR_RETURN(ExprPtr a, ParseUnary(false));
      node = Make(neg ? ExprKind::kNeg : ExprKind::kPos, line);
      node->a = std::move(a);
      LL_RETURN_IF_ERROR(Seal(node.get()));
    } else {
      LL_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    LL_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      LL_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    const int line = t.line;
    switch (t.kind) {
      case Tok::kName: {
        const std::string n = Next().text;
        auto e = Make(ExprKind::kLiteral, line);
        if (n == "true" || n == "True") e->value = Value(true);
        else if (n == "false" || n == "False") e->value = Value(false);
        else if (n == "none" || n == "None") e->value = Value(None{});
        else {
          e->kind = ExprKind::kName;
          e->name = n;
          if (n == "loop") ++loop_refs_;
        }
        return e;
      }
      case Tok::kString: {
        std::string s = Next().text;
        while (Peek().kind == Tok::kString) s += Next().text;  // adjacent literals join
        auto e = Make(ExprKind::kLiteral, line);
        e->value = Value(std::move(s));
        return e;
      }
      case Tok::kInt: {
        const std::string num = Next().text;
        auto e = Make(ExprKind::kLiteral, line);
        errno = 0;
        char* endp = nullptr;
        const long long v = std::strtoll(num.c_str(), &endp, 10);
        if (errno == ERANGE) return SyntaxError(line, "integer literal " + num + " out of range");
        e->value = Value(static_cast<int64_t>(v));
        return e;
      }
      case Tok::kFloat: {
        auto e = Make(ExprKind::kLiteral, line);
        e->value = Value(std::strtod(Next().text.c_str(), nullptr));
        return e;
      }
      case Tok::kOp: {
        if (t.text == "(") {
          Next();
          if (IsOp(")")) {
            Next();
            auto empty = Make(ExprKind::kList, line);
            empty->name = "tuple";
            return empty;
          }
          LL_ASSIGN_OR_RETURN(ExprPtr e, ParseExpr());
          if (IsOp(",")) {
            auto l = Make(ExprKind::kList, line);
            l->name = "tuple";
            l->args.push_back(std::move(e));
            while (IsOp(",")) {
              Next();
              if (IsOp(")")) break;
              LL_ASSIGN_OR_RETURN(ExprPtr x, ParseExpr());
              l->args.push_back(std::move(x));
            }
            LL_RETURN_IF_ERROR(Seal(l.get()));
            e = std::move(l);
          }
          LL_RETURN_IF_ERROR(Expect(")"));
          return e;
        }
        if (t.text == "[") {
          Next();
          auto l = Make(ExprKind::kList, line);
          while (!IsOp("]")) {
            LL_ASSIGN_OR_RETURN(ExprPtr x, ParseExpr());
            l->args.push_back(std::move(x));
            if (!IsOp(",")) break;
            Next();
          }
          LL_RETURN_IF_ERROR(Expect("]"));
          LL_RETURN_IF_ERROR(Seal(l.get()));
          return l;
        }
        if (t.text == "{") {
          Next();
          auto d = Make(ExprKind::kDict, line);
          while (!IsOp("}")) {
            LL_ASSIGN_OR_RETURN(ExprPtr k, ParseExpr());
            LL_RETURN_IF_ERROR(Expect(":"));
            LL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
            d->args.push_back(std::move(k));
            d->args.push_back(std::move(v));
            if (!IsOp(",")) break;
            Next();
          }
          LL_RETURN_IF_ERROR(Expect("}"));
          LL_RETURN_IF_ERROR(Seal(d.get()));
          return d;
        }
        break;
      }
      default: break;
    }
    return SyntaxError(line, "unexpected " + Describe(t) + " in an expression");
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      const int line = Line();
      if (IsOp(".")) {
        Next();
        auto n = Make(ExprKind::kGetAttr, line);
        if (Peek().kind == Tok::kName) {
          n->name = Next().text;
        } else if (Peek().kind == Tok::kInt) {  // x.0 is x[0]
          n->kind = ExprKind::kGetItem;
          auto idx = Make(ExprKind::kLiteral, line);
          idx->value = Value(static_cast<int64_t>(std::strtoll(Next().text.c_str(), nullptr, 10)));
          n->b = std::move(idx);
        } else {
          return SyntaxError(line, "expected an attribute name after '.', got " + Describe(Peek()));
        }
        n->a = std::move(node);
        LL_RETURN_IF_ERROR(Seal(n.get()));
        node = std::move(n);
      } else if (IsOp("[")) {
        Next();
        ExprPtr parts[3];
        int n_colons = 0;
        for (int k = 0; k < 3; ++k) {
          if (!IsOp(":") && !IsOp("]")) {
            LL_ASSIGN_OR_RETURN(parts[k], ParseExpr());
          }
          if (k < 2 && IsOp(":")) {
            Next();
            ++n_colons;
            continue;
          }
          break;
        }
        LL_RETURN_IF_ERROR(Expect("]"));
        if (n_colons == 0) {
          if (!parts[0]) return SyntaxError(line, "empty subscript");
          auto n = Make(ExprKind::kGetItem, line);
          n->a = std::move(node);
          n->b = std::move(parts[0]);
          LL_RETURN_IF_ERROR(Seal(n.get()));
        node = std::move(n);
        } else {
          auto n = Make(ExprKind::kSlice, line);
          n->a = std::move(node);
          n->b = std::move(parts[0]);
          n->c = std::move(parts[1]);
          n->d = std::move(parts[2]);
          LL_RETURN_IF_ERROR(Seal(n.get()));
        node = std::move(n);
        }
      } else if (IsOp("(")) {
        auto n = Make(ExprKind::kCall, line);
        n->a = std::move(node);
        LL_RETURN_IF_ERROR(ParseArgs(n.get()));
        LL_RETURN_IF_ERROR(Seal(n.get()));
        node = std::move(n);
      } else {
        return node;
      }
    }
  }

  // ( args, name=kwargs ) into e->args / e->kwargs.
  Status ParseArgs(Expr* e) {
    LL_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (Peek().kind == Tok::kName && IsOp("=", 1)) {
        std::string k = Next().text;
        Next();
        LL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
        e->kwargs.emplace_back(std::move(k), std::move(v));
      } else {
        if (!e->kwargs.empty()) return SyntaxError(Line(), "positional argument after a keyword argument");
        LL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
        e->args.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(")");
  }

  Result<ExprPtr> ParseFilterCall(ExprPtr subject) {
    const int line = Line();
    LL_ASSIGN_OR_RETURN(std::string name, ExpectName());
    auto f = Make(ExprKind::kFilter, line);
    f->name = std::move(name);
    f->a = std::move(subject);
    if (IsOp("(")) LL_RETURN_IF_ERROR(ParseArgs(f.get()));
    LL_RETURN_IF_ERROR(Seal(f.get()));
    return f;
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        Next();
        LL_ASSIGN_OR_RETURN(node, ParseFilterCall(std::move(node)));
        LL_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
      } else if (IsName("is")) {
        const int line = Line();
        Next();
        auto t = Make(ExprKind::kTest, line);
        if (IsName("not")) {
          Next();
          t->negated = true;
        }
        LL_ASSIGN_OR_RETURN(t->name, ExpectName());
        t->a = std::move(node);
        if (IsOp("(")) {
          LL_RETURN_IF_ERROR(ParseArgs(t.get()));
        } else {
          const Token& p = Peek();
          const bool arg_start =
              p.kind == Tok::kString || p.kind == Tok::kInt || p.kind == Tok::kFloat ||
              (p.kind == Tok::kName && p.text != "else" && p.text != "or" && p.text != "and" &&
               p.text != "if" && p.text != "in" && p.text != "not" && p.text != "is") ||
              (p.kind == Tok::kOp && (p.text == "[" || p.text == "{"));
          if (arg_start) {
            LL_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
            LL_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
            t->args.push_back(std::move(arg));
          }
        }
        LL_RETURN_IF_ERROR(Seal(t.get()));
        node = std::move(t);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int64_t loop_refs_ = 0;  // `loop` names parsed so far
};

}  // namespace

// jinja2 reads a template through str.splitlines() and joins the lines with "\n": every line
// break (\r\n, \r, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029) becomes "\n", and with
// keep_trailing_newline off (as Hugging Face leaves it) one final line break is dropped.
static std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(src[i]);
    if (c == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else if (c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
      out.push_back('\n');
    } else if (c == 0xc2 && i + 1 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x85) {
      out.push_back('\n');
      ++i;
    } else if (c == 0xe2 && i + 2 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(src[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(src[i + 2]) == 0xa9)) {
      out.push_back('\n');
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

Result<std::shared_ptr<const ProgramNode>> ParseProgram(std::string_view raw_source,
                                                         const ParseOptions& options) {
  const std::string source = NormalizeNewlines(raw_source);
  Lexer lexer(source, options);
  LL_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  Parser parser(std::move(tokens));
  return parser.Run();
}

}  // namespace lifeline::jinja
