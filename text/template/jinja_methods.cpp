// Built-in methods of str, dict and list (`x.name(args)`), each with the semantics of its
// Python namesake. Templates cannot modify values: the mutating dict and list methods fail.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "text/template/jinja_builtins.h"

namespace lifeline::jinja {
namespace {

bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

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

Value StrList(const std::vector<std::string>& parts) {
  List l;
  l.reserve(parts.size());
  for (const auto& p : parts) l.push_back(Value(p));
  return Value(std::move(l));
}

// The string argument i (or keyword kwname), else null.
const std::string* StrArg(const BuiltinCall& c, size_t i, std::string_view kwname) {
  const Value* v = Arg(c.args, c.kw, i, kwname);
  return v != nullptr && v->is_string() ? &v->str() : nullptr;
}

// The mutating methods are methods too (so `d.update` never reaches a key named "update"), and
// calling one fails with jinja2's sandbox message: templates cannot modify values.
Result<Value> Unsafe(const Value& obj, const BuiltinCall& c) {
  return RuntimeError(c.line, "access to attribute '" + c.name + "' of '" + TypeName(obj) +
                                  "' object is unsafe (templates cannot modify values)");
}

// ---- str -------------------------------------------------------------------------------

Result<Value> StrStrip(const Value& obj, const BuiltinCall& c) {
  return Value(Strip(obj.str(), StrArg(c, 0, "chars"), true, true));
}
Result<Value> StrLStrip(const Value& obj, const BuiltinCall& c) {
  return Value(Strip(obj.str(), StrArg(c, 0, "chars"), true, false));
}
Result<Value> StrRStrip(const Value& obj, const BuiltinCall& c) {
  return Value(Strip(obj.str(), StrArg(c, 0, "chars"), false, true));
}

// split / rsplit(sep, maxsplit): on sep, else on whitespace runs; at most maxsplit splits
// (< 0: all), counted from the right by rsplit.
Result<Value> SplitStr(const Value& obj, const BuiltinCall& c, bool from_right) {
  const std::string& s = obj.str();
  const Value* sep = Arg(c.args, c.kw, 0, "sep");
  const Value* maxv = Arg(c.args, c.kw, 1, "maxsplit");
  const int64_t maxsplit = maxv != nullptr ? maxv->ToInt() : -1;
  if (sep == nullptr || sep->is_none()) {
    if (from_right && maxsplit >= 0) return RuntimeError(c.line, "rsplit with maxsplit and no separator is not supported");
    return StrList(SplitWhitespace(s, maxsplit));
  }
  if (!sep->is_string() || sep->str().empty()) return RuntimeError(c.line, "empty separator");
  if (from_right && maxsplit >= 0) {
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

Result<Value> StrSplit(const Value& obj, const BuiltinCall& c) { return SplitStr(obj, c, false); }
Result<Value> StrRSplit(const Value& obj, const BuiltinCall& c) { return SplitStr(obj, c, true); }

// startswith / endswith(str or tuple of str).
Result<Value> AffixTest(const Value& obj, const BuiltinCall& c, bool at_end) {
  const std::string& s = obj.str();
  if (c.args.empty()) return RuntimeError(c.line, c.name + " needs an argument");
  std::vector<std::string> cands;
  if (c.args[0].is_string()) {
    cands.push_back(c.args[0].str());
  } else if (c.args[0].is_list()) {
    for (const Value& x : c.args[0].list()) {
      if (!x.is_string()) return RuntimeError(c.line, c.name + ": tuple items must be strings");
      cands.push_back(x.str());
    }
  } else {
    return RuntimeError(c.line, c.name + std::string(" first arg must be str or a tuple of str, not ") + TypeName(c.args[0]));
  }
  for (const std::string& cand : cands) {
    if (!at_end ? s.rfind(cand, 0) == 0
                : (s.size() >= cand.size() && s.compare(s.size() - cand.size(), cand.size(), cand) == 0)) {
      return Value(true);
    }
  }
  return Value(false);
}

Result<Value> StrStartsWith(const Value& obj, const BuiltinCall& c) { return AffixTest(obj, c, false); }
Result<Value> StrEndsWith(const Value& obj, const BuiltinCall& c) { return AffixTest(obj, c, true); }

Result<Value> StrUpper(const Value& obj, const BuiltinCall& c) { return Value(Upper(obj.str())); }
Result<Value> StrLower(const Value& obj, const BuiltinCall& c) { return Value(Lower(obj.str())); }
Result<Value> StrTitle(const Value& obj, const BuiltinCall& c) { return Value(PyTitle(obj.str())); }
Result<Value> StrCapitalize(const Value& obj, const BuiltinCall& c) {
  return Value(Capitalize(obj.str()));
}

// replace(old, new, count). The growth bound is charged before building; Markup.replace
// escapes its arguments.
Result<Value> StrReplace(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  const Args& args = c.args;
  if (args.size() < 2 || !args[0].is_string() || !args[1].is_string()) {
    return RuntimeError(c.line, "replace(old, new[, count]) needs two strings");
  }
  const int64_t count = args.size() > 2 ? args[2].ToInt() : -1;
  const uint64_t growth = args[1].str().size() > args[0].str().size()
                              ? (args[1].str().size() - args[0].str().size() + 1)
                              : 1;
  LL_RETURN_IF_ERROR(c.in.Built(std::min<uint64_t>(s.size() * growth, s.size() + 1), c.line));
  if (obj.is_markup()) {
    std::string r = Replace(s, EscapeForMarkup(args[0]), EscapeForMarkup(args[1]), count);
    LL_RETURN_IF_ERROR(c.in.Built(r.size(), c.line));
    return Value::Markup(std::move(r));
  }
  std::string r = Replace(s, args[0].str(), args[1].str(), count);
  LL_RETURN_IF_ERROR(c.in.Built(r.size(), c.line));
  return Value(std::move(r));
}

// find / rfind / index(sub): the code-point offset of sub (the last one for rfind); not found
// is -1, or an error for index.
Result<Value> FindSub(const Value& obj, const BuiltinCall& c, bool from_right, bool must_find) {
  const std::string& s = obj.str();
  const std::string* sub = StrArg(c, 0, "sub");
  if (sub == nullptr) return RuntimeError(c.line, c.name + " needs a string argument");
  const size_t p = from_right ? s.rfind(*sub) : s.find(*sub);
  if (p == std::string::npos) {
    if (must_find) return RuntimeError(c.line, "substring not found");
    return Value(-1);
  }
  // Byte offset to code-point offset.
  int64_t cp = 0;
  for (size_t i = 0; i < p; ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) ++cp;
  }
  return Value(cp);
}

Result<Value> StrFind(const Value& obj, const BuiltinCall& c) { return FindSub(obj, c, false, false); }
Result<Value> StrRFind(const Value& obj, const BuiltinCall& c) { return FindSub(obj, c, true, false); }
Result<Value> StrIndex(const Value& obj, const BuiltinCall& c) { return FindSub(obj, c, false, true); }

// count(sub): non-overlapping occurrences; "" occurs between every code point and at both ends.
Result<Value> StrCount(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  const std::string* sub = StrArg(c, 0, "sub");
  if (sub == nullptr) return RuntimeError(c.line, c.name + " needs a string argument");
  if (sub->empty()) return Value(static_cast<int64_t>(CodePoints(s).size() + 1));
  int64_t n = 0;
  for (size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
  return Value(n);
}

// sep.join(iterable): strings only, as Python; Markup.join escapes what it joins instead.
Result<Value> StrJoin(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  if (c.args.empty()) return RuntimeError(c.line, "join needs an iterable");
  LL_ASSIGN_OR_RETURN(List items, Iterate(c.args[0], c.line));
  std::string out;
  if (obj.is_markup()) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += s;
      out += EscapeForMarkup(items[i]);
      LL_RETURN_IF_ERROR(c.in.Built(0, c.line));
    }
    LL_RETURN_IF_ERROR(c.in.Built(out.size(), c.line));
    return Value::Markup(std::move(out));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return RuntimeError(c.line, "sequence item " + std::to_string(i) + ": expected str instance, " + TypeName(items[i]) + " found");
    }
    if (i > 0) out += s;
    out += items[i].str();
    if (out.size() > 0) LL_RETURN_IF_ERROR(c.in.Built(0, c.line));
  }
  LL_RETURN_IF_ERROR(c.in.Built(out.size(), c.line));
  return Value(std::move(out));
}

Result<Value> StrSplitLines(const Value& obj, const BuiltinCall& c) {
  return StrList(SplitLines(obj.str()));
}

// One replacement field of str.format, "{field!conv}" without its braces: its text.
// auto_index counts the automatically numbered fields so far.
Result<std::string> FormatField(std::string field, const BuiltinCall& c, size_t* auto_index) {
  char conv = 's';
  if (const size_t bang = field.find('!'); bang != std::string::npos) {
    if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's')) {
      return RuntimeError(c.line, "str.format: only !r and !s conversions are supported");
    }
    conv = field[bang + 1];
    field.resize(bang);
  }
  if (field.find(':') != std::string::npos || field.find('.') != std::string::npos ||
      field.find('[') != std::string::npos) {
    return RuntimeError(c.line, "str.format: format specs and field attributes are not supported");
  }
  const Value* arg = nullptr;
  if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
    const size_t idx = field.empty() ? (*auto_index)++ : std::strtoull(field.c_str(), nullptr, 10);
    if (idx >= c.args.size()) return RuntimeError(c.line, "str.format: replacement index " + std::to_string(idx) + " out of range");
    arg = &c.args[idx];
  } else {
    arg = Kw(c.kw, field);
    if (arg == nullptr) return RuntimeError(c.line, "str.format: no keyword argument '" + field + "'");
  }
  return conv == 'r' ? Repr(*arg) : Str(*arg);
}

