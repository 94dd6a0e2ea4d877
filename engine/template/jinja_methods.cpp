// Built-in methods of str, dict and list (`x.name(args)`), each with the semantics of its
// Python namesake. Templates cannot modify values: the mutating dict and list methods fail.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "engine/template/jinja_builtins.h"

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

}  // namespace

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
