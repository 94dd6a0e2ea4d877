#include "toolcall/gbnf_match_util.h"

#include <functional>
#include <utility>

namespace lifeline::toolcall::testing {
namespace {

using Node = GbnfGrammar::Node;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One UTF-8 sequence at s[*pos] (a stray or truncated byte counts as itself).
uint32_t DecodeUtf8(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<unsigned char>(s[*pos]);
  const int n = b0 < 0x80 ? 0 : (b0 >> 5) == 6 ? 1 : (b0 >> 4) == 14 ? 2 : (b0 >> 3) == 30 ? 3 : -1;
  bool ok = n > 0 && *pos + n < s.size();
  for (int i = 1; ok && i <= n; ++i) ok = (static_cast<unsigned char>(s[*pos + i]) >> 6) == 2;
  if (!ok) {
    ++*pos;
    return b0;
  }
  uint32_t cp = b0 & (0x3F >> n);
  for (int i = 1; i <= n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[*pos + i]) & 0x3F);
  *pos += n + 1;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  bool Grammar(std::map<std::string, Node>* rules) {
    SkipSpace(true);
    while (p_ < s_.size()) {
      std::string name;
      if (!Name(&name)) return Fail("expected a rule name");
      SkipSpace(false);
      if (s_.substr(p_, 3) != "::=") return Fail("expected ::=");
      p_ += 3;
      SkipSpace(true);
      Node body;
      if (!Alternates(&body, false)) return false;
      if (p_ < s_.size() && s_[p_] == '\r') ++p_;
      if (p_ < s_.size() && s_[p_] == '\n') {
        ++p_;
      } else if (p_ < s_.size()) {
        return Fail("expected the end of the rule");
      }
      if (rules->count(name)) return Fail("rule '" + name + "' defined twice");
      (*rules)[name] = std::move(body);
      SkipSpace(true);
    }
    return true;
  }

  std::string error;

 private:
  bool Fail(const std::string& msg) {
    if (error.empty()) error = msg + " at byte " + std::to_string(p_);
    return false;
  }

  void SkipSpace(bool newlines) {
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p_;
      } else if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  bool Name(std::string* out) {
    const size_t start = p_;
    while (p_ < s_.size() && IsNameChar(s_[p_])) ++p_;
    *out = std::string(s_.substr(start, p_ - start));
    return p_ > start;
  }

  // A character inside a literal or class: an escape or one UTF-8 sequence.
  bool Char(uint32_t* cp) {
    if (p_ >= s_.size()) return Fail("unexpected end");
    if (s_[p_] != '\\') {
      *cp = DecodeUtf8(s_, &p_);
      return true;
    }
    if (++p_ >= s_.size()) return Fail("unexpected end after \\");
    const char e = s_[p_++];
    int hex_digits = 0;
    switch (e) {
      case 'n': *cp = '\n'; return true;
      case 'r': *cp = '\r'; return true;
      case 't': *cp = '\t'; return true;
      case '\\': case '"': case '[': case ']': case '-': *cp = static_cast<uint8_t>(e); return true;
      case 'x': hex_digits = 2; break;
      case 'u': hex_digits = 4; break;
      case 'U': hex_digits = 8; break;
      default: return Fail("unknown escape");
    }
    *cp = 0;
    for (int i = 0; i < hex_digits; ++i) {
      const int v = p_ < s_.size() ? HexValue(s_[p_]) : -1;
      if (v < 0) return Fail("bad hex escape");
      *cp = *cp * 16 + static_cast<uint32_t>(v);
      ++p_;
    }
    return true;
  }

  bool Item(Node* out, bool nested) {
    const char c = s_[p_];
    if (c == '"') {
      ++p_;
      out->kind = Node::Kind::kLit;
      while (p_ < s_.size() && s_[p_] != '"') {
        uint32_t cp;
        if (!Char(&cp)) return false;
        AppendUtf8(cp, &out->text);
      }
      if (p_ >= s_.size()) return Fail("unterminated literal");
      ++p_;
    } else if (c == '[') {
      ++p_;
      out->kind = Node::Kind::kClass;
      if (p_ < s_.size() && s_[p_] == '^') {
        out->negated = true;
        ++p_;
      }
      while (p_ < s_.size() && s_[p_] != ']') {
        uint32_t lo, hi;
        if (!Char(&lo)) return false;
        hi = lo;
        if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
          ++p_;
          if (!Char(&hi)) return false;
        }
        out->ranges.emplace_back(lo, hi);
      }
      if (p_ >= s_.size()) return Fail("unterminated class");
      ++p_;
    } else if (c == '(') {
      ++p_;
      SkipSpace(true);
      if (!Alternates(out, true)) return false;
      if (p_ >= s_.size() || s_[p_] != ')') return Fail("expected )");
      ++p_;
    } else if (c == '.') {
      ++p_;
      out->kind = Node::Kind::kAny;
    } else if (IsNameChar(c)) {
      out->kind = Node::Kind::kRef;
      Name(&out->text);
    } else {
      return Fail(std::string("unexpected '") + c + "'");
    }
    SkipSpace(nested);
    return true;
  }

