// Built-in filters (`x | name(args)`), each with the semantics of its jinja2 namesake. Case
// mapping (upper, lower, title, capitalize) covers ASCII letters only; other characters pass
// through unchanged (role names and the markers templates compare are ASCII).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "text/template/jinja_builtins.h"
#include "text/template/jinja_utf8.h"

namespace lifeline::jinja {
namespace {

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

std::string JoinWords(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out.push_back(' ');
    out += words[i];
  }
  return out;
}

// jinja2's attribute paths ("meta.k.0"): dict keys, and list indices for all-digit parts; a
// missing step is undefined, never an error.
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

// Python's len(): code points of a string; undefined counts as empty.
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

// A string the filter built, charged to the render's byte budgets before it exists as a value.
Result<Value> BuiltString(const BuiltinCall& c, std::string s) {
  LL_RETURN_IF_ERROR(c.in.Built(s.size(), c.line));
  return Value(std::move(s));
}

// ---- Values and strings ----------------------------------------------------------------

// default(value, boolean): the fallback replaces an undefined value (any false one when
// boolean is true).
Result<Value> FilterDefault(const Value& v, const BuiltinCall& c) {
  const Value* dflt = Arg(c.args, c.kw, 0, "default_value");
  const Value* boolean = Arg(c.args, c.kw, 1, "boolean");
  const bool use = boolean != nullptr && boolean->Truthy() ? !v.Truthy() : v.is_undefined();
  if (use) return dflt != nullptr ? *dflt : Value(std::string());
  return v;
}

Result<Value> FilterLength(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(int64_t n, Len(v, c.line));
  return Value(n);
}

Result<Value> FilterString(const Value& v, const BuiltinCall& c) { return BuiltString(c, Str(v)); }

Result<Value> FilterSafe(const Value& v, const BuiltinCall& c) { return Value::Markup(Str(v)); }

// Escapes even a Markup; HTML escaping grows a string at most sixfold, charged up front.
Result<Value> FilterForceEscape(const Value& v, const BuiltinCall& c) {
  LL_RETURN_IF_ERROR(c.in.Built(Str(v).size() * 6, c.line));
  return Value::Markup(HtmlEscape(Str(v)));
}

// A Markup is already escaped and passes as it is.
Result<Value> FilterEscape(const Value& v, const BuiltinCall& c) {
  if (v.is_string() && v.is_markup()) return v;
  return FilterForceEscape(v, c);
}

// Markup.striptags: no comments or tags, entities back, whitespace runs one space.
Result<Value> FilterStripTags(const Value& v, const BuiltinCall& c) {
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

// soft_str: an undefined value trims to "".
Result<Value> FilterTrim(const Value& v, const BuiltinCall& c) {
  const Value* chars = Arg(c.args, c.kw, 0, "chars");
  std::string cs = chars != nullptr && chars->is_string() ? chars->str() : "";
  return Value(Strip(Str(v), chars != nullptr && chars->is_string() ? &cs : nullptr, true, true));
}

Result<Value> FilterUpper(const Value& v, const BuiltinCall& c) { return Value(Upper(Str(v))); }
Result<Value> FilterLower(const Value& v, const BuiltinCall& c) { return Value(Lower(Str(v))); }
Result<Value> FilterCapitalize(const Value& v, const BuiltinCall& c) {
  return Value(Capitalize(Str(v)));
}
Result<Value> FilterTitle(const Value& v, const BuiltinCall& c) { return Value(JinjaTitle(Str(v))); }

Result<Value> FilterReplace(const Value& v, const BuiltinCall& c) {
  if (c.args.size() < 2) return RuntimeError(c.line, "replace(old, new[, count]) needs two arguments");
  const Value* count = Arg(c.args, c.kw, 2, "count");
  std::string r = Replace(Str(v), Str(c.args[0]), Str(c.args[1]),
                          count != nullptr && !count->is_none() ? count->ToInt() : -1);
  return BuiltString(c, std::move(r));
}

// tojson(ensure_ascii, indent, separators, sort_keys): json.dumps with those options.
Result<Value> FilterToJson(const Value& v, const BuiltinCall& c) {
  const Value* ascii = Arg(c.args, c.kw, 0, "ensure_ascii");
  const Value* indent = Arg(c.args, c.kw, 1, "indent");
  const Value* seps = Arg(c.args, c.kw, 2, "separators");
  const Value* sort = Arg(c.args, c.kw, 3, "sort_keys");
  int ind = -1;
  if (indent != nullptr && !indent->is_none()) {
    if (!indent->is_number()) return RuntimeError(c.line, "tojson: indent must be an integer");
    ind = static_cast<int>(std::clamp<int64_t>(indent->ToInt(), 0, 64));
  }
  std::string item_sep, key_sep;
  if (seps != nullptr && !seps->is_none()) {
    if (!seps->is_list() || seps->list().size() != 2 || !seps->list()[0].is_string() ||
        !seps->list()[1].is_string()) {
      return RuntimeError(c.line, "tojson: separators must be a pair of strings");
    }
    item_sep = seps->list()[0].str();
    key_sep = seps->list()[1].str();
  }
  auto j = ToJson(v, ind, sort != nullptr && sort->Truthy(),
                  seps != nullptr && !seps->is_none() ? &item_sep : nullptr,
                  seps != nullptr && !seps->is_none() ? &key_sep : nullptr);
  if (!j.ok()) return RuntimeError(c.line, j.status().message());
  std::string s = std::move(*j);
  if (ascii != nullptr && ascii->Truthy()) s = EscapeNonAscii(s);
  return BuiltString(c, std::move(s));
}

// indent(width, first, blank): pads every line after the first (the first too with first=true),
// blank lines too with blank=true; width is a count of spaces or the pad itself.
Result<Value> FilterIndent(const Value& v, const BuiltinCall& c) {
  const Value* width = Arg(c.args, c.kw, 0, "width");
  const Value* first = Arg(c.args, c.kw, 1, "first");
  const Value* blank = Arg(c.args, c.kw, 2, "blank");
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
  return BuiltString(c, std::move(rv));
}

// str.center(width): the extra odd space goes left when width is odd, as Python places it.
Result<Value> FilterCenter(const Value& v, const BuiltinCall& c) {
  const Value* width = Arg(c.args, c.kw, 0, "width");
  const std::string s = Str(v);
  const int64_t w = width != nullptr ? std::clamp<int64_t>(width->ToInt(), 0, 4096) : 80;
  const int64_t n = static_cast<int64_t>(CodePoints(s).size());
  if (w <= n) return Value(s);
  const int64_t total = w - n;
  const int64_t left = total / 2 + (total & w & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(total - left), ' '));
}

// printf-style (`fmt % args` uses it too): %s %r %d %i %f %.Nf %%.
Result<Value> FilterFormat(const Value& v, const BuiltinCall& c) {
  const std::string f = Str(v);
  std::string out;
  size_t ai = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.push_back(f[i]);
      continue;
    }
    if (++i >= f.size()) return RuntimeError(c.line, "format: incomplete format");
    int prec = -1;
    if (f[i] == '.') {
      prec = 0;
      while (++i < f.size() && f[i] >= '0' && f[i] <= '9') prec = std::min(prec * 10 + (f[i] - '0'), 50);
      if (i >= f.size()) return RuntimeError(c.line, "format: incomplete format");
    }
    const char conv = f[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (ai >= c.args.size()) return RuntimeError(c.line, "format: not enough arguments for format string");
    const Value& a = c.args[ai++];
    if (conv == 's') {
      out += Str(a);
    } else if (conv == 'r') {
      out += Repr(a);
    } else if (conv == 'd' || conv == 'i' || conv == 'f') {
      if (!a.is_number()) return RuntimeError(c.line, std::string("format: %") + conv + " needs a number, not " + TypeName(a));
      if (conv == 'f') {
        char buf[400];
        std::snprintf(buf, sizeof(buf), "%.*f", prec < 0 ? 6 : prec, a.ToDouble());
        out += buf;
      } else {
        out += std::to_string(a.ToInt());
      }
    } else {
      return RuntimeError(c.line, std::string("format: unsupported conversion %") + conv);
    }
    LL_RETURN_IF_ERROR(c.in.Built(out.size(), c.line));
  }
  if (ai < c.args.size()) return RuntimeError(c.line, "format: not all arguments converted during string formatting");
  return BuiltString(c, std::move(out));
}

