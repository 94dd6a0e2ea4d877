// JSON Schema -> GBNF (see json_schema.h). One recursive visit per schema object returns a
// GBNF expression; objects, arrays and $ref targets become named rules, primitives are shared
// rules emitted once when first used.
#include "text/grammar/json_schema.h"

// GCC 12 reports a bogus overlap for `"literal" + std::string` once inlined (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "text/grammar/numeric_range.h"

namespace lifeline::grammar {
namespace {

using OJson = nlohmann::ordered_json;

const std::set<std::string>& KnownKeywords() {
  static const std::set<std::string> k = {
      "type", "properties", "required", "additionalProperties", "items", "minItems",
      "maxItems", "enum", "const", "anyOf", "allOf", "$ref", "$defs", "definitions",
      "format", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum",
      // Annotations: no effect on the text.
      "description", "title", "default", "examples", "$schema", "$id", "$comment",
      "deprecated", "readOnly", "writeOnly"};
  return k;
}

// Primitive rules by name (without prefix); "$" stands for the prefix in the bodies.
const std::map<std::string, std::string>& PrimitiveBodies() {
  static const std::map<std::string, std::string> p = {
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))"},
      {"string", R"("\"" $char* "\"" $space)"},
      {"number",
       R"("-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? $space)"},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ) $space)"},
      {"boolean", R"(( "true" | "false" ) $space)"},
      {"null", R"("null" $space)"},
      {"value", R"($object | $array | $string | $number | $boolean | $null)"},
      {"object",
       R"("{" $space ( $string ":" $space $value ( "," $space $string ":" $space $value )* )? "}" $space)"},
      {"array", R"("[" $space ( $value ( "," $space $value )* )? "]" $space)"},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))"},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"($date "T" $time)"},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
  };
  return p;
}

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 48) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "r" : out;
}

class Converter {
 public:
  Converter(const OJson& root, const JsonSchemaOptions& o) : root_(root), o_(o) {
    for (const auto& [name, body] : PrimitiveBodies()) taken_.insert(o_.rule_prefix + name);
    taken_.insert(o_.rule_prefix + "space");
    taken_.insert(o_.rule_prefix + "root");
  }

  Result<std::string> Run() {
    for (char c : o_.rule_prefix) {
      bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_';
      if (!word) return InvalidArgument("rule_prefix: only letters, digits, '-' and '_' allowed");
    }
    const std::string root_name = o_.rule_prefix + "root";
    refs_["#"] = root_name;
    LL_ASSIGN_OR_RETURN(std::string body, Visit(root_, "schema", "root", 0));
    LL_RETURN_IF_ERROR(SetRule(root_name, body));
    std::string out = root_name + " ::= " + body + "\n";
    for (const auto& [name, b] : rules_)
      if (name != root_name) out += name + " ::= " + b + "\n";
    return out;
  }

 private:
  Status TooBig() const {
    return ResourceExhausted("schema: the grammar would exceed " +
                             std::to_string(o_.max_grammar_bytes) + " bytes (max_grammar_bytes)");
  }

  Status SetRule(const std::string& name, const std::string& body) {
    bytes_ += static_cast<int64_t>(name.size() + body.size() + 6);
    if (bytes_ > o_.max_grammar_bytes) return TooBig();
    auto [it, inserted] = rule_index_.emplace(name, rules_.size());
    if (inserted) {
      rules_.emplace_back(name, body);
    } else {
      rules_[it->second].second = body;
    }
    return Status::Ok();
  }

