#include "modelgen/flag_parse.h"

#include <charconv>
#include <cmath>
#include <string>

namespace lifeline::modelgen {
namespace {

Status Bad(std::string_view flag, std::string_view text, std::string_view want) {
  return InvalidArgument(std::string(flag) + " '" + std::string(text) + "' is not " +
                         std::string(want));
}

}  // namespace

Result<int64_t> ParseIntFlag(std::string_view flag, std::string_view text, int64_t lo,
                             int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) {
    return Bad(flag, text, "an integer");
  }
  if (v < lo || v > hi) {
    return InvalidArgument(std::string(flag) + " " + std::to_string(v) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

Result<uint64_t> ParseUint64Flag(std::string_view flag, std::string_view text) {
  int base = 10;
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t v = 0;
  const char* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, v, base);
  if (digits.empty() || ec != std::errc() || p != end) {
    return Bad(flag, text, "an unsigned 64-bit integer");
  }
  return v;
}

Result<double> ParsePositiveFloatFlag(std::string_view flag, std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || !std::isfinite(v) || !(v > 0)) {
    return Bad(flag, text, "a positive finite number");
  }
  return v;
}

}  // namespace lifeline::modelgen
