#include "text/template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "text/template/jinja_utf8.h"

namespace lifeline::jinja {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  if (!typed_keys.empty()) typed_keys.push_back(Value(key));
  items.emplace_back(std::move(key), std::move(v));
}

std::string KeyId(const Value& key) {
  switch (key.kind()) {
    case Value::kString: return key.str();
    case Value::kBool:
    case Value::kInt: return "\x01n" + std::to_string(key.ToInt());
    case Value::kFloat: {
      const double d = key.as_float();
      if (d == std::floor(d) && d > -9.2e18 && d < 9.2e18) {
        return "\x01n" + std::to_string(static_cast<int64_t>(d));
      }
      return "\x01f" + FloatRepr(d);
    }
    case Value::kNone: return "\x01None";
    default: return "\x01" + ToStr(key);
  }
}

void Dict::SetKey(const Value& key, Value v) {
  if (key.is_string() && typed_keys.empty()) return Set(key.str(), std::move(v));
  std::string id = KeyId(key);
  for (auto& [k, old] : items) {
    if (k == id) {
      old = std::move(v);  // Python keeps the first key object, replaces the value
      return;
    }
  }
  if (typed_keys.empty()) {
    for (const auto& kv : items) typed_keys.push_back(Value(kv.first));
  }
  typed_keys.push_back(key);
  items.emplace_back(std::move(id), std::move(v));
}

Value Dict::KeyAt(size_t i) const {
  if (!typed_keys.empty()) return typed_keys[i];
  return Value(items[i].first);
}

void Value::SetDepth() {
  uint32_t d = 0;
  if (kind() == kList) {
    for (const Value& x : list()) d = std::max(d, x.depth_);
  } else if (kind() == kDict) {
    if (dict().is_namespace) {
      depth_ = 1;
      return;
    }
    for (const auto& kv : dict().items) d = std::max(d, kv.second.depth_);
  }
  depth_ = d + 1;
}

double Value::ToDouble() const {
  switch (kind()) {
    case kBool: return as_bool() ? 1.0 : 0.0;
    case kInt: return static_cast<double>(as_int());
    case kFloat: return as_float();
    default: return 0.0;
  }
}

int64_t Value::ToInt() const {
  switch (kind()) {
    case kBool: return as_bool() ? 1 : 0;
    case kInt: return as_int();
    case kFloat: {
      const double d = as_float();
      if (!(d > -9.2e18 && d < 9.2e18)) return 0;
      return static_cast<int64_t>(d);
    }
    default: return 0;
  }
}

bool Value::Truthy() const {
  switch (kind()) {
    case kUndefined:
    case kNone: return false;
    case kBool: return as_bool();
    case kInt: return as_int() != 0;
    case kFloat: return as_float() != 0.0;
    case kString: return !str().empty();
    case kList: return !list().empty();
    case kDict: return dict().is_namespace || !dict().items.empty();
    case kCallable: return true;
  }
  return false;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(FromJson(e));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d->items.emplace_back(it.key(), FromJson(it.value()));
      }
      return Value(std::move(d));
    }
    default: return Value(None{});  // binary / discarded: not produced by a JSON parse
  }
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then laid out by Python's repr rule:
  // positional when -4 <= exponent < 16, else d.ddde+XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  const int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp10 - 1), '0');
      out += digits;
    } else {
      const size_t int_len = static_cast<size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
      }
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return out;
}

