// The interpreter's value model (private to text/template): Python's types as Jinja2 chat
// templates see them. Strings are shared immutable UTF-8 byte strings (a list holding one
// string a thousand times holds it once); lists and dicts are shared and, apart
// from namespace() objects, immutable once built (Hugging Face renders in jinja2's
// ImmutableSandboxedEnvironment, where list.append and dict.update are refused too).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::jinja {

class Value;
struct MacroNode;

using List = std::vector<Value>;

// Insertion-ordered string-keyed map (Python dict order). Chat-template dicts are small, so a
// linear search beats hashing; hostile templates are bounded by the step budget instead.
// Keys are strings in all but rare template literals ({1: "a"}): a non-string key is stored
// under KeyId (numbers equal in Python share one: 1, 1.0 and true), with the key itself in
// typed_keys (parallel to items, empty while every key is a string).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  std::vector<Value> typed_keys;
  bool is_namespace = false;  // namespace(): the one mutable object ({% set ns.x = ... %})
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value v);
  void SetKey(const Value& key, Value v);  // any hashable key
  Value KeyAt(size_t i) const;             // the key of items[i] as the template sees it
};
// The items key a Value is stored under (the string itself for strings).
std::string KeyId(const Value& key);

// A macro bound to its definition; builtin globals are dispatched by name instead.
struct Callable {
  const MacroNode* macro = nullptr;
  std::string builtin;  // "range", "namespace", "raise_exception", "strftime_now", "dict", ...
  std::vector<Value> bound;  // a method's object: `s.strip` as a value is {builtin "strip", [s]}
};

struct Undefined {
  std::string name;  // what was looked up, for the error when it is used as a value
};
struct None {};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, int64_t, double,
                               std::shared_ptr<const std::string>,
                               std::shared_ptr<List>, std::shared_ptr<Dict>,
                               std::shared_ptr<Callable>>;
  enum Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : v_(std::make_shared<const std::string>(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) { SetDepth(); }
  Value(std::shared_ptr<List> l) : v_(std::move(l)) { SetDepth(); }
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) { SetDepth(); }
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}
  static Value MakeUndefined(std::string name) { Value v; v.v_ = Undefined{std::move(name)}; return v; }
  // A tuple: a list that prints as (a, b) (dict items, dictsort pairs, literals in parens).
  static Value Tuple(List l) { Value v(std::move(l)); v.tuple_ = true; return v; }
  bool is_tuple() const { return tuple_; }
  // Markup (markupsafe): a string marked safe by |safe or |escape. With autoescape off, as
  // Hugging Face renders, it matters only where markupsafe acts: `+` and `%` with it, and its
  // join / replace, HTML-escape the plain strings they take in.
  static Value Markup(std::string s) { Value v(std::move(s)); v.markup_ = true; return v; }
  bool is_markup() const { return markup_; }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == kUndefined; }
  bool is_none() const { return kind() == kNone; }
  bool is_string() const { return kind() == kString; }
  bool is_list() const { return kind() == kList; }
  bool is_dict() const { return kind() == kDict; }
  bool is_number() const { return kind() == kInt || kind() == kFloat || kind() == kBool; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const List& list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& mutable_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  // Number as double / as integer (bools count as 0/1, as in Python).
  double ToDouble() const;
  int64_t ToInt() const;

  bool Truthy() const;  // Python's bool(): empty containers, 0, "", None, undefined are false

  static Value FromJson(const nlohmann::ordered_json& j);

  // Container nesting: 0 for scalars, 1 + the deepest item for lists and dicts, 1 for a
  // namespace (opaque: printing and tojson never walk into one, so a namespace that holds
  // itself is no cycle for them). The evaluator refuses values deeper than kMaxValueDepth,
  // which bounds every recursive walk (printing, ==, tojson, destruction).
  uint32_t depth() const { return depth_; }

 private:
  void SetDepth();
  Storage v_;
  uint32_t depth_ = 0;
  bool tuple_ = false;
  bool markup_ = false;
};

inline constexpr uint32_t kMaxValueDepth = 256;

// markupsafe.escape: & < > ' " as &amp; &lt; &gt; &#39; &#34;.
std::string HtmlEscape(std::string_view s);
// What markupsafe does to an operand joining a Markup: a Markup stays, anything else is
// str()-ed and escaped.
std::string EscapeForMarkup(const Value& v);

// Python's str(v): what {{ v }} prints ("None", "True", "[1, 'a']", repr of floats).
std::string ToStr(const Value& v);
// Python's repr(v) (strings quoted).
std::string Repr(const Value& v);
// Python's float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string FloatRepr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent (<0: none), sort_keys); fails on values
// JSON cannot hold (undefined, callables), as json.dumps raises TypeError.
Result<std::string> ToJson(const Value& v, int indent, bool sort_keys,
                           const std::string* item_sep, const std::string* key_sep);
// Python's ==.
bool Equal(const Value& a, const Value& b);
// Python's <; fails for types Python would not order.
Result<bool> Less(const Value& a, const Value& b);
// Name of the type for error messages ("str", "int", "list", "dict", "undefined", ...).
const char* TypeName(const Value& v);

}  // namespace lifeline::jinja
