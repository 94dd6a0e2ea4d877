// Built-in filters, tests and methods, each with the semantics of its jinja2 / Python
// namesake. Case mapping (upper, lower, title, capitalize) covers ASCII letters only; other
// characters pass through unchanged (role names and the markers templates compare are ASCII).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/template/jinja_interp.h"
#include "engine/template/jinja_utf8.h"

namespace lifeline::jinja {
namespace {

const Value* Kw(const Kwargs& kw, std::string_view name) {
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Positional argument i, else keyword `name`, else null.
const Value* Arg(const Args& args, const Kwargs& kw, size_t i, std::string_view name) {
  if (i < args.size()) return &args[i];
  return Kw(kw, name);
}

std::vector<std::string> CodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    DecodeUtf8At(s, &i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

// Python's str.isspace() for one code point.
bool PySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// str.strip / lstrip / rstrip; chars null: Unicode whitespace.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars != nullptr) {
    for (size_t i = 0; i < chars->size();) set.push_back(DecodeUtf8At(*chars, &i));
  }
  auto strip_cp = [&](uint32_t cp) {
    return chars == nullptr ? PySpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t i = b;
      if (!strip_cp(DecodeUtf8At(s, &i))) break;
      b = i;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
      size_t i = start;
      if (!strip_cp(DecodeUtf8At(s, &i))) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string Upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}
std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string Capitalize(std::string s) {
  s = Lower(std::move(s));
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

// Python's str.title(): a letter after a non-letter is upper-cased, others lower-cased.
std::string PyTitle(std::string s) {
  bool prev_cased = false;
  for (char& c : s) {
    if (IsAsciiAlpha(c)) {
      c = prev_cased ? Lower(std::string(1, c))[0] : Upper(std::string(1, c))[0];
      prev_cased = true;
    } else {
      prev_cased = (static_cast<unsigned char>(c) & 0x80) != 0 && prev_cased;
    }
  }
  return s;
}

// jinja2's title filter: words begin after runs of - whitespace ( { [ <.
std::string JinjaTitle(const std::string& s) {
  std::string out;
  bool at_start = true;
  for (char c : s) {
    const bool sep = c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
                     c == '\f' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out.push_back(c);
      at_start = true;
    } else if (at_start) {
      out += Upper(std::string(1, c));
      at_start = false;
    } else {
      out += Lower(std::string(1, c));
    }
  }
  return out;
}

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size()) {
      size_t k = j;
      if (!PySpace(DecodeUtf8At(s, &k))) break;
      j = k;
    }
    i = j;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i));  // the rest, as it is, is the last piece
      return out;
    }
    while (j < s.size()) {
      size_t k = j;
      if (PySpace(DecodeUtf8At(s, &k))) break;
      j = k;
    }
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string JoinWords(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out.push_back(' ');
    out += words[i];
  }
  return out;
}

std::vector<std::string> SplitOn(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t p = s.find(sep, start);
    if (p == std::string_view::npos) break;
    out.emplace_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

Value StrList(const std::vector<std::string>& parts) {
  List l;
  l.reserve(parts.size());
  for (const auto& p : parts) l.push_back(Value(p));
  return Value(std::move(l));
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  if (from.empty()) {  // Python inserts `to` between every code point
    std::string out;
    int64_t n = 0;
    for (const std::string& cp : CodePoints(s)) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t p = s.find(from, pos);
    if (p == std::string::npos) break;
    out.append(s, pos, p - pos);
    out += to;
    pos = p + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string Str(const Value& v) { return v.is_string() ? v.str() : ToStr(v); }

Result<Value> AttrPath(Interp& in, const Value& item, const std::string& path, int line) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_undefined()) return cur;
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_dict()) {
      const Value* v = cur.dict().Find(part);
      cur = v != nullptr ? *v : Value::MakeUndefined(part);
    } else if (cur.is_list() && numeric) {
      const size_t i = std::strtoull(part.c_str(), nullptr, 10);
      cur = i < cur.list().size() ? cur.list()[i] : Value::MakeUndefined(part);
    } else {
      cur = Value::MakeUndefined(part);
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Result<int64_t> Len(const Value& v, int line) {
  switch (v.kind()) {
    case Value::kUndefined: return 0;
    case Value::kString: return static_cast<int64_t>(CodePoints(v.str()).size());
    case Value::kList: return static_cast<int64_t>(v.list().size());
    case Value::kDict:
      if (!v.dict().is_namespace) return static_cast<int64_t>(v.dict().items.size());
      [[fallthrough]];
    default:
      return RuntimeError(line, std::string("object of type '") + TypeName(v) + "' has no len()");
  }
}

// Sort key comparison for sort / dictsort / min / max / unique (case-insensitive strings
// unless asked otherwise, as jinja2's filters do).
Value SortKey(const Value& v, bool case_sensitive) {
  if (v.is_string() && !case_sensitive) return Value(Lower(v.str()));
  return v;
}

// json.dumps(ensure_ascii=True): every non-ASCII code point as \uXXXX (surrogate pairs
// above U+FFFF). Only string literals carry non-ASCII bytes in the JSON text.
std::string EscapeNonAscii(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    uint32_t cp = DecodeUtf8At(s, &i);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

}  // namespace

Result<List> Iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::kUndefined: return List{};
    case Value::kList: return v.list();
    case Value::kString: {
      List l;
      for (auto& cp : CodePoints(v.str())) l.push_back(Value(std::move(cp)));
      return l;
    }
    case Value::kDict:
      if (!v.dict().is_namespace) {
        List l;
        for (size_t i = 0; i < v.dict().items.size(); ++i) l.push_back(v.dict().KeyAt(i));
        return l;
      }
      [[fallthrough]];
    default:
      return RuntimeError(line, std::string("'") + TypeName(v) + "' object is not iterable");
  }
}