  bool Postfix(Node* item, bool nested) {
    while (p_ < s_.size()) {
      const char c = s_[p_];
      int min, max;
      if (c == '*') {
        min = 0, max = -1, ++p_;
      } else if (c == '+') {
        min = 1, max = -1, ++p_;
      } else if (c == '?') {
        min = 0, max = 1, ++p_;
      } else if (c == '{') {
        ++p_;
        auto number = [&](int* v) {
          const size_t start = p_;
          *v = 0;
          while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') *v = *v * 10 + (s_[p_++] - '0');
          return p_ > start;
        };
        if (!number(&min)) return Fail("expected a repetition count");
        max = min;
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          if (!number(&max)) max = -1;
        }
        if (p_ >= s_.size() || s_[p_] != '}') return Fail("expected }");
        ++p_;
      } else {
        break;
      }
      Node rep;
      rep.kind = Node::Kind::kRepeat;
      rep.min = min;
      rep.max = max;
      rep.kids.push_back(std::move(*item));
      *item = std::move(rep);
      SkipSpace(nested);
    }
    return true;
  }

  bool Sequence(Node* out, bool nested) {
    out->kind = Node::Kind::kSeq;
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      Node item;
      if (!Item(&item, nested) || !Postfix(&item, nested)) return false;
      out->kids.push_back(std::move(item));
    }
    return true;
  }

  bool Alternates(Node* out, bool nested) {
    Node first;
    if (!Sequence(&first, nested)) return false;
    if (p_ >= s_.size() || s_[p_] != '|') {
      *out = std::move(first);
      return true;
    }
    out->kind = Node::Kind::kAlt;
    out->kids.push_back(std::move(first));
    while (p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      SkipSpace(true);
      Node next;
      if (!Sequence(&next, nested)) return false;
      out->kids.push_back(std::move(next));
    }
    return true;
  }

  std::string_view s_;
  size_t p_ = 0;
};

class Matcher {
 public:
  Matcher(const std::map<std::string, Node>& rules, std::string_view s) : rules_(rules), s_(s) {}

  std::set<size_t> Match(const Node& n, size_t pos) {
    std::set<size_t> out;
    switch (n.kind) {
      case Node::Kind::kSeq: {
        std::set<size_t> cur = {pos};
        for (const Node& kid : n.kids) {
          std::set<size_t> next;
          for (size_t p : cur) {
            for (size_t q : Match(kid, p)) next.insert(q);
          }
          cur = std::move(next);
          if (cur.empty()) break;
        }
        return cur;
      }
      case Node::Kind::kAlt:
        for (const Node& kid : n.kids) {
          for (size_t q : Match(kid, pos)) out.insert(q);
        }
        return out;
      case Node::Kind::kLit:
        if (s_.substr(pos).starts_with(n.text)) out.insert(pos + n.text.size());
        return out;
      case Node::Kind::kClass:
      case Node::Kind::kAny: {
        if (pos >= s_.size()) return out;
        size_t end = pos;
        const uint32_t cp = DecodeUtf8(s_, &end);
        bool in = false;
        for (auto [lo, hi] : n.ranges) in = in || (cp >= lo && cp <= hi);
        if (n.kind == Node::Kind::kAny || in != n.negated) out.insert(end);
        return out;
      }
      case Node::Kind::kRef: {
        auto key = std::make_pair(n.text, pos);
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        auto rule = rules_.find(n.text);
        if (rule == rules_.end()) return out;
        memo_[key] = {};  // a left-recursive re-entry matches nothing
        out = Match(rule->second, pos);
        memo_[key] = out;
        return out;
      }
      case Node::Kind::kRepeat: {
        std::set<size_t> cur = {pos};
        for (int k = 0;; ++k) {
          if (k >= n.min) out.insert(cur.begin(), cur.end());
          if ((n.max >= 0 && k == n.max) || k > static_cast<int>(s_.size()) + n.min) break;
          std::set<size_t> next;
          for (size_t p : cur) {
            for (size_t q : Match(n.kids[0], p)) {
              if (q > p || k < n.min) next.insert(q);
            }
          }
          if (next.empty()) break;
          cur = std::move(next);
        }
        return out;
      }
    }
    return out;
  }

 private:
  const std::map<std::string, Node>& rules_;
  std::string_view s_;
  std::map<std::pair<std::string, size_t>, std::set<size_t>> memo_;
};

void CollectRefs(const Node& n, std::vector<std::string>* refs) {
  if (n.kind == Node::Kind::kRef) refs->push_back(n.text);
  for (const Node& kid : n.kids) CollectRefs(kid, refs);
}

}  // namespace

bool GbnfGrammar::Parse(std::string_view text, std::string* error) {
  rules_.clear();
  Reader r(text);
  if (!r.Grammar(&rules_)) {
    *error = r.error;
    return false;
  }
  return true;
}

bool GbnfGrammar::Accepts(std::string_view sentence, const std::string& start) const {
  auto rule = rules_.find(start);
  if (rule == rules_.end()) return false;
  Matcher m(rules_, sentence);
  return m.Match(rule->second, 0).count(sentence.size()) > 0;
}

std::string GbnfGrammar::FirstUndefinedReference() const {
  for (const auto& [name, node] : rules_) {
    std::vector<std::string> refs;
    CollectRefs(node, &refs);
    for (const std::string& ref : refs) {
      if (!rules_.count(ref)) return ref;
    }
  }
  return "";
}

}  // namespace lifeline::toolcall::testing