  std::string NewRuleName(const std::string& hint) {
    std::string base = o_.rule_prefix + Sanitize(hint);
    std::string name = base;
    for (int i = 2; taken_.count(name); ++i) name = base + "-" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  // Name of a shared primitive rule, emitting it (and what it uses) on first use.
  std::string Primitive(const std::string& name) {
    const std::string full = o_.rule_prefix + name;
    if (emitted_.count(full)) return full;
    emitted_.insert(full);
    std::string body;
    if (name == "space") {
      body = o_.max_whitespace_chars <= 0
                 ? "\"\""
                 : "| \" \" | \"\\n\" [ \\t]{0," + std::to_string(o_.max_whitespace_chars - 1) + "}";
    } else {
      const std::string& tmpl = PrimitiveBodies().at(name);
      for (size_t i = 0; i < tmpl.size(); ++i) {
        if (tmpl[i] != '$') {
          body += tmpl[i];
          continue;
        }
        size_t j = i + 1;
        while (j < tmpl.size() && (std::isalnum(static_cast<unsigned char>(tmpl[j])) || tmpl[j] == '-'))
          ++j;
        body += Primitive(tmpl.substr(i + 1, j - i - 1));
        i = j - 1;
      }
    }
    rule_index_.emplace(full, rules_.size());
    rules_.emplace_back(full, body);
    bytes_ += static_cast<int64_t>(full.size() + body.size() + 6);
    return full;
  }

  static Status Err(const std::string& path, const std::string& msg) {
    return InvalidArgument(path + ": " + msg);
  }

  Result<int64_t> Count(const OJson& s, const char* key, const std::string& path, int64_t dflt) {
    auto it = s.find(key);
    if (it == s.end()) return dflt;
    const std::string p = path + "." + key;
    if (!it->is_number_integer() && !(it->is_number_float() && it->get<double>() == std::floor(it->get<double>())))
      return Err(p, "expected a non-negative integer");
    double v = it->get<double>();
    if (v < 0) return Err(p, "expected a non-negative integer");
    if (v > o_.max_repetition) {
      return Status(StatusCode::kResourceExhausted,
                    p + ": " + std::to_string(static_cast<int64_t>(v)) + " is above the limit of " +
                        std::to_string(o_.max_repetition) + " (max_repetition)");
    }
    return static_cast<int64_t>(v);
  }

  Result<std::string> Visit(const OJson& s, const std::string& path, const std::string& hint,
                            int depth) {
    if (depth > o_.max_depth) {
      return Status(StatusCode::kResourceExhausted,
                    path + ": schema nested deeper than " + std::to_string(o_.max_depth) +
                        " (max_depth)");
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return Primitive("value");
      return Err(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Err(path, "expected a schema object");
    for (const auto& [key, value] : s.items())
      if (!KnownKeywords().count(key) && !o_.ignore_unknown_keywords) {
        return Err(path + "." + key, "not supported");
      }
    if (s.contains("$ref")) return Ref(s, path, depth);
    if (s.contains("enum") || s.contains("const")) return Enum(s, path);
    if (s.contains("anyOf")) return AnyOf(s, path, hint, depth);
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1)
        return Err(path + ".allOf", "only allOf with exactly one schema is supported");
      return Visit((*it)[0], path + ".allOf[0]", hint, depth + 1);
    }
    auto type = s.find("type");
    if (type == s.end()) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        return Object(s, path, hint, depth);
      if (s.contains("items") || s.contains("minItems") || s.contains("maxItems"))
        return Array(s, path, hint, depth);
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("format"))
        return String(s, path);
      if (HasBounds(s)) return Bounded(s, path, /*integer=*/false);
      return Primitive("value");
    }
    if (type->is_array()) {
      if (type->empty()) return Err(path + ".type", "expected at least one type");
      std::string alts;
      for (size_t i = 0; i < type->size(); ++i) {
        OJson one = s;
        one["type"] = (*type)[i];
        LL_ASSIGN_OR_RETURN(std::string e, OneType(one, path, hint, depth, path + ".type[" + std::to_string(i) + "]"));
        alts += (i ? " | " : "") + e;
      }
      return "( " + alts + " )";
    }
    return OneType(s, path, hint, depth, path + ".type");
  }

  Result<std::string> OneType(const OJson& s, const std::string& path, const std::string& hint,
                              int depth, const std::string& type_path) {
    const OJson& t = s["type"];
    if (!t.is_string()) return Err(type_path, "expected a type name");
    const std::string name = t.get<std::string>();
    if (name == "object") return Object(s, path, hint, depth);
    if (name == "array") return Array(s, path, hint, depth);
    if (name == "string") return String(s, path);
    if ((name == "number" || name == "integer") && HasBounds(s))
      return Bounded(s, path, name == "integer");
    if (name == "number" || name == "integer" || name == "boolean" || name == "null")
      return Primitive(name);
    return Err(type_path, "unknown type '" + name + "'");
  }

  static bool HasBounds(const OJson& s) {
    return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
           s.contains("exclusiveMaximum");
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum as an exact grammar
  // (numeric_range.h). Integers: any numeric bounds (rounded inward). Numbers: integer-valued
  // inclusive bounds, written without exponent; fractional or exclusive bounds on a number
  // are refused by name (their exact grammar is not built). Bounds past 16 digits are the
  // primitives' own limit.
  Result<std::string> Bounded(const OJson& s, const std::string& path, bool integer) {
    constexpr double kMax = static_cast<double>(kMaxDecimalMagnitude);
    int64_t lo = -kMaxDecimalMagnitude, hi = kMaxDecimalMagnitude;
    struct Keyword {
      const char* key;
      bool is_min, exclusive;
    };
    for (const auto& [key, is_min, exclusive] :
         {Keyword{"minimum", true, false}, Keyword{"maximum", false, false},
          Keyword{"exclusiveMinimum", true, true}, Keyword{"exclusiveMaximum", false, true}}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      const std::string at = path + "." + key;
      if (!it->is_number()) return Err(at, "expected a number");
      const double v = it->get<double>();
      if (!std::isfinite(v)) return Err(at, "expected a finite number");
      if (!integer && (exclusive || v != std::floor(v))) {
        return Err(at, "only integer-valued minimum / maximum are supported for type number");
      }
      double bound = is_min ? (exclusive ? std::floor(v) + 1 : std::ceil(v))
                            : (exclusive ? std::ceil(v) - 1 : std::floor(v));
      bound = std::clamp(bound, -kMax - 1, kMax + 1);
      if (is_min) {
        lo = std::max(lo, static_cast<int64_t>(std::max(bound, -kMax)));
        if (bound > kMax) return Err(at, "above the largest number written (16 digits)");
      } else {
        hi = std::min(hi, static_cast<int64_t>(std::min(bound, kMax)));
        if (bound < -kMax) return Err(at, "below the smallest number written (16 digits)");
      }
    }
    if (lo > hi) {
      return Err(path, std::string("no ") + (integer ? "integer" : "number") +
                           " lies between the minimum and the maximum");
    }
    const std::string body = integer ? IntegerRangeGbnf(lo, hi) : NumberRangeGbnf(lo, hi);
    bytes_ += static_cast<int64_t>(body.size());
    if (bytes_ > o_.max_grammar_bytes) return TooBig();
    return body + " " + Primitive("space");
  }

  Result<std::string> AnyOf(const OJson& s, const std::string& path, const std::string& hint,
                            int depth) {
    const OJson& list = s["anyOf"];
    if (!list.is_array() || list.empty())
      return Err(path + ".anyOf", "expected a non-empty array of schemas");
    for (const char* k : {"type", "properties", "items", "format", "minLength", "maxLength",
                          "minItems", "maxItems", "required", "additionalProperties", "allOf",
                          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return Err(path + "." + k, "not supported alongside anyOf");
    }
    std::string alts;
    for (size_t i = 0; i < list.size(); ++i) {
      LL_ASSIGN_OR_RETURN(std::string e, Visit(list[i], path + ".anyOf[" + std::to_string(i) + "]",
                                               hint + "-" + std::to_string(i), depth + 1));
      alts += (i ? " | " : "") + e;
    }
    return "( " + alts + " )";
  }

  static bool MatchesType(const OJson& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  Result<std::string> Enum(const OJson& s, const std::string& path) {
    std::vector<const OJson*> values;
    std::string where = path + (s.contains("enum") ? ".enum" : ".const");
    if (s.contains("enum")) {
      const OJson& e = s["enum"];
      if (!e.is_array() || e.empty()) return Err(where, "expected a non-empty array");
      for (const OJson& v : e) values.push_back(&v);
    }
    if (s.contains("const")) {
      const OJson& c = s["const"];
      if (values.empty()) {
        values.push_back(&c);
      } else {
        std::vector<const OJson*> kept;
        for (const OJson* v : values)
          if (*v == c) kept.push_back(v);
        values = kept;
      }
    }
    if (auto t = s.find("type"); t != s.end()) {
      std::vector<std::string> types;
      if (t->is_string()) types.push_back(t->get<std::string>());
      if (t->is_array())
        for (const OJson& x : *t)
          if (x.is_string()) types.push_back(x.get<std::string>());
      std::vector<const OJson*> kept;
      for (const OJson* v : values)
        for (const std::string& ty : types)
          if (MatchesType(*v, ty)) {
            kept.push_back(v);
            break;
          }
      values = kept;
    }
    if (values.empty()) return Err(where, "no value satisfies enum, const and type together");
    std::string alts;
    std::set<std::string> seen;
    for (const OJson* v : values) {
      std::string text;
      try {
        text = v->dump(-1, ' ', false, nlohmann::detail::error_handler_t::strict);
      } catch (const nlohmann::json::exception&) {
        return Err(where, "value is not valid UTF-8");
      }
      if (!seen.insert(text).second) continue;
      alts += (alts.empty() ? "" : " | ") + GbnfLiteral(text);
      bytes_ += static_cast<int64_t>(text.size());
      if (bytes_ > o_.max_grammar_bytes) return TooBig();
    }
    return "( " + alts + " ) " + Primitive("space");
  }

  Result<std::string> String(const OJson& s, const std::string& path) {
    LL_ASSIGN_OR_RETURN(int64_t min_len, Count(s, "minLength", path, 0));
    LL_ASSIGN_OR_RETURN(int64_t max_len, Count(s, "maxLength", path, -1));
    if (max_len >= 0 && max_len < min_len)
      return Err(path + ".maxLength", "below minLength");
    if (auto f = s.find("format"); f != s.end()) {
      if (!f->is_string()) return Err(path + ".format", "expected a string");
      const std::string fmt = f->get<std::string>();
      if (fmt == "date" || fmt == "time" || fmt == "date-time" || fmt == "uuid") {
        if (s.contains("minLength") || s.contains("maxLength"))
          return Err(path + ".format", "'" + fmt + "' together with minLength/maxLength is not supported");
        const std::string quote = "\"\\\"\"";
        return quote + " " + Primitive(fmt) + " " + quote + " " + Primitive("space");
      }
      // Other formats (email, hostname, uri, ...): any string.
    }
    if (min_len == 0 && max_len < 0) return Primitive("string");
    std::string rep = "{";
    rep += std::to_string(min_len);
    rep += ',';
    if (max_len >= 0) rep += std::to_string(max_len);
    rep += '}';
    const std::string quote = "\"\\\"\"";
    return quote + " " + Primitive("char") + rep + " " + quote + " " + Primitive("space");
  }

  Result<std::string> Array(const OJson& s, const std::string& path, const std::string& hint,
                            int depth) {
    LL_ASSIGN_OR_RETURN(int64_t min_items, Count(s, "minItems", path, 0));
    LL_ASSIGN_OR_RETURN(int64_t max_items, Count(s, "maxItems", path, -1));
    if (max_items >= 0 && max_items < min_items) return Err(path + ".maxItems", "below minItems");
    std::string item;
    auto it = s.find("items");
    if (it == s.end() || (it->is_boolean() && it->get<bool>())) {
      item = Primitive("value");
    } else if (it->is_boolean()) {
      if (min_items > 0) return Err(path + ".items", "false with minItems > 0 matches nothing");
      max_items = 0;
    } else {
      LL_ASSIGN_OR_RETURN(item, Visit(*it, path + ".items", hint + "-item", depth + 1));
    }
    const std::string sp = Primitive("space");
    std::string body = "\"[\" " + sp + " ";
    if (max_items != 0) {
      std::string more_min = std::to_string(std::max<int64_t>(min_items - 1, 0));
      std::string more_max = max_items < 0 ? "" : std::to_string(max_items - 1);
      std::string list = item + " ( \",\" " + sp + " " + item + " ){" + more_min + "," + more_max + "}";
      body += min_items == 0 ? "( " + list + " )? " : list + " ";
    }
    body += "\"]\" " + sp;
    std::string name = NewRuleName(hint);
    LL_RETURN_IF_ERROR(SetRule(name, body));
    return name;
  }

  Result<std::string> Object(const OJson& s, const std::string& path, const std::string& hint,
                             int depth) {
    const std::string sp = Primitive("space");
    std::vector<std::string> kvs;
    std::vector<bool> required;
    std::vector<std::string> keys;
    OJson empty = OJson::object();
    const OJson* props = &empty;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) return Err(path + ".properties", "expected an object");
      props = &*it;
    }
    std::set<std::string> req;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return Err(path + ".required", "expected an array of names");
      for (size_t i = 0; i < it->size(); ++i) {
        const OJson& r = (*it)[i];
        if (!r.is_string())
          return Err(path + ".required[" + std::to_string(i) + "]", "expected a string");
        if (!props->contains(r.get<std::string>()))
          return Err(path + ".required[" + std::to_string(i) + "]",
                     "'" + r.get<std::string>() + "' is not in properties");
        req.insert(r.get<std::string>());
      }
    }
    for (const auto& [key, sub] : props->items()) {
      LL_ASSIGN_OR_RETURN(std::string value,
                          Visit(sub, path + ".properties." + key, hint + "-" + key, depth + 1));
      std::string key_json;
      try {
        key_json = OJson(key).dump(-1, ' ', false, nlohmann::detail::error_handler_t::strict);
      } catch (const nlohmann::json::exception&) {
        return Err(path + ".properties", "a property name is not valid UTF-8");
      }
      kvs.push_back(GbnfLiteral(key_json) + " " + sp + " \":\" " + sp + " " + value);
      required.push_back(req.count(key) > 0);
    }
    // Extra properties.
    bool extras = !o_.strict;
    std::string extra_value;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) {
        extras = it->get<bool>();
        if (extras) extra_value = Primitive("value");
      } else if (it->is_object()) {
        extras = true;
        LL_ASSIGN_OR_RETURN(extra_value, Visit(*it, path + ".additionalProperties",
                                               hint + "-extra", depth + 1));
      } else {
        return Err(path + ".additionalProperties", "expected a boolean or a schema");
      }
    } else if (extras) {
      extra_value = Primitive("value");
    }
    const std::string name = NewRuleName(hint);
    std::string extra_kv = extras ? Primitive("string") + " \":\" " + sp + " " + extra_value : "";
    // T(i): properties i.. after something was written (each present one preceded by ",");
    // S(i): properties i.. when nothing was written yet. Both end with the extra properties.
    const size_t n = kvs.size();
    std::string t_tail = extras ? "( \",\" " + sp + " " + extra_kv + " )*" : "";
    std::vector<std::string> t(n + 1);
    t[n] = t_tail;
    bool any_optional = std::find(required.begin(), required.end(), false) != required.end();
    if (!any_optional && n > 1) {
      // Every property required: one fixed sequence, and only the suffix after the first
      // property (T(1)) is used below. Written forward once: building every suffix as its own
      // string was quadratic (5,000 required properties held 560 MB for 0.6 s on the I/O
      // thread before the grammar was refused for its size).
      std::string rest;
      for (size_t i = 1; i < n; ++i) {
        rest += (i > 1 ? " " : "") + std::string("\",\" ") + sp + " " + kvs[i];
      }
      if (!t_tail.empty()) rest += " " + t_tail;
      t[1] = std::move(rest);
    }
    for (size_t i = n; any_optional && i-- > 0;) {
      std::string rest = t[i + 1];
      std::string self = required[i] ? "\",\" " + sp + " " + kvs[i]
                                     : "( \",\" " + sp + " " + kvs[i] + " )?";
      std::string expr = self + (rest.empty() ? "" : " " + rest);
      // With optional properties the suffixes are referenced twice; named rules keep the
      // grammar linear in the number of properties.
      if (any_optional && i > 0) {
        std::string tn = NewRuleName(hint + "-rest" + std::to_string(i));
        LL_RETURN_IF_ERROR(SetRule(tn, expr));
        t[i] = tn;
      } else {
        t[i] = expr;
      }
    }
    // S(0) flattened: the first property written is some optional one before the first
    // required one, or that required one; with no required property, possibly none at all.
    std::vector<std::string> alts;
    bool has_required = false;
    for (size_t i = 0; i < n && !has_required; ++i) {
      alts.push_back(kvs[i] + (t[i + 1].empty() ? "" : " " + t[i + 1]));
      has_required = required[i];
    }
    if (!has_required && extras) alts.push_back(extra_kv + (t_tail.empty() ? "" : " " + t_tail));
    std::string s_expr;
    if (alts.size() == 1 && has_required) {
      s_expr = alts[0];
    } else if (!alts.empty()) {
      s_expr = "(";
      for (size_t i = 0; i < alts.size(); ++i) s_expr += (i ? " | " : " ") + alts[i];
      s_expr += has_required ? " )" : " )?";
    }
    std::string body = "\"{\" " + sp + " " + (s_expr.empty() ? "" : s_expr + " ") + "\"}\" " + sp;
    LL_RETURN_IF_ERROR(SetRule(name, body));
    return name;
  }

  Result<std::string> Ref(const OJson& s, const std::string& path, int depth) {
    const OJson& r = s["$ref"];
    const std::string where = path + ".$ref";
    if (!r.is_string()) return Err(where, "expected a string");
    const std::string ref = r.get<std::string>();
    for (const auto& [key, value] : s.items()) {
      static const std::set<std::string> ok = {"$ref", "description", "title", "default",
                                               "examples", "$comment", "$defs", "definitions",
                                               "deprecated", "readOnly", "writeOnly", "$schema", "$id"};
      if (!ok.count(key)) return Err(path + "." + key, "not supported alongside $ref");
    }
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.empty() || ref[0] != '#' || (ref.size() > 1 && ref[1] != '/'))
      return Err(where, "only local references ('#' or '#/...') are supported, got '" + ref + "'");
    const OJson* target = &root_;
    std::string target_path = "schema";
    std::string last = "ref";
    size_t pos = 2;
    while (pos <= ref.size() && ref.size() > 1) {
      size_t slash = ref.find('/', pos);
      std::string seg = ref.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      std::string key;
      for (size_t i = 0; i < seg.size(); ++i) {
        if (seg[i] == '~' && i + 1 < seg.size() && (seg[i + 1] == '0' || seg[i + 1] == '1')) {
          key += seg[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          key += seg[i];
        }
      }
      if (target->is_object() && target->contains(key)) {
        target = &(*target)[key];
      } else if (target->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos && key.size() < 9 &&
                 std::stoul(key) < target->size()) {
        target = &(*target)[std::stoul(key)];
      } else {
        return Err(where, "'" + ref + "' does not resolve in the schema");
      }
      target_path += "." + key;
      last = key;
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    const std::string name = NewRuleName(last);
    refs_[ref] = name;
    LL_ASSIGN_OR_RETURN(std::string body, Visit(*target, target_path, last, depth + 1));
    LL_RETURN_IF_ERROR(SetRule(name, body));
    return name;
  }

  const OJson& root_;
  const JsonSchemaOptions& o_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_map<std::string, size_t> rule_index_;
  std::set<std::string> taken_, emitted_;
  std::unordered_map<std::string, std::string> refs_;
  int64_t bytes_ = 0;
};

}  // namespace

Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& opts) {
  try {
    return Converter(schema, opts).Run();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("schema: ") + e.what());
  }
}

Result<std::string> JsonSchemaToGbnf(const nlohmann::json& schema, const JsonSchemaOptions& opts) {
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(schema.dump());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("schema: ") + e.what());
  }
  return JsonSchemaToGbnf(ordered, opts);
}

Result<std::string> JsonSchemaTextToGbnf(std::string_view schema_json,
                                         const JsonSchemaOptions& opts) {
  // Values are copied, compared and printed recursively: refuse absurd nesting before parsing
  // (a schema nests far less than this; request bodies are pre-scanned the same way).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < schema_json.size(); ++i) {
    char c = schema_json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 512) return InvalidArgument("schema: nested deeper than 512");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("schema: not valid JSON: ") + e.what());
  }
  return JsonSchemaToGbnf(schema, opts);
}

std::string JsonObjectGbnf(const std::string& rule_prefix) {
  JsonSchemaOptions o;
  o.rule_prefix = rule_prefix;
  o.strict = false;
  auto r = JsonSchemaToGbnf(nlohmann::ordered_json{{"type", "object"}}, o);
  return r.ok() ? *r : std::string();
}

}  // namespace lifeline::grammar