// str.format: {} {0} {name}, !r / !s, {{ and }}; no format specs.
Result<Value> StrFormat(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') ++i;
      else return RuntimeError(c.line, "str.format: single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (ch != '{') {
      out.push_back(ch);
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) return RuntimeError(c.line, "str.format: unmatched '{'");
    std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    LL_ASSIGN_OR_RETURN(std::string text, FormatField(std::move(field), c, &auto_index));
    out += text;
    LL_RETURN_IF_ERROR(c.in.Built(0, c.line));
  }
  LL_RETURN_IF_ERROR(c.in.Built(out.size(), c.line));
  return Value(std::move(out));
}

// removeprefix / removesuffix. Both read a keyword argument named "prefix"; Python takes
// the argument positionally only, so no real template names it.
Result<Value> StrRemovePrefix(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  const std::string* a = StrArg(c, 0, "prefix");
  if (a == nullptr) return RuntimeError(c.line, c.name + " needs a string");
  return Value(s.rfind(*a, 0) == 0 ? s.substr(a->size()) : s);
}

Result<Value> StrRemoveSuffix(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  const std::string* a = StrArg(c, 0, "prefix");
  if (a == nullptr) return RuntimeError(c.line, c.name + " needs a string");
  if (s.size() >= a->size() && s.compare(s.size() - a->size(), a->size(), *a) == 0) {
    return Value(s.substr(0, s.size() - a->size()));
  }
  return Value(s);
}

