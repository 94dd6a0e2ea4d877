// Decimal ranges as GBNF: the writings of exactly the integers (or decimal numbers) between
// two bounds, for JSON Schema's minimum / maximum (json_schema.cpp). An integer range splits
// by digit count, and a same-length range [x, y] by its first differing digit: x's digit then
// anything up to 9..9 below it, the digits strictly between with any tail, y's digit then 0..0
// up to y's tail -- O(digits^2) grammar text, no enumeration.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace lifeline::grammar {

// The largest magnitude the JSON number primitives write: 16 digits (json_schema.cpp).
inline constexpr int64_t kMaxDecimalMagnitude = 9'999'999'999'999'999;

// A GBNF expression matching exactly the decimal writings (no sign, no leading zero) of the
// integers in [lo, hi]; 0 <= lo <= hi <= kMaxDecimalMagnitude.
std::string UnsignedRangeGbnf(int64_t lo, int64_t hi);

// Integers in [lo, hi] (-kMaxDecimalMagnitude <= lo <= hi <= kMaxDecimalMagnitude), negative
// ones with "-"; "-0" is not written.
std::string IntegerRangeGbnf(int64_t lo, int64_t hi);

// Decimal numbers in [lo, hi] for integer bounds (same limits): an integer part, and a
// fraction of 1 to 16 digits where it keeps the value in range (at hi only zeros); no
// exponent. "-0" and "-0.5" are written as JSON allows.
std::string NumberRangeGbnf(int64_t lo, int64_t hi);

}  // namespace lifeline::grammar
