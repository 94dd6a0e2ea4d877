// What the built-in filters, tests and methods share (private to text/template):
// jinja_builtins.cpp defines these helpers, Iterate and the tests, jinja_filters.cpp the
// filters, jinja_methods.cpp the str / dict / list methods. The string helpers have Python's
// semantics over UTF-8 code points; case mapping covers ASCII letters only.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/template/jinja_interp.h"

namespace lifeline::jinja {

// One call of a built-in: the interpreter (for its budgets), the name the template wrote
// (aliases such as length / count share a function, and messages name the one used), the
// arguments and the template line that errors name.
struct BuiltinCall {
  Interp& in;
  const std::string& name;
  const Args& args;
  const Kwargs& kw;
  int line;
};

// Filters (`x | name`) and methods (`x.name()`) make a value, tests (`x is name`) a bool.
using BuiltinFn = Result<Value> (*)(const Value& subject, const BuiltinCall& c);
using TestFn = Result<bool> (*)(const Value& subject, const BuiltinCall& c);

// One entry of a name -> function table. Tables are constexpr arrays sorted by name: constant
// data, searched by halves, with nothing to build at start-up or to lock.
template <typename Fn>
struct NamedFn {
  std::string_view name;
  Fn fn;
};

// Names strictly ascending (sorted, no duplicates). Each table static_asserts it, so an entry
// out of place fails the build rather than silently never matching.
template <typename Fn, size_t N>
constexpr bool StrictlySorted(const std::array<NamedFn<Fn>, N>& table) {
  for (size_t i = 1; i < N; ++i) {
    if (!(table[i - 1].name < table[i].name)) return false;
  }
  return true;
}

// The function registered under `name`, else null.
template <typename Fn, size_t N>
Fn FindFn(const std::array<NamedFn<Fn>, N>& table, std::string_view name) {
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const NamedFn<Fn>& e, std::string_view n) { return e.name < n; });
  return it != table.end() && it->name == name ? it->fn : nullptr;
}

// Keyword argument `name`, else null.
const Value* Kw(const Kwargs& kw, std::string_view name);
// Positional argument i, else keyword `name`, else null.
const Value* Arg(const Args& args, const Kwargs& kw, size_t i, std::string_view name);

// str(v): a string as it is, anything else as jinja2 prints it.
std::string Str(const Value& v);

// Each code point of s as its own string.
std::vector<std::string> CodePoints(std::string_view s);
// Python's str.isspace() for one code point.
bool PySpace(uint32_t cp);
// str.strip / lstrip / rstrip; chars null: Unicode whitespace.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right);
std::string Upper(std::string s);
std::string Lower(std::string s);
std::string Capitalize(std::string s);
// str.split() without a separator: runs of whitespace split, the ends dropped; maxsplit < 0
// splits everywhere.
std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit);
// str.splitlines(): \n, \r and \r\n end lines; no empty last line.
std::vector<std::string> SplitLines(std::string_view s);
// str.replace(from, to, count); count < 0 replaces all.
std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count);

}  // namespace lifeline::jinja