Result<bool> ApplyTest(Interp& in, const std::string& name, const Value& v, const Args& args,
                       int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  auto arg0 = [&]() -> Result<Value> {
    if (args.empty()) return RuntimeError(line, "test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_undefined() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "sequence") return v.is_list() || v.is_string() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == Value::kInt;
  if (name == "float") return v.kind() == Value::kFloat;
  if (name == "boolean") return v.kind() == Value::kBool;
  if (name == "true") return v.kind() == Value::kBool && v.as_bool();
  if (name == "false") return v.kind() == Value::kBool && !v.as_bool();
  if (name == "callable") return v.kind() == Value::kCallable;
  if (name == "lower") return v.is_string() && Lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && Upper(v.str()) == v.str();
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
    LL_ASSIGN_OR_RETURN(Value a, arg0());
    if (name == "sameas") return v.kind() == a.kind() && Equal(v, a);
    return Equal(v, a);
  }
  if (name == "ne" || name == "!=") {
    LL_ASSIGN_OR_RETURN(Value a, arg0());
    return !Equal(v, a);
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" ||
      name == ">" || name == "le" || name == "<=" || name == "ge" || name == ">=") {
    LL_ASSIGN_OR_RETURN(Value a, arg0());
    const bool lt = name == "lt" || name == "lessthan" || name == "<";
    const bool gt = name == "gt" || name == "greaterthan" || name == ">";
    const bool le = name == "le" || name == "<=";
    Result<bool> r = lt ? Less(v, a) : gt ? Less(a, v) : le ? Less(a, v) : Less(v, a);
    if (!r.ok()) return RuntimeError(line, r.status().message());
    return (lt || gt) ? *r : !*r;
  }
  if (name == "odd" || name == "even") {
    if (!v.is_number()) return RuntimeError(line, "test '" + name + "' needs an integer");
    const int64_t x = v.ToInt();
    return name == "odd" ? (x % 2 != 0) : (x % 2 == 0);
  }
  if (name == "divisibleby") {
    LL_ASSIGN_OR_RETURN(Value a, arg0());
    if (!v.is_number() || !a.is_number() || a.ToInt() == 0) {
      return RuntimeError(line, "test 'divisibleby' needs integers, divisor non-zero");
    }
    return v.ToInt() % a.ToInt() == 0;
  }
  if (name == "in") {
    LL_ASSIGN_OR_RETURN(Value seq, arg0());
    if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
    if (seq.is_dict()) return seq.dict().Find(KeyId(v)) != nullptr;
    if (seq.is_list()) {
      for (const Value& x : seq.list()) {
        if (Equal(v, x)) return true;
      }
      return false;
    }
    return RuntimeError(line, std::string("test 'in': '") + TypeName(seq) + "' is not a container");
  }
  return RuntimeError(line, "no test named '" + name + "'");
}

Result<Value> ApplyFilter(Interp& in, const std::string& name, const Value& v, const Args& args,
                          const Kwargs& kw, int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  auto built = [&](std::string s) -> Result<Value> {
    LL_RETURN_IF_ERROR(in.Built(s.size(), line));
    return Value(std::move(s));
  };
  if (name == "default" || name == "d") {
    const Value* dflt = Arg(args, kw, 0, "default_value");
    const Value* boolean = Arg(args, kw, 1, "boolean");
    const bool use = boolean != nullptr && boolean->Truthy() ? !v.Truthy() : v.is_undefined();
    if (use) return dflt != nullptr ? *dflt : Value(std::string());
    return v;
  }
  if (name == "length" || name == "count") {
    LL_ASSIGN_OR_RETURN(int64_t n, Len(v, line));
    return Value(n);
  }
  if (name == "string") return built(Str(v));
  if (name == "safe") return Value::Markup(Str(v));
  if (name == "e" || name == "escape") {  // a Markup is already escaped
    if (v.is_string() && v.is_markup()) return v;
    LL_RETURN_IF_ERROR(in.Built(Str(v).size() * 6, line));
    return Value::Markup(HtmlEscape(Str(v)));
  }
  if (name == "forceescape") {
    LL_RETURN_IF_ERROR(in.Built(Str(v).size() * 6, line));
    return Value::Markup(HtmlEscape(Str(v)));
  }
  if (name == "striptags") {  // Markup.striptags: no comments or tags, entities back, spaces one
    std::string text = Str(v), out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 4, "<!--") == 0) {
        const size_t end = text.find("-->", i + 4);
        i = end == std::string::npos ? text.size() : end + 3;
      } else if (text[i] == '<') {
        const size_t end = text.find('>', i + 1);
        if (end == std::string::npos) {
          out.push_back(text[i++]);
        } else {
          i = end + 1;
        }
      } else {
        out.push_back(text[i++]);
      }
    }
    static const std::pair<const char*, const char*> kEntities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#34;", "\""}, {"&#39;", "'"},
        {"&amp;", "&"}};
    for (const auto& [from, to] : kEntities) out = Replace(out, from, to, -1);
    return Value(Strip(JoinWords(SplitWhitespace(out, -1)), nullptr, true, true));
  }
  if (name == "trim") {  // soft_str: an undefined value trims to ""
    const Value* chars = Arg(args, kw, 0, "chars");
    std::string c = chars != nullptr && chars->is_string() ? chars->str() : "";
    return Value(Strip(Str(v), chars != nullptr && chars->is_string() ? &c : nullptr, true, true));
  }
  if (name == "upper") return Value(Upper(Str(v)));
  if (name == "lower") return Value(Lower(Str(v)));
  if (name == "capitalize") return Value(Capitalize(Str(v)));
  if (name == "title") return Value(JinjaTitle(Str(v)));
  if (name == "replace") {
    if (args.size() < 2) return RuntimeError(line, "replace(old, new[, count]) needs two arguments");
    const Value* count = Arg(args, kw, 2, "count");
    std::string r = Replace(Str(v), Str(args[0]), Str(args[1]),
                            count != nullptr && !count->is_none() ? count->ToInt() : -1);
    return built(std::move(r));
  }
  if (name == "tojson") {
    const Value* ascii = Arg(args, kw, 0, "ensure_ascii");
    const Value* indent = Arg(args, kw, 1, "indent");
    const Value* seps = Arg(args, kw, 2, "separators");
    const Value* sort = Arg(args, kw, 3, "sort_keys");
    int ind = -1;
    if (indent != nullptr && !indent->is_none()) {
      if (!indent->is_number()) return RuntimeError(line, "tojson: indent must be an integer");
      ind = static_cast<int>(std::clamp<int64_t>(indent->ToInt(), 0, 64));
    }
    std::string item_sep, key_sep;
    if (seps != nullptr && !seps->is_none()) {
      if (!seps->is_list() || seps->list().size() != 2 || !seps->list()[0].is_string() ||
          !seps->list()[1].is_string()) {
        return RuntimeError(line, "tojson: separators must be a pair of strings");
      }
      item_sep = seps->list()[0].str();
      key_sep = seps->list()[1].str();
    }
    auto j = ToJson(v, ind, sort != nullptr && sort->Truthy(),
                    seps != nullptr && !seps->is_none() ? &item_sep : nullptr,
                    seps != nullptr && !seps->is_none() ? &key_sep : nullptr);
    if (!j.ok()) return RuntimeError(line, j.status().message());
    std::string s = std::move(*j);
    if (ascii != nullptr && ascii->Truthy()) s = EscapeNonAscii(s);
    return built(std::move(s));
  }
  if (name == "join") {
    const Value* sep = Arg(args, kw, 0, "d");
    const Value* attr = Arg(args, kw, 1, "attribute");
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    std::string out;
    const std::string s = sep != nullptr ? Str(*sep) : "";
    for (size_t i = 0; i < items.size(); ++i) {
      Value x = items[i];
      if (attr != nullptr && !attr->is_none()) {
        LL_ASSIGN_OR_RETURN(x, AttrPath(in, x, Str(*attr), line));
      }
      if (i > 0) out += s;
      out += Str(x);
      LL_RETURN_IF_ERROR(in.Built(0, line));
      if (out.size() > 0 && (i & 63) == 0) LL_RETURN_IF_ERROR(in.Step(line));
    }
    return built(std::move(out));
  }
  if (name == "first" || name == "last") {
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    if (items.empty()) return Value::MakeUndefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    return Value(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict() || v.dict().is_namespace) {
      return RuntimeError(line, std::string("items: '") + TypeName(v) + "' is not a mapping");
    }
    List l;
    const Dict& d = v.dict();
    for (size_t i = 0; i < d.items.size(); ++i) {
      l.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
    }
    return Value(std::move(l));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = CodePoints(v.str());
      std::string out;
      for (size_t i = cps.size(); i-- > 0;) out += cps[i];
      return Value(std::move(out));
    }
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject" ||
      name == "map") {
    // jinja2 yields nothing for a false value (None, false, 0, "", undefined) here.
    if (!v.Truthy()) return Value(List{});
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "selectattr" || name == "select";
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    size_t k = 0;
    std::string attr;
    if (by_attr) {
      if (args.empty()) return RuntimeError(line, name + " needs an attribute name");
      attr = Str(args[0]);
      k = 1;
    }
    std::string test;
    Args targs;
    if (args.size() > k) {
      test = Str(args[k]);
      targs.assign(args.begin() + static_cast<std::ptrdiff_t>(k) + 1, args.end());
    }
    List out;
    for (const Value& item : items) {
      Value x = item;
      if (by_attr) {
        LL_ASSIGN_OR_RETURN(x, AttrPath(in, item, attr, line));
      }
      bool pass;
      if (test.empty()) {
        pass = x.Truthy();
      } else {
        LL_ASSIGN_OR_RETURN(pass, ApplyTest(in, test, x, targs, line));
      }
      if (pass == keep_if) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (name == "map") {
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    List out;
    if (const Value* attr = Kw(kw, "attribute")) {
      const Value* dflt = Kw(kw, "default");
      for (const Value& item : items) {
        LL_ASSIGN_OR_RETURN(Value x, AttrPath(in, item, Str(*attr), line));
        if (x.is_undefined() && dflt != nullptr) x = *dflt;
        out.push_back(std::move(x));
      }
      return Value(std::move(out));
    }
    if (args.empty()) return RuntimeError(line, "map needs a filter name or attribute=");
    const std::string filter = Str(args[0]);
    Args fargs(args.begin() + 1, args.end());
    for (const Value& item : items) {
      LL_ASSIGN_OR_RETURN(Value x, ApplyFilter(in, filter, item, fargs, kw, line));
      out.push_back(std::move(x));
    }
    return Value(std::move(out));
  }
  if (name == "attr") {
    if (args.empty()) return RuntimeError(line, "attr needs a name");
    if (v.is_dict()) {
      const Value* x = v.dict().Find(Str(args[0]));
      return x != nullptr ? *x : Value::MakeUndefined(Str(args[0]));
    }
    return Value::MakeUndefined(Str(args[0]));
  }
  if (name == "int") {
    const Value* dflt = Arg(args, kw, 0, "default");
    const Value fallback = dflt != nullptr ? *dflt : Value(0);
    if (v.kind() == Value::kInt || v.kind() == Value::kBool) return Value(v.ToInt());
    if (v.kind() == Value::kFloat) {
      if (!std::isfinite(v.as_float())) return fallback;
      return Value(v.ToInt());
    }
    if (v.is_string()) {
      const std::string s = Strip(v.str(), nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(x));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value* dflt = Arg(args, kw, 0, "default");
    const Value fallback = dflt != nullptr ? *dflt : Value(0.0);
    if (v.is_number()) return Value(v.ToDouble());
    if (v.is_string()) {
      const std::string s = Strip(v.str(), nullptr, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
    }
    return fallback;
  }
  if (name == "abs") {
    if (v.kind() == Value::kFloat) return Value(std::fabs(v.as_float()));
    if (v.is_number()) {
      if (v.ToInt() == INT64_MIN) return RuntimeError(line, "integer overflow");
      return Value(v.ToInt() < 0 ? -v.ToInt() : v.ToInt());
    }
    return RuntimeError(line, std::string("bad operand type for abs(): '") + TypeName(v) + "'");
  }
  if (name == "round") {
    if (!v.is_number()) return RuntimeError(line, "round needs a number");
    const Value* prec = Arg(args, kw, 0, "precision");
    const Value* method = Arg(args, kw, 1, "method");
    const int64_t p = prec != nullptr ? prec->ToInt() : 0;
    const std::string m = method != nullptr ? Str(*method) : "common";
    if (m != "common" && m != "ceil" && m != "floor") {
      return RuntimeError(line, "round: method must be common, ceil or floor");
    }
    // Python's round() keeps an int an int and rounds halves to even.
    if (m == "common" && v.kind() != Value::kFloat && p >= 0) return Value(v.ToInt());
    const double f = std::pow(10.0, static_cast<double>(p));
    const double x = v.ToDouble() * f;
    const double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / f);
  }
  if (name == "sum") {
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    const Value* attr = Arg(args, kw, 0, "attribute");
    const Value* start = Arg(args, kw, 1, "start");
    bool is_float = start != nullptr && start->kind() == Value::kFloat;
    double fs = start != nullptr ? start->ToDouble() : 0.0;
    int64_t is = start != nullptr ? start->ToInt() : 0;
    for (const Value& item : items) {
      Value x = item;
      if (attr != nullptr && !attr->is_none()) {
        LL_ASSIGN_OR_RETURN(x, AttrPath(in, item, Str(*attr), line));
      }
      if (!x.is_number()) return RuntimeError(line, std::string("sum: '") + TypeName(x) + "' is not a number");
      if (x.kind() == Value::kFloat) is_float = true;
      fs += x.ToDouble();
      if (__builtin_add_overflow(is, x.ToInt(), &is)) return RuntimeError(line, "integer overflow");
    }
    return is_float ? Value(fs) : Value(is);
  }
  if (name == "min" || name == "max" || name == "sort" || name == "unique" || name == "dictsort") {
    const bool is_dictsort = name == "dictsort";
    const Value* cs = Kw(kw, "case_sensitive");
    if (is_dictsort && cs == nullptr && !args.empty()) cs = &args[0];
    if (name == "sort" && cs == nullptr && args.size() > 1) cs = &args[1];
    if (name == "unique" && cs == nullptr && !args.empty()) cs = &args[0];
    const bool case_sensitive = cs != nullptr && cs->Truthy();
    const Value* attr = Kw(kw, "attribute");
    if (name == "sort" && attr == nullptr && args.size() > 2) attr = &args[2];
    bool reverse = false;
    if (const Value* r = Kw(kw, "reverse")) reverse = r->Truthy();
    else if (name == "sort" && !args.empty()) reverse = args[0].Truthy();
    else if (is_dictsort && args.size() > 2) reverse = args[2].Truthy();
    List items;
    if (is_dictsort) {
      if (!v.is_dict()) return RuntimeError(line, "dictsort needs a mapping");
      const Dict& d = v.dict();
      for (size_t i = 0; i < d.items.size(); ++i) {
        items.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
      }
    } else {
      LL_ASSIGN_OR_RETURN(items, Iterate(v, line));
    }
    std::string by = "key";
    if (const Value* b = Kw(kw, "by")) by = Str(*b);
    else if (is_dictsort && args.size() > 1) by = Str(args[1]);
    std::vector<Value> keys;
    for (const Value& item : items) {
      Value k = item;
      if (is_dictsort) {
        k = item.list()[by == "value" ? 1 : 0];
      } else if (attr != nullptr && !attr->is_none()) {
        LL_ASSIGN_OR_RETURN(k, AttrPath(in, item, Str(*attr), line));
      }
      keys.push_back(SortKey(k, case_sensitive));
    }
    LL_RETURN_IF_ERROR(in.Step(line, items.size()));
    if (name == "unique") {
      List out;
      std::vector<Value> seen;
      for (size_t i = 0; i < items.size(); ++i) {
        bool dup = false;
        for (const Value& s : seen) {
          if (Equal(s, keys[i])) {
            dup = true;
            break;
          }
        }
        if (!dup) {
          seen.push_back(keys[i]);
          out.push_back(items[i]);
        }
      }
      return Value(std::move(out));
    }
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Status cmp_err = Status::Ok();
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto r = Less(keys[a], keys[b]);
      if (!r.ok()) {
        cmp_err = r.status();
        return false;
      }
      return *r;
    });
    if (!cmp_err.ok()) return RuntimeError(line, cmp_err.message());
    if (name == "min" || name == "max") {
      if (items.empty()) return Value::MakeUndefined(name);
      return name == "min" ? items[order.front()] : items[order.back()];
    }
    if (reverse) {  // stable descending: reverse a stable sort of reversed input? keep simple
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        auto r = Less(keys[b], keys[a]);
        return r.ok() && *r;
      });
    }
    List out;
    for (size_t i : order) out.push_back(items[i]);
    return Value(std::move(out));
  }
  if (name == "indent") {
    const Value* width = Arg(args, kw, 0, "width");
    const Value* first = Arg(args, kw, 1, "first");
    const Value* blank = Arg(args, kw, 2, "blank");
    std::string pad = width == nullptr ? "    "
                      : width->is_string() ? width->str()
                                           : std::string(static_cast<size_t>(std::clamp<int64_t>(width->ToInt(), 0, 256)), ' ');
    std::vector<std::string> lines = SplitLines(Str(v) + "\n");
    std::string rv;
    if (blank != nullptr && blank->Truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) rv += "\n" + pad;
        rv += lines[i];
      }
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) {
        rv += "\n";
        if (!lines[i].empty()) rv += pad;
        rv += lines[i];
      }
    }
    if (first != nullptr && first->Truthy()) rv = pad + rv;
    return built(std::move(rv));
  }
  if (name == "center") {
    const Value* width = Arg(args, kw, 0, "width");
    const std::string s = Str(v);
    const int64_t w = width != nullptr ? std::clamp<int64_t>(width->ToInt(), 0, 4096) : 80;
    const int64_t n = static_cast<int64_t>(CodePoints(s).size());
    if (w <= n) return Value(s);
    const int64_t total = w - n;
    const int64_t left = total / 2 + (total & w & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "format") {  // printf-style: %s %r %d %i %f %.Nf %%
    const std::string f = Str(v);
    std::string out;
    size_t ai = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] != '%') {
        out.push_back(f[i]);
        continue;
      }
      if (++i >= f.size()) return RuntimeError(line, "format: incomplete format");
      int prec = -1;
      if (f[i] == '.') {
        prec = 0;
        while (++i < f.size() && f[i] >= '0' && f[i] <= '9') prec = std::min(prec * 10 + (f[i] - '0'), 50);
        if (i >= f.size()) return RuntimeError(line, "format: incomplete format");
      }
      const char c = f[i];
      if (c == '%') {
        out.push_back('%');
        continue;
      }
      if (ai >= args.size()) return RuntimeError(line, "format: not enough arguments for format string");
      const Value& a = args[ai++];
      if (c == 's') {
        out += Str(a);
      } else if (c == 'r') {
        out += Repr(a);
      } else if (c == 'd' || c == 'i' || c == 'f') {
        if (!a.is_number()) return RuntimeError(line, std::string("format: %") + c + " needs a number, not " + TypeName(a));
        if (c == 'f') {
          char buf[400];
          std::snprintf(buf, sizeof(buf), "%.*f", prec < 0 ? 6 : prec, a.ToDouble());
          out += buf;
        } else {
          out += std::to_string(a.ToInt());
        }
      } else {
        return RuntimeError(line, std::string("format: unsupported conversion %") + c);
      }
      LL_RETURN_IF_ERROR(in.Built(out.size(), line));
    }
    if (ai < args.size()) return RuntimeError(line, "format: not all arguments converted during string formatting");
    return built(std::move(out));
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(SplitWhitespace(Str(v), -1).size()));
  if (name == "batch") {
    const Value* count = Arg(args, kw, 0, "linecount");
    const Value* fill = Arg(args, kw, 1, "fill_with");
    if (count == nullptr || count->ToInt() <= 0) return RuntimeError(line, "batch needs a positive size");
    LL_ASSIGN_OR_RETURN(List items, Iterate(v, line));
    const size_t n = static_cast<size_t>(count->ToInt());
    List out;
    for (size_t i = 0; i < items.size(); i += n) {
      List b(items.begin() + static_cast<std::ptrdiff_t>(i),
             items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + n)));
      if (fill != nullptr) {
        while (b.size() < n) b.push_back(*fill);
      }
      out.push_back(Value(std::move(b)));
    }
    return Value(std::move(out));
  }
  return RuntimeError(line, "no filter named '" + name + "'");
}