namespace {

// Python's str.isprintable() is false for these (the ones a chat conversation can carry).
bool NonPrintable(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad || cp == 0x2028 ||
         cp == 0x2029 || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2060 && cp <= 0x2064) ||
         cp == 0xfeff || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x1680 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

std::string StrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = DecodeUtf8At(s, &i);
    char buf[16];
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == static_cast<uint32_t>(q)) {
      out += '\\';
      out += q;
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (NonPrintable(cp)) {
      if (cp <= 0xff) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += q;
  return out;
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

struct JsonWriter {
  int indent;
  bool sort_keys;
  std::string item_sep, key_sep;
  int depth_limit = 256;

  Status Write(const Value& v, int level, std::string* out) const {
    if (level > depth_limit) return InvalidArgument("tojson: value nested deeper than 256");
    auto newline = [&](int lvl) {
      if (indent < 0) return;
      out->push_back('\n');
      out->append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
    };
    switch (v.kind()) {
      case Value::kNone: *out += "null"; return Status::Ok();
      case Value::kBool: *out += v.as_bool() ? "true" : "false"; return Status::Ok();
      case Value::kInt: *out += std::to_string(v.as_int()); return Status::Ok();
      case Value::kFloat: {
        const double d = v.as_float();
        if (std::isnan(d)) *out += "NaN";
        else if (std::isinf(d)) *out += d < 0 ? "-Infinity" : "Infinity";
        else *out += FloatRepr(d);
        return Status::Ok();
      }
      case Value::kString: AppendJsonString(v.str(), out); return Status::Ok();
      case Value::kList: {
        const List& l = v.list();
        if (l.empty()) {
          *out += "[]";
          return Status::Ok();
        }
        out->push_back('[');
        for (size_t i = 0; i < l.size(); ++i) {
          if (i > 0) *out += item_sep;
          newline(level + 1);
          LL_RETURN_IF_ERROR(Write(l[i], level + 1, out));
        }
        newline(level);
        out->push_back(']');
        return Status::Ok();
      }
      case Value::kDict: {
        const Dict& d = v.dict();
        if (d.is_namespace) return InvalidArgument("tojson: Object of type Namespace is not JSON serializable");
        if (d.items.empty()) {
          *out += "{}";
          return Status::Ok();
        }
        // json.dumps turns keys into strings: 1 -> "1", True -> "true", None -> "null".
        std::vector<std::pair<std::string, const Value*>> order;
        for (size_t i = 0; i < d.items.size(); ++i) {
          const Value k = d.KeyAt(i);
          std::string ks;
          switch (k.kind()) {
            case Value::kString: ks = k.str(); break;
            case Value::kBool: ks = k.as_bool() ? "true" : "false"; break;
            case Value::kNone: ks = "null"; break;
            case Value::kInt: ks = std::to_string(k.as_int()); break;
            case Value::kFloat: ks = FloatRepr(k.as_float()); break;
            default: return InvalidArgument("tojson: keys must be str, int, float, bool or None");
          }
          order.emplace_back(std::move(ks), &d.items[i].second);
        }
        if (sort_keys) {
          std::stable_sort(order.begin(), order.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out->push_back('{');
        for (size_t i = 0; i < order.size(); ++i) {
          if (i > 0) *out += item_sep;
          newline(level + 1);
          AppendJsonString(order[i].first, out);
          *out += key_sep;
          LL_RETURN_IF_ERROR(Write(*order[i].second, level + 1, out));
        }
        newline(level);
        out->push_back('}');
        return Status::Ok();
      }
      case Value::kUndefined:
        return InvalidArgument("tojson: Object of type Undefined is not JSON serializable");
      case Value::kCallable:
        return InvalidArgument("tojson: a macro or function is not JSON serializable");
    }
    return Status::Ok();
  }
};

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string EscapeForMarkup(const Value& v) {
  if (v.is_string() && v.is_markup()) return v.str();
  return HtmlEscape(v.is_string() ? v.str() : ToStr(v));
}

std::string Repr(const Value& v) {
  if (v.is_string()) return StrRepr(v.str());
  if (v.is_undefined()) return "Undefined";
  return ToStr(v);
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::kUndefined: return "";
    case Value::kNone: return "None";
    case Value::kBool: return v.as_bool() ? "True" : "False";
    case Value::kInt: return std::to_string(v.as_int());
    case Value::kFloat: return FloatRepr(v.as_float());
    case Value::kString: return v.str();
    case Value::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      const List& l = v.list();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += ", ";
        out += Repr(l[i]);
      }
      if (v.is_tuple() && l.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::kDict: {
      const Dict& d = v.dict();
      if (d.is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += Repr(d.KeyAt(i));
        out += ": ";
        out += Repr(d.items[i].second);
      }
      return out + "}";
    }
    case Value::kCallable: return "<macro>";
  }
  return "";
}

Result<std::string> ToJson(const Value& v, int indent, bool sort_keys,
                           const std::string* item_sep, const std::string* key_sep) {
  JsonWriter w;
  w.indent = indent;
  w.sort_keys = sort_keys;
  w.item_sep = item_sep != nullptr ? *item_sep : (indent < 0 ? ", " : ",");
  w.key_sep = key_sep != nullptr ? *key_sep : ": ";
  std::string out;
  LL_RETURN_IF_ERROR(w.Write(v, 0, &out));
  return out;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::kFloat || b.kind() == Value::kFloat) return a.ToDouble() == b.ToDouble();
    return a.ToInt() == b.ToInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::kUndefined:
    case Value::kNone: return true;
    case Value::kString: return a.str() == b.str();
    case Value::kList: {
      const List &x = a.list(), &y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace) return false;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.Find(k);
        if (o == nullptr || !Equal(v, *o)) return false;
      }
      return true;
    }
    case Value::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

Result<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::kFloat || b.kind() == Value::kFloat) return a.ToDouble() < b.ToDouble();
    return a.ToInt() < b.ToInt();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument(std::string("'<' not supported between instances of '") + TypeName(a) +
                         "' and '" + TypeName(b) + "'");
}

const char* TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::kUndefined: return "undefined";
    case Value::kNone: return "NoneType";
    case Value::kBool: return "bool";
    case Value::kInt: return "int";
    case Value::kFloat: return "float";
    case Value::kString: return "str";
    case Value::kList: return "list";
    case Value::kDict: return v.dict().is_namespace ? "Namespace" : "dict";
    case Value::kCallable: return "function";
  }
  return "?";
}

}  // namespace lifeline::jinja