// Python's str.isX over ASCII bytes: false for "", else whether every byte passes `ok`; the
// case tests (isupper / islower) also need at least one letter.
Value AllBytes(const std::string& s, bool (*ok)(char), bool needs_cased) {
  if (s.empty()) return Value(false);
  bool cased = false;
  for (char ch : s) {
    if (!ok(ch)) return Value(false);
    cased = cased || IsAsciiAlpha(ch);
  }
  return Value(needs_cased ? cased : true);
}

bool IsAsciiDigit(char ch) { return ch >= '0' && ch <= '9'; }

Result<Value> StrIsDigit(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), IsAsciiDigit, false);
}
Result<Value> StrIsAlpha(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), IsAsciiAlpha, false);
}
Result<Value> StrIsAlnum(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), [](char ch) { return IsAsciiDigit(ch) || IsAsciiAlpha(ch); }, false);
}
Result<Value> StrIsSpace(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), [](char ch) { return PySpace(static_cast<unsigned char>(ch)); }, false);
}
Result<Value> StrIsUpper(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), [](char ch) { return !(ch >= 'a' && ch <= 'z'); }, true);
}
Result<Value> StrIsLower(const Value& obj, const BuiltinCall& c) {
  return AllBytes(obj.str(), [](char ch) { return !(ch >= 'A' && ch <= 'Z'); }, true);
}