Result<Value> FilterWordCount(const Value& v, const BuiltinCall& c) {
  return Value(static_cast<int64_t>(SplitWhitespace(Str(v), -1).size()));
}

// ---- Numbers ---------------------------------------------------------------------------

// int(default): ints and bools as ints, floats truncated, strings parsed as an int or else a
// float; anything else (or a non-finite float) is the default.
Result<Value> FilterInt(const Value& v, const BuiltinCall& c) {
  const Value* dflt = Arg(c.args, c.kw, 0, "default");
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

Result<Value> FilterFloat(const Value& v, const BuiltinCall& c) {
  const Value* dflt = Arg(c.args, c.kw, 0, "default");
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

Result<Value> FilterAbs(const Value& v, const BuiltinCall& c) {
  if (v.kind() == Value::kFloat) return Value(std::fabs(v.as_float()));
  if (v.is_number()) {
    if (v.ToInt() == INT64_MIN) return RuntimeError(c.line, "integer overflow");
    return Value(v.ToInt() < 0 ? -v.ToInt() : v.ToInt());
  }
  return RuntimeError(c.line, std::string("bad operand type for abs(): '") + TypeName(v) + "'");
}

// round(precision, method): method common (halves to even, as Python), ceil or floor.
Result<Value> FilterRound(const Value& v, const BuiltinCall& c) {
  if (!v.is_number()) return RuntimeError(c.line, "round needs a number");
  const Value* prec = Arg(c.args, c.kw, 0, "precision");
  const Value* method = Arg(c.args, c.kw, 1, "method");
  const int64_t p = prec != nullptr ? prec->ToInt() : 0;
  const std::string m = method != nullptr ? Str(*method) : "common";
  if (m != "common" && m != "ceil" && m != "floor") {
    return RuntimeError(c.line, "round: method must be common, ceil or floor");
  }
  // Python's round() keeps an int an int and rounds halves to even.
  if (m == "common" && v.kind() != Value::kFloat && p >= 0) return Value(v.ToInt());
  const double f = std::pow(10.0, static_cast<double>(p));
  const double x = v.ToDouble() * f;
  const double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / f);
}

// sum(attribute, start): an int while every term is one (overflow fails), else a float.
Result<Value> FilterSum(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  const Value* attr = Arg(c.args, c.kw, 0, "attribute");
  const Value* start = Arg(c.args, c.kw, 1, "start");
  bool is_float = start != nullptr && start->kind() == Value::kFloat;
  double fs = start != nullptr ? start->ToDouble() : 0.0;
  int64_t is = start != nullptr ? start->ToInt() : 0;
  for (const Value& item : items) {
    Value x = item;
    if (attr != nullptr && !attr->is_none()) {
      LL_ASSIGN_OR_RETURN(x, AttrPath(c.in, item, Str(*attr), c.line));
    }
    if (!x.is_number()) return RuntimeError(c.line, std::string("sum: '") + TypeName(x) + "' is not a number");
    if (x.kind() == Value::kFloat) is_float = true;
    fs += x.ToDouble();
    if (__builtin_add_overflow(is, x.ToInt(), &is)) return RuntimeError(c.line, "integer overflow");
  }
  return is_float ? Value(fs) : Value(is);
}

// ---- Sequences -------------------------------------------------------------------------

// join(d, attribute): the string of each item (or of its attribute path), separated by d.
Result<Value> FilterJoin(const Value& v, const BuiltinCall& c) {
  const Value* sep = Arg(c.args, c.kw, 0, "d");
  const Value* attr = Arg(c.args, c.kw, 1, "attribute");
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  std::string out;
  const std::string s = sep != nullptr ? Str(*sep) : "";
  for (size_t i = 0; i < items.size(); ++i) {
    Value x = items[i];
    if (attr != nullptr && !attr->is_none()) {
      LL_ASSIGN_OR_RETURN(x, AttrPath(c.in, x, Str(*attr), c.line));
    }
    if (i > 0) out += s;
    out += Str(x);
    LL_RETURN_IF_ERROR(c.in.Built(0, c.line));
    if (out.size() > 0 && (i & 63) == 0) LL_RETURN_IF_ERROR(c.in.Step(c.line));
  }
  return BuiltString(c, std::move(out));
}

// first / last of no items is undefined, named after the filter.
Result<Value> FilterFirst(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  if (items.empty()) return Value::MakeUndefined("first");
  return items.front();
}

Result<Value> FilterLast(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  if (items.empty()) return Value::MakeUndefined("last");
  return items.back();
}

Result<Value> FilterList(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  return Value(std::move(items));
}

// A dict's (key, value) pairs; undefined has none.
Result<Value> FilterItems(const Value& v, const BuiltinCall& c) {
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict() || v.dict().is_namespace) {
    return RuntimeError(c.line, std::string("items: '") + TypeName(v) + "' is not a mapping");
  }
  List l;
  const Dict& d = v.dict();
  for (size_t i = 0; i < d.items.size(); ++i) {
    l.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
  }
  return Value(std::move(l));
}

