// Pre-parse guards for untrusted JSON bodies: UTF-8 validation and a nesting-depth scan that
// runs before nlohmann's recursive parser ever sees the bytes (so a 10^5-deep `[[[...` cannot
// overflow the stack).
//
// Ownership: borrows the input views only for the duration of a call. Thread-safety: pure
// functions. Failure: a std::optional<size_t> / result struct naming the byte offset.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace lifeline::api {

// Returns the byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates,
// code points above U+10FFFF, truncated or stray continuation bytes), or nullopt if valid.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

struct DepthScan {
  bool exceeded = false;  // nesting went above the limit
  size_t offset = 0;      // byte offset of the bracket that exceeded it
};

// Scans `json` for `[`/`{` nesting outside string literals (honouring `\"` escapes) and stops
// at the first bracket that would make the depth exceed `max_depth`. Malformed input is not
// diagnosed here; the real parser does that once the depth is known to be safe.
DepthScan ScanJsonDepth(std::string_view json, int max_depth);

}  // namespace lifeline::api