// zfill(width): zeros after any sign, up to width code points.
Result<Value> StrZfill(const Value& obj, const BuiltinCall& c) {
  const std::string& s = obj.str();
  const int64_t w = c.args.empty() ? 0 : std::clamp<int64_t>(c.args[0].ToInt(), 0, 4096);
  const int64_t n = static_cast<int64_t>(CodePoints(s).size());
  if (w <= n) return Value(s);
  std::string pad(static_cast<size_t>(w - n), '0');
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) return Value(s.substr(0, 1) + pad + s.substr(1));
  return Value(pad + s);
}

// ---- dict ------------------------------------------------------------------------------

Result<Value> DictItems(const Value& obj, const BuiltinCall& c) {
  const Dict& d = obj.dict();
  List l;
  for (size_t i = 0; i < d.items.size(); ++i) {
    l.push_back(Value::Tuple(List{d.KeyAt(i), d.items[i].second}));
  }
  return Value(std::move(l));
}

Result<Value> DictKeys(const Value& obj, const BuiltinCall& c) {
  const Dict& d = obj.dict();
  List l;
  for (size_t i = 0; i < d.items.size(); ++i) l.push_back(d.KeyAt(i));
  return Value(std::move(l));
}

Result<Value> DictValues(const Value& obj, const BuiltinCall& c) {
  const Dict& d = obj.dict();
  List l;
  for (size_t i = 0; i < d.items.size(); ++i) l.push_back(d.items[i].second);
  return Value(std::move(l));
}

// get(key, default=None).
Result<Value> DictGet(const Value& obj, const BuiltinCall& c) {
  if (c.args.empty()) return RuntimeError(c.line, "get needs a key");
  const Value* x = obj.dict().Find(KeyId(c.args[0]));
  if (x != nullptr) return *x;
  return c.args.size() > 1 ? c.args[1] : Value(None{});
}

// Python's dict.copy(): a new dict of the same items.
Result<Value> DictCopy(const Value& obj, const BuiltinCall& c) {
  const Dict& d = obj.dict();
  auto copy = std::make_shared<Dict>();
  copy->items = d.items;
  copy->typed_keys = d.typed_keys;
  return Value(std::move(copy));
}

// ---- list ------------------------------------------------------------------------------

Result<Value> ListIndex(const Value& obj, const BuiltinCall& c) {
  if (c.args.empty()) return RuntimeError(c.line, c.name + " needs an argument");
  const List& l = obj.list();
  for (size_t i = 0; i < l.size(); ++i) {
    if (Equal(l[i], c.args[0])) return Value(static_cast<int64_t>(i));
  }
  return RuntimeError(c.line, "value is not in list");
}

Result<Value> ListCount(const Value& obj, const BuiltinCall& c) {
  if (c.args.empty()) return RuntimeError(c.line, c.name + " needs an argument");
  int64_t n = 0;
  for (const Value& x : obj.list()) {
    if (Equal(x, c.args[0])) ++n;
  }
  return Value(n);
}

