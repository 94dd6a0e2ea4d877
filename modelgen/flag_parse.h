// Strict parsing of numeric command-line flag values. The CLI takes flags as text and parses
// them here so that a bad value yields one line naming the flag, the value and the accepted
// range (and the command exits 2), instead of a parser-library exception message.
//
// Thread-safety: pure functions. Failures are InvalidArgument.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace lifeline::modelgen {

// Whole decimal integer (optional leading '-'), nothing else, within [lo, hi].
Result<int64_t> ParseIntFlag(std::string_view flag, std::string_view text, int64_t lo,
                             int64_t hi);
// Unsigned 64-bit integer (decimal, or hex with 0x): for seeds.
Result<uint64_t> ParseUint64Flag(std::string_view flag, std::string_view text);
// Finite decimal floating-point number (e.g. 10000, 1e6, 5e5) strictly greater than 0.
Result<double> ParsePositiveFloatFlag(std::string_view flag, std::string_view text);

}  // namespace lifeline::modelgen