bool IsMethod(const Value& obj, const std::string& name) {
  static const char* kStr[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
                               "endswith", "upper", "lower", "title", "capitalize", "replace",
                               "find", "rfind", "index", "count", "join", "splitlines",
                               "isdigit", "isalpha", "isspace", "isalnum", "isupper",
                               "islower", "removeprefix", "removesuffix", "format", "zfill"};
  static const char* kDict[] = {"items", "keys", "values", "get", "update", "pop", "setdefault",
                                "clear", "popitem", "copy"};
  static const char* kList[] = {"index", "count", "append", "extend", "insert", "pop", "remove",
                                "sort", "reverse", "clear", "copy"};
  auto in = [&](const auto& table) {
    for (const char* n : table) {
      if (name == n) return true;
    }
    return false;
  };
  if (obj.is_string()) return in(kStr);
  // jinja2's getattr tries the attribute before the key, so a dict key named like a method
  // ("items" in a JSON schema) is reached only as d['items'], as in Python.
  if (obj.is_dict() && !obj.dict().is_namespace) return in(kDict);
  if (obj.is_list()) return in(kList);
  return false;
}

Result<Value> CallMethod(Interp& in, const Value& obj, const std::string& name,
                         const Args& args, const Kwargs& kw, int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  auto unsafe = [&]() {
    return RuntimeError(line, "access to attribute '" + name + "' of '" + TypeName(obj) +
                                  "' object is unsafe (templates cannot modify values)");
  };
  auto str_arg = [&](size_t i, std::string_view kwname) -> const std::string* {
    const Value* v = Arg(args, kw, i, kwname);
    return v != nullptr && v->is_string() ? &v->str() : nullptr;
  };
  if (obj.is_string()) {
    const std::string& s = obj.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const std::string* chars = str_arg(0, "chars");
      return Value(Strip(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
      const Value* sep = Arg(args, kw, 0, "sep");
      const Value* maxv = Arg(args, kw, 1, "maxsplit");
      const int64_t maxsplit = maxv != nullptr ? maxv->ToInt() : -1;
      if (sep == nullptr || sep->is_none()) {
        if (name == "rsplit" && maxsplit >= 0) return RuntimeError(line, "rsplit with maxsplit and no separator is not supported");
        return StrList(SplitWhitespace(s, maxsplit));
      }
      if (!sep->is_string() || sep->str().empty()) return RuntimeError(line, "empty separator");
      if (name == "rsplit" && maxsplit >= 0) {
        std::vector<std::string> all = SplitOn(s, sep->str(), -1);
        if (static_cast<int64_t>(all.size()) - 1 <= maxsplit) return StrList(all);
        const size_t keep = all.size() - static_cast<size_t>(maxsplit);
        std::string head = all[0];
        for (size_t i = 1; i < keep; ++i) head += sep->str() + all[i];
        std::vector<std::string> out{head};
        out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end());
        return StrList(out);
      }
      return StrList(SplitOn(s, sep->str(), maxsplit));
    }
    if (name == "startswith" || name == "endswith") {
      if (args.empty()) return RuntimeError(line, name + " needs an argument");
      std::vector<std::string> cands;
      if (args[0].is_string()) {
        cands.push_back(args[0].str());
      } else if (args[0].is_list()) {
        for (const Value& x : args[0].list()) {
          if (!x.is_string()) return RuntimeError(line, name + ": tuple items must be strings");
          cands.push_back(x.str());
        }
      } else {
        return RuntimeError(line, name + std::string(" first arg must be str or a tuple of str, not ") + TypeName(args[0]));
      }
      for (const std::string& c : cands) {
        if (name == "startswith" ? s.rfind(c, 0) == 0
                                 : (s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0)) {
          return Value(true);
        }
      }
      return Value(false);
    }
    if (name == "upper") return Value(Upper(s));
    if (name == "lower") return Value(Lower(s));
    if (name == "title") return Value(PyTitle(s));
    if (name == "capitalize") return Value(Capitalize(s));
    if (name == "replace") {
      if (args.size() < 2 || !args[0].is_string() || !args[1].is_string()) {
        return RuntimeError(line, "replace(old, new[, count]) needs two strings");
      }
      const int64_t count = args.size() > 2 ? args[2].ToInt() : -1;
      const uint64_t growth = args[1].str().size() > args[0].str().size()
                                  ? (args[1].str().size() - args[0].str().size() + 1)
                                  : 1;
      LL_RETURN_IF_ERROR(in.Built(std::min<uint64_t>(s.size() * growth, s.size() + 1), line));
      if (obj.is_markup()) {  // Markup.replace escapes its arguments
        std::string r = Replace(s, EscapeForMarkup(args[0]), EscapeForMarkup(args[1]), count);
        LL_RETURN_IF_ERROR(in.Built(r.size(), line));
        return Value::Markup(std::move(r));
      }
      std::string r = Replace(s, args[0].str(), args[1].str(), count);
      LL_RETURN_IF_ERROR(in.Built(r.size(), line));
      return Value(std::move(r));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "count") {
      const std::string* sub = str_arg(0, "sub");
      if (sub == nullptr) return RuntimeError(line, name + " needs a string argument");
      if (name == "count") {
        if (sub->empty()) return Value(static_cast<int64_t>(CodePoints(s).size() + 1));
        int64_t n = 0;
        for (size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
        return Value(n);
      }
      const size_t p = name == "rfind" ? s.rfind(*sub) : s.find(*sub);
      if (p == std::string::npos) {
        if (name == "index") return RuntimeError(line, "substring not found");
        return Value(-1);
      }
      // Byte offset to code-point offset.
      int64_t cp = 0;
      for (size_t i = 0; i < p; ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) ++cp;
      }
      return Value(cp);
    }
    if (name == "join") {
      if (args.empty()) return RuntimeError(line, "join needs an iterable");
      LL_ASSIGN_OR_RETURN(List items, Iterate(args[0], line));
      std::string out;
      if (obj.is_markup()) {  // Markup.join escapes what it joins
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += s;
          out += EscapeForMarkup(items[i]);
          LL_RETURN_IF_ERROR(in.Built(0, line));
        }
        LL_RETURN_IF_ERROR(in.Built(out.size(), line));
        return Value::Markup(std::move(out));
      }
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          return RuntimeError(line, "sequence item " + std::to_string(i) + ": expected str instance, " + TypeName(items[i]) + " found");
        }
        if (i > 0) out += s;
        out += items[i].str();
        if (out.size() > 0) LL_RETURN_IF_ERROR(in.Built(0, line));
      }
      LL_RETURN_IF_ERROR(in.Built(out.size(), line));
      return Value(std::move(out));
    }
    if (name == "splitlines") return StrList(SplitLines(s));
    if (name == "format") {  // str.format: {} {0} {name}, !r / !s, {{ and }}; no format specs
      std::string out;
      size_t auto_index = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '}' ) {
          if (i + 1 < s.size() && s[i + 1] == '}') ++i;
          else return RuntimeError(line, "str.format: single '}' encountered in format string");
          out.push_back('}');
          continue;
        }
        if (c != '{') {
          out.push_back(c);
          continue;
        }
        if (i + 1 < s.size() && s[i + 1] == '{') {
          out.push_back('{');
          ++i;
          continue;
        }
        const size_t close = s.find('}', i);
        if (close == std::string::npos) return RuntimeError(line, "str.format: unmatched '{'");
        std::string field = s.substr(i + 1, close - i - 1);
        i = close;
        char conv = 's';
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
          if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's')) {
            return RuntimeError(line, "str.format: only !r and !s conversions are supported");
          }
          conv = field[bang + 1];
          field.resize(bang);
        }
        if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
            field.find('[') != std::string::npos) {
          return RuntimeError(line, "str.format: format specs and field attributes are not supported");
        }
        const Value* arg = nullptr;
        if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
          const size_t idx = field.empty() ? auto_index++ : std::strtoull(field.c_str(), nullptr, 10);
          if (idx >= args.size()) return RuntimeError(line, "str.format: replacement index " + std::to_string(idx) + " out of range");
          arg = &args[idx];
        } else {
          arg = Kw(kw, field);
          if (arg == nullptr) return RuntimeError(line, "str.format: no keyword argument '" + field + "'");
        }
        out += conv == 'r' ? Repr(*arg) : Str(*arg);
        LL_RETURN_IF_ERROR(in.Built(0, line));
      }
      LL_RETURN_IF_ERROR(in.Built(out.size(), line));
      return Value(std::move(out));
    }
    if (name == "removeprefix" || name == "removesuffix") {
      const std::string* a = str_arg(0, "prefix");
      if (a == nullptr) return RuntimeError(line, name + " needs a string");
      if (name == "removeprefix") return Value(s.rfind(*a, 0) == 0 ? s.substr(a->size()) : s);
      if (s.size() >= a->size() && s.compare(s.size() - a->size(), a->size(), *a) == 0) {
        return Value(s.substr(0, s.size() - a->size()));
      }
      return Value(s);
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" ||
        name == "isupper" || name == "islower") {
      if (s.empty()) return Value(false);
      bool cased = false;
      for (char c : s) {
        const bool digit = c >= '0' && c <= '9';
        const bool alpha = IsAsciiAlpha(c);
        if (name == "isdigit" && !digit) return Value(false);
        if (name == "isalpha" && !alpha) return Value(false);
        if (name == "isalnum" && !digit && !alpha) return Value(false);
        if (name == "isspace" && !PySpace(static_cast<unsigned char>(c))) return Value(false);
        if (name == "isupper" && c >= 'a' && c <= 'z') return Value(false);
        if (name == "islower" && c >= 'A' && c <= 'Z') return Value(false);
        cased = cased || alpha;
      }
      if (name == "isupper" || name == "islower") return Value(cased);
      return Value(true);
    }
    if (name == "zfill") {
      const int64_t w = args.empty() ? 0 : std::clamp<int64_t>(args[0].ToInt(), 0, 4096);
      const int64_t n = static_cast<int64_t>(CodePoints(s).size());
      if (w <= n) return Value(s);
      std::string pad(static_cast<size_t>(w - n), '0');
      if (!s.empty() && (s[0] == '-' || s[0] == '+')) return Value(s.substr(0, 1) + pad + s.substr(1));
      return Value(pad + s);
    }
    return RuntimeError(line, "str." + name + "() is not supported in chat templates");
  }
  if (obj.is_dict()) {
    const Dict& d = obj.dict();
    if (name == "items") {
      List l;
      for (size_t i = 0; i < d.items.size(); ++i) {
        l.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
      }
      return Value(std::move(l));
    }
    if (name == "keys" || name == "values") {
      List l;
      for (size_t i = 0; i < d.items.size(); ++i) {
        l.push_back(name == "keys" ? d.KeyAt(i) : d.items[i].second);
      }
      return Value(std::move(l));
    }
    if (name == "get") {
      if (args.empty()) return RuntimeError(line, "get needs a key");
      const Value* x = d.Find(KeyId(args[0]));
      if (x != nullptr) return *x;
      return args.size() > 1 ? args[1] : Value(None{});
    }
    if (name == "copy") {
      auto c = std::make_shared<Dict>();
      c->items = d.items;
      c->typed_keys = d.typed_keys;
      return Value(std::move(c));
    }
    return unsafe();
  }
  if (obj.is_list()) {
    const List& l = obj.list();
    if (name == "index" || name == "count") {
      if (args.empty()) return RuntimeError(line, name + " needs an argument");
      int64_t n = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        if (Equal(l[i], args[0])) {
          if (name == "index") return Value(static_cast<int64_t>(i));
          ++n;
        }
      }
      if (name == "index") return RuntimeError(line, "value is not in list");
      return Value(n);
    }
    if (name == "copy") return Value(List(l));
    return unsafe();
  }
  return RuntimeError(line, std::string("'") + TypeName(obj) + "' object has no method '" + name + "'");
}

}  // namespace lifeline::jinja