// A string reversed by code points, anything else iterated and reversed.
Result<Value> FilterReverse(const Value& v, const BuiltinCall& c) {
  if (v.is_string()) {
    auto cps = CodePoints(v.str());
    std::string out;
    for (size_t i = cps.size(); i-- > 0;) out += cps[i];
    return Value(std::move(out));
  }
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

// select / reject (test, args...) and selectattr / rejectattr (attribute, test, args...): the
// items whose test -- their truth without one -- is keep_if; by_attr tests the attribute path.
Result<Value> SelectItems(const Value& v, const BuiltinCall& c, bool by_attr, bool keep_if) {
  // jinja2 yields nothing for a false value (None, false, 0, "", undefined) here.
  if (!v.Truthy()) return Value(List{});
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (c.args.empty()) return RuntimeError(c.line, c.name + " needs an attribute name");
    attr = Str(c.args[0]);
    k = 1;
  }
  std::string test;
  Args targs;
  if (c.args.size() > k) {
    test = Str(c.args[k]);
    targs.assign(c.args.begin() + static_cast<std::ptrdiff_t>(k) + 1, c.args.end());
  }
  List out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attr) {
      LL_ASSIGN_OR_RETURN(x, AttrPath(c.in, item, attr, c.line));
    }
    bool pass;
    if (test.empty()) {
      pass = x.Truthy();
    } else {
      LL_ASSIGN_OR_RETURN(pass, ApplyTest(c.in, test, x, targs, c.line));
    }
    if (pass == keep_if) out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> FilterSelect(const Value& v, const BuiltinCall& c) { return SelectItems(v, c, false, true); }
