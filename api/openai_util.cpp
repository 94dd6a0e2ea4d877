#include "api/openai_util.h"

#include <cstdio>
#include <cstdlib>

namespace lifeline::api::detail {

using json = nlohmann::json;

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Prefer the short form when it round-trips (2 rather than 2.0000000000000000).
  char shorter[64];
  std::snprintf(shorter, sizeof shorter, "%g", v);
  return std::strtod(shorter, nullptr) == v ? shorter : buf;
}

// The value as the client wrote it, shortened so a 1 MiB string cannot bloat the error.
std::string Echo(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMaxEcho = 64;
  if (s.size() > kMaxEcho) s = s.substr(0, kMaxEcho) + "...";
  return s;
}

std::string RangeText(const FieldSpec& spec) {
  return std::string(spec.min_exclusive ? "(" : "[") + FormatNumber(spec.min) + ", " +
         FormatNumber(spec.max) + (spec.max_exclusive ? ")" : "]");
}

ApiError TypeError(std::string_view param, std::string_view expected, const json& value) {
  return InvalidRequestError(std::string(param),
                             "'" + std::string(param) + "' must be " + std::string(expected) +
                                 ", got " + value.type_name() + " " + Echo(value),
                             "invalid_type");
}

bool BelowMin(const FieldSpec& s, double v) { return s.min_exclusive ? v <= s.min : v < s.min; }
bool AboveMaxBound(const FieldSpec& s, double v) {
  return s.max_exclusive ? v >= s.max : v > s.max;
}

ApiError RangeError(const FieldSpec& spec, const json& value) {
  return InvalidRequestError(std::string(spec.name),
                             "'" + std::string(spec.name) + "' is " + Echo(value) +
                                 ", outside the allowed range " + RangeText(spec),
                             "out_of_range");
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}
}  // namespace lifeline::api::detail