Result<Value> ListCopy(const Value& obj, const BuiltinCall& c) { return Value(List(obj.list())); }

// The methods of each type by name, sorted for FindFn. IsMethod is exactly these names.
constexpr auto kStrMethods = std::to_array<NamedFn<BuiltinFn>>({
    {"capitalize", StrCapitalize},
    {"count", StrCount},
    {"endswith", StrEndsWith},
    {"find", StrFind},
    {"format", StrFormat},
    {"index", StrIndex},
    {"isalnum", StrIsAlnum},
    {"isalpha", StrIsAlpha},
    {"isdigit", StrIsDigit},
    {"islower", StrIsLower},
    {"isspace", StrIsSpace},
    {"isupper", StrIsUpper},
    {"join", StrJoin},
    {"lower", StrLower},
    {"lstrip", StrLStrip},
    {"removeprefix", StrRemovePrefix},
    {"removesuffix", StrRemoveSuffix},
    {"replace", StrReplace},
    {"rfind", StrRFind},
    {"rsplit", StrRSplit},
    {"rstrip", StrRStrip},
    {"split", StrSplit},
    {"splitlines", StrSplitLines},
    {"startswith", StrStartsWith},
    {"strip", StrStrip},
    {"title", StrTitle},
    {"upper", StrUpper},
    {"zfill", StrZfill},
});
static_assert(StrictlySorted(kStrMethods), "kStrMethods must be sorted by name, without duplicates");

constexpr auto kDictMethods = std::to_array<NamedFn<BuiltinFn>>({
    {"clear", Unsafe},
    {"copy", DictCopy},
    {"get", DictGet},
    {"items", DictItems},
    {"keys", DictKeys},
    {"pop", Unsafe},
    {"popitem", Unsafe},
    {"setdefault", Unsafe},
    {"update", Unsafe},
    {"values", DictValues},
});
static_assert(StrictlySorted(kDictMethods), "kDictMethods must be sorted by name, without duplicates");

constexpr auto kListMethods = std::to_array<NamedFn<BuiltinFn>>({
    {"append", Unsafe},
    {"clear", Unsafe},
    {"copy", ListCopy},
    {"count", ListCount},
    {"extend", Unsafe},
    {"index", ListIndex},
    {"insert", Unsafe},
    {"pop", Unsafe},
    {"remove", Unsafe},
    {"reverse", Unsafe},
    {"sort", Unsafe},
});
static_assert(StrictlySorted(kListMethods), "kListMethods must be sorted by name, without duplicates");

}  // namespace

bool IsMethod(const Value& obj, const std::string& name) {
  if (obj.is_string()) return FindFn(kStrMethods, name) != nullptr;
  // jinja2's getattr tries the attribute before the key, so a dict key named like a method
  // ("items" in a JSON schema) is reached only as d['items'], as in Python.
  if (obj.is_dict() && !obj.dict().is_namespace) return FindFn(kDictMethods, name) != nullptr;
  if (obj.is_list()) return FindFn(kListMethods, name) != nullptr;
  return false;
}

Result<Value> CallMethod(Interp& in, const Value& obj, const std::string& name,
                         const Args& args, const Kwargs& kw, int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  const BuiltinCall c{in, name, args, kw, line};
  if (obj.is_string()) {
    if (const BuiltinFn fn = FindFn(kStrMethods, name)) return fn(obj, c);
    return RuntimeError(line, "str." + name + "() is not supported in chat templates");
  }
  if (obj.is_dict()) {
    const BuiltinFn fn = FindFn(kDictMethods, name);
    return fn != nullptr ? fn(obj, c) : Unsafe(obj, c);
  }
  if (obj.is_list()) {
    const BuiltinFn fn = FindFn(kListMethods, name);
    return fn != nullptr ? fn(obj, c) : Unsafe(obj, c);
  }
  return RuntimeError(line, std::string("'") + TypeName(obj) + "' object has no method '" + name + "'");
}

}  // namespace lifeline::jinja