Result<Value> FilterReject(const Value& v, const BuiltinCall& c) { return SelectItems(v, c, false, false); }
Result<Value> FilterSelectAttr(const Value& v, const BuiltinCall& c) { return SelectItems(v, c, true, true); }
Result<Value> FilterRejectAttr(const Value& v, const BuiltinCall& c) { return SelectItems(v, c, true, false); }

// map(attribute=path, default=x) takes each item's attribute; map(filter, args...) applies a
// filter to each item (the keywords go to that filter).
Result<Value> FilterMap(const Value& v, const BuiltinCall& c) {
  // jinja2 yields nothing for a false value (None, false, 0, "", undefined) here.
  if (!v.Truthy()) return Value(List{});
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
  List out;
  if (const Value* attr = Kw(c.kw, "attribute")) {
    const Value* dflt = Kw(c.kw, "default");
    for (const Value& item : items) {
      LL_ASSIGN_OR_RETURN(Value x, AttrPath(c.in, item, Str(*attr), c.line));
      if (x.is_undefined() && dflt != nullptr) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value(std::move(out));
  }
  if (c.args.empty()) return RuntimeError(c.line, "map needs a filter name or attribute=");
  const std::string filter = Str(c.args[0]);
  Args fargs(c.args.begin() + 1, c.args.end());
  for (const Value& item : items) {
    LL_ASSIGN_OR_RETURN(Value x, ApplyFilter(c.in, filter, item, fargs, c.kw, c.line));
    out.push_back(std::move(x));
  }
  return Value(std::move(out));
}

// attr(name): a dict's key (no method lookup, unlike `.name`), else undefined.
Result<Value> FilterAttr(const Value& v, const BuiltinCall& c) {
  if (c.args.empty()) return RuntimeError(c.line, "attr needs a name");
  if (v.is_dict()) {
    const Value* x = v.dict().Find(Str(c.args[0]));
    return x != nullptr ? *x : Value::MakeUndefined(Str(c.args[0]));
  }
  return Value::MakeUndefined(Str(c.args[0]));
}

// batch(linecount, fill_with): lists of linecount items, the last one padded when asked.
Result<Value> FilterBatch(const Value& v, const BuiltinCall& c) {
  const Value* count = Arg(c.args, c.kw, 0, "linecount");
  const Value* fill = Arg(c.args, c.kw, 1, "fill_with");
  if (count == nullptr || count->ToInt() <= 0) return RuntimeError(c.line, "batch needs a positive size");
  LL_ASSIGN_OR_RETURN(List items, Iterate(v, c.line));
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

// ---- Ordering: sort, dictsort, unique, min, max ----------------------------------------

// The items a sort-like filter orders and the key it orders each by.
struct Keyed {
  List items;
  std::vector<Value> keys;
};

// case_sensitive: the keyword, else positional argument `pos` (where the filter takes one).
bool CaseSensitive(const BuiltinCall& c, std::optional<size_t> pos) {
  const Value* cs = Kw(c.kw, "case_sensitive");
  if (cs == nullptr && pos && c.args.size() > *pos) cs = &c.args[*pos];
  return cs != nullptr && cs->Truthy();
}

// reverse: the keyword, else positional argument `pos`.
bool Reverse(const BuiltinCall& c, size_t pos) {
  if (const Value* r = Kw(c.kw, "reverse")) return r->Truthy();
  return c.args.size() > pos && c.args[pos].Truthy();
}

// The items of v keyed by themselves or their attribute path, one step charged per item.
Result<Keyed> KeyItems(const Value& v, const BuiltinCall& c, const Value* attr, bool case_sensitive) {
  Keyed k;
  LL_ASSIGN_OR_RETURN(k.items, Iterate(v, c.line));
  for (const Value& item : k.items) {
    Value key = item;
    if (attr != nullptr && !attr->is_none()) {
      LL_ASSIGN_OR_RETURN(key, AttrPath(c.in, item, Str(*attr), c.line));
    }
    k.keys.push_back(SortKey(key, case_sensitive));
  }
  LL_RETURN_IF_ERROR(c.in.Step(c.line, k.items.size()));
  return k;
}

// Indices of keys in stable ascending order; keys Python cannot compare fail.
Result<std::vector<size_t>> AscendingOrder(const std::vector<Value>& keys, int line) {
  std::vector<size_t> order(keys.size());
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
  return order;
}

// The items in key order, descending with reverse (equal keys keep their ascending order).
Result<Value> SortedItems(const Keyed& k, bool reverse, int line) {
  LL_ASSIGN_OR_RETURN(std::vector<size_t> order, AscendingOrder(k.keys, line));
  if (reverse) {  // the keys compared without error above
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto r = Less(k.keys[b], k.keys[a]);
      return r.ok() && *r;
    });
  }
  List out;
  for (size_t i : order) out.push_back(k.items[i]);
  return Value(std::move(out));
}

