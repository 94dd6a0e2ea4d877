// Built-in filters (`x | name(args)`), each with the semantics of its jinja2 namesake. Case
// mapping (upper, lower, title, capitalize) covers ASCII letters only; other characters pass
// through unchanged (role names and the markers templates compare are ASCII).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/template/jinja_builtins.h"
#include "engine/template/jinja_utf8.h"

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

}  // namespace lifeline::jinja
