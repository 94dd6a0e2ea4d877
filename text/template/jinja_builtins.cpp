// The helpers the built-ins share (jinja_builtins.h), iteration, and the tests (`x is name`),
// each with the semantics of its jinja2 / Python namesake.
#include "text/template/jinja_builtins.h"

#include <algorithm>

#include "text/template/jinja_utf8.h"

namespace lifeline::jinja {

const Value* Kw(const Kwargs& kw, std::string_view name) {
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

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

bool PySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

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

std::string Capitalize(std::string s) {
  s = Lower(std::move(s));
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
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

namespace {

// The one argument of a comparison-like test (`x is eq 3`, `x is eq(3)`).
Result<Value> TestArg(const BuiltinCall& c) {
  if (c.args.empty()) return RuntimeError(c.line, "test '" + c.name + "' needs an argument");
  return c.args[0];
}

bool IsPlainDict(const Value& v) { return v.is_dict() && !v.dict().is_namespace; }

Result<bool> TestDefined(const Value& v, const BuiltinCall& c) { return !v.is_undefined(); }
Result<bool> TestUndefined(const Value& v, const BuiltinCall& c) { return v.is_undefined(); }
Result<bool> TestNone(const Value& v, const BuiltinCall& c) { return v.is_none(); }
Result<bool> TestString(const Value& v, const BuiltinCall& c) { return v.is_string(); }
Result<bool> TestMapping(const Value& v, const BuiltinCall& c) { return IsPlainDict(v); }
// Undefined iterates as empty, but is no sequence.
Result<bool> TestIterable(const Value& v, const BuiltinCall& c) {
  return v.is_list() || v.is_string() || v.is_undefined() || IsPlainDict(v);
}
Result<bool> TestSequence(const Value& v, const BuiltinCall& c) {
  return v.is_list() || v.is_string() || IsPlainDict(v);
}
// bool is a number (Python's bool is an int) but not an `integer`, as jinja2 decides.
Result<bool> TestNumber(const Value& v, const BuiltinCall& c) { return v.is_number(); }
Result<bool> TestInteger(const Value& v, const BuiltinCall& c) { return v.kind() == Value::kInt; }
Result<bool> TestFloat(const Value& v, const BuiltinCall& c) { return v.kind() == Value::kFloat; }
Result<bool> TestBoolean(const Value& v, const BuiltinCall& c) { return v.kind() == Value::kBool; }
Result<bool> TestTrue(const Value& v, const BuiltinCall& c) {
  return v.kind() == Value::kBool && v.as_bool();
}
Result<bool> TestFalse(const Value& v, const BuiltinCall& c) {
  return v.kind() == Value::kBool && !v.as_bool();
}
Result<bool> TestCallable(const Value& v, const BuiltinCall& c) {
  return v.kind() == Value::kCallable;
}
Result<bool> TestLower(const Value& v, const BuiltinCall& c) {
  return v.is_string() && Lower(v.str()) == v.str();
}
Result<bool> TestUpper(const Value& v, const BuiltinCall& c) {
  return v.is_string() && Upper(v.str()) == v.str();
}

Result<bool> TestEq(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return Equal(v, a);
}
Result<bool> TestNe(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return !Equal(v, a);
}
// Python's `is` on immutable values: equal and of one kind (1 is not 1.0 or true).
Result<bool> TestSameAs(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return v.kind() == a.kind() && Equal(v, a);
}

// Less(a, b), negated for <= and >=; values Python cannot order fail at the test's line.
Result<bool> Ordered(const Value& a, const Value& b, bool negate, int line) {
  Result<bool> r = Less(a, b);
  if (!r.ok()) return RuntimeError(line, r.status().message());
  return negate ? !*r : *r;
}
Result<bool> TestLt(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return Ordered(v, a, false, c.line);
}
Result<bool> TestGt(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return Ordered(a, v, false, c.line);
}
Result<bool> TestLe(const Value& v, const BuiltinCall& c) {  // not (a < v)
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return Ordered(a, v, true, c.line);
}
Result<bool> TestGe(const Value& v, const BuiltinCall& c) {  // not (v < a)
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  return Ordered(v, a, true, c.line);
}

// odd / even take any number, as an int.
Result<bool> TestOdd(const Value& v, const BuiltinCall& c) {
  if (!v.is_number()) return RuntimeError(c.line, "test 'odd' needs an integer");
  return v.ToInt() % 2 != 0;
}
Result<bool> TestEven(const Value& v, const BuiltinCall& c) {
  if (!v.is_number()) return RuntimeError(c.line, "test 'even' needs an integer");
  return v.ToInt() % 2 == 0;
}
Result<bool> TestDivisibleBy(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value a, TestArg(c));
  if (!v.is_number() || !a.is_number() || a.ToInt() == 0) {
    return RuntimeError(c.line, "test 'divisibleby' needs integers, divisor non-zero");
  }
  return v.ToInt() % a.ToInt() == 0;
}

// Python's `in`: a substring, a dict key or a list item.
Result<bool> TestIn(const Value& v, const BuiltinCall& c) {
  LL_ASSIGN_OR_RETURN(Value seq, TestArg(c));
  if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
  if (seq.is_dict()) return seq.dict().Find(KeyId(v)) != nullptr;
  if (seq.is_list()) {
    for (const Value& x : seq.list()) {
      if (Equal(v, x)) return true;
    }
    return false;
  }
  return RuntimeError(c.line, std::string("test 'in': '") + TypeName(seq) + "' is not a container");
}

// Every test by name, aliases and operator spellings included; sorted for FindFn.
constexpr auto kTests = std::to_array<NamedFn<TestFn>>({
    {"!=", TestNe},
    {"<", TestLt},
    {"<=", TestLe},
    {"==", TestEq},
    {">", TestGt},
    {">=", TestGe},
    {"boolean", TestBoolean},
    {"callable", TestCallable},
    {"defined", TestDefined},
    {"divisibleby", TestDivisibleBy},
    {"eq", TestEq},
    {"equalto", TestEq},
    {"even", TestEven},
    {"false", TestFalse},
    {"float", TestFloat},
    {"ge", TestGe},
    {"greaterthan", TestGt},
    {"gt", TestGt},
    {"in", TestIn},
    {"integer", TestInteger},
    {"iterable", TestIterable},
    {"le", TestLe},
    {"lessthan", TestLt},
    {"lower", TestLower},
    {"lt", TestLt},
    {"mapping", TestMapping},
    {"ne", TestNe},
    {"none", TestNone},
    {"number", TestNumber},
    {"odd", TestOdd},
    {"sameas", TestSameAs},
    {"sequence", TestSequence},
    {"string", TestString},
    {"true", TestTrue},
    {"undefined", TestUndefined},
    {"upper", TestUpper},
});
static_assert(StrictlySorted(kTests), "kTests must be sorted by name, without duplicates");

}  // namespace

Result<bool> ApplyTest(Interp& in, const std::string& name, const Value& v, const Args& args,
                       int line) {
  LL_RETURN_IF_ERROR(in.Step(line));
  const TestFn fn = FindFn(kTests, name);
  if (fn == nullptr) return RuntimeError(line, "no test named '" + name + "'");
  const Kwargs no_kwargs;  // tests take positional arguments only
  return fn(v, BuiltinCall{in, name, args, no_kwargs, line});
}

}  // namespace lifeline::jinja