// sort(reverse, case_sensitive, attribute).
Result<Value> FilterSort(const Value& v, const BuiltinCall& c) {
  const bool case_sensitive = CaseSensitive(c, 1);
  const Value* attr = Kw(c.kw, "attribute");
  if (attr == nullptr && c.args.size() > 2) attr = &c.args[2];
  const bool reverse = Reverse(c, 0);
  LL_ASSIGN_OR_RETURN(Keyed k, KeyItems(v, c, attr, case_sensitive));
  return SortedItems(k, reverse, c.line);
}

// dictsort(case_sensitive, by, reverse): a dict's (key, value) pairs by key or by value.
Result<Value> FilterDictSort(const Value& v, const BuiltinCall& c) {
  const bool case_sensitive = CaseSensitive(c, 0);
  const bool reverse = Reverse(c, 2);
  if (!v.is_dict()) return RuntimeError(c.line, "dictsort needs a mapping");
  Keyed k;
  const Dict& d = v.dict();
  for (size_t i = 0; i < d.items.size(); ++i) {
    k.items.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
  }
  std::string by = "key";
  if (const Value* b = Kw(c.kw, "by")) by = Str(*b);
  else if (c.args.size() > 1) by = Str(c.args[1]);
  for (const Value& item : k.items) {
    k.keys.push_back(SortKey(item.list()[by == "value" ? 1 : 0], case_sensitive));
  }
  LL_RETURN_IF_ERROR(c.in.Step(c.line, k.items.size()));
  return SortedItems(k, reverse, c.line);
}

// unique(case_sensitive, attribute): the first item of each key, in input order.
Result<Value> FilterUnique(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Keyed k, KeyItems(v, c, Kw(c.kw, "attribute"), CaseSensitive(c, 0)));
  List out;
  std::vector<Value> seen;
  for (size_t i = 0; i < k.items.size(); ++i) {
    bool dup = false;
    for (const Value& s : seen) {
      if (Equal(s, k.keys[i])) {
        dup = true;
        break;
      }
    }
    if (!dup) {
      seen.push_back(k.keys[i]);
      out.push_back(k.items[i]);
    }
  }
  return Value(std::move(out));
}

// min / max(case_sensitive=, attribute=): the first / last item in stable key order;
// undefined, named after the filter, when there are none.
Result<Value> Extreme(const Value& v, const BuiltinCall& c, bool last) {
  LL_ASSIGN_OR_RETURN(Keyed k, KeyItems(v, c, Kw(c.kw, "attribute"), CaseSensitive(c, std::nullopt)));
  LL_ASSIGN_OR_RETURN(std::vector<size_t> order, AscendingOrder(k.keys, c.line));
  if (k.items.empty()) return Value::MakeUndefined(last ? "max" : "min");
  return last ? k.items[order.back()] : k.items[order.front()];
}

Result<Value> FilterMin(const Value& v, const BuiltinCall& c) { return Extreme(v, c, false); }
Result<Value> FilterMax(const Value& v, const BuiltinCall& c) { return Extreme(v, c, true); }

// Every filter by name, aliases included; sorted for FindFn.
constexpr auto kFilters = std::to_array<NamedFn<BuiltinFn>>({
    {"abs", FilterAbs},
    {"attr", FilterAttr},
    {"batch", FilterBatch},
    {"capitalize", FilterCapitalize},
    {"center", FilterCenter},
    {"count", FilterLength},
    {"d", FilterDefault},
    {"default", FilterDefault},
    {"dictsort", FilterDictSort},
    {"e", FilterEscape},
    {"escape", FilterEscape},
    {"first", FilterFirst},
    {"float", FilterFloat},
    {"forceescape", FilterForceEscape},
    {"format", FilterFormat},
    {"indent", FilterIndent},
    {"int", FilterInt},
    {"items", FilterItems},
    {"join", FilterJoin},
    {"last", FilterLast},
    {"length", FilterLength},
    {"list", FilterList},
    {"lower", FilterLower},
    {"map", FilterMap},
    {"max", FilterMax},
    {"min", FilterMin},
    {"reject", FilterReject},
    {"rejectattr", FilterRejectAttr},
    {"replace", FilterReplace},
    {"reverse", FilterReverse},
    {"round", FilterRound},
    {"safe", FilterSafe},
    {"select", FilterSelect},
    {"selectattr", FilterSelectAttr},
    {"sort", FilterSort},
    {"string", FilterString},
    {"striptags", FilterStripTags},
    {"sum", FilterSum},
    {"title", FilterTitle},
    {"tojson", FilterToJson},
    {"trim", FilterTrim},
    {"unique", FilterUnique},
    {"upper", FilterUpper},
    {"wordcount", FilterWordCount},
});
static_assert(StrictlySorted(kFilters), "kFilters must be sorted by name, without duplicates");

}  // namespace

Result<Value> ApplyFilter(Interp& in, const std::string& name, const Value& v, const Args& args,
                          const Kwargs& kw, int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  const BuiltinFn fn = FindFn(kFilters, name);
  if (fn == nullptr) return RuntimeError(line, "no filter named '" + name + "'");
  return fn(v, BuiltinCall{in, name, args, kw, line});
}

}  // namespace lifeline::jinja
