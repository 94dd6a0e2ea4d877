#include "text/grammar/numeric_range.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace lifeline::grammar {
namespace {

std::string Literal(std::string_view digits) { return "\"" + std::string(digits) + "\""; }

std::string DigitClass(char a, char b) {
  if (a == b) return Literal(std::string(1, a));
  return std::string("[") + a + "-" + b + "]";
}

// `n` more digits, any.
std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? " [0-9]" : " [0-9]{" + std::to_string(n) + "}";
}

std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "( ";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + " )";
}

bool All(std::string_view s, char c) {
  return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

// Digit strings of one length n with x <= y (leading zeros allowed: tails of longer numbers).
std::string SameLength(const std::string& x, const std::string& y) {
  if (x == y) return Literal(x);
  size_t p = 0;
  while (x[p] == y[p]) ++p;
  const std::string prefix = p > 0 ? Literal(std::string_view(x).substr(0, p)) + " " : "";
  const std::string_view xs = std::string_view(x).substr(p), ys = std::string_view(y).substr(p);
  const size_t rest = xs.size() - 1;
  const bool x_floor = All(xs.substr(1), '0'), y_ceiling = All(ys.substr(1), '9');
  std::vector<std::string> alts;
  char first = xs[0], last = ys[0];
  if (!x_floor) {
    alts.push_back(Literal(xs.substr(0, 1)) + " " +
                   SameLength(std::string(xs.substr(1)), std::string(rest, '9')));
    ++first;
  }
  if (!y_ceiling) --last;
  if (first <= last) alts.push_back(DigitClass(first, last) + AnyDigits(rest));
  if (!y_ceiling) {
    alts.push_back(Literal(ys.substr(0, 1)) + " " +
                   SameLength(std::string(rest, '0'), std::string(ys.substr(1))));
  }
  return prefix + Alternatives(alts);
}

int64_t PowerOfTen(size_t digits) {
  int64_t v = 1;
  for (size_t i = 0; i < digits; ++i) v *= 10;
  return v;
}

// Non-negative reals in [a, b] for integers 0 <= a <= b: any fraction below b, only zeros at b.
std::string UnsignedReal(int64_t a, int64_t b) {
  const std::string fraction = "( \".\" [0-9]{1,16} )?";
  const std::string at_b = Literal(std::to_string(b)) + " ( \".\" [0]{1,16} )?";
  if (a == b) return at_b;
  return "( " + UnsignedRangeGbnf(a, b - 1) + " " + fraction + " | " + at_b + " )";
}

}  // namespace

std::string UnsignedRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo == 0) {
    alts.push_back("\"0\"");
    if (hi == 0) return alts[0];
    lo = 1;
  }
  const size_t lo_digits = std::to_string(lo).size(), hi_digits = std::to_string(hi).size();
  for (size_t d = lo_digits; d <= hi_digits; ++d) {
    const int64_t a = std::max(lo, PowerOfTen(d - 1));
    const int64_t b = std::min(hi, PowerOfTen(d) - 1);
    alts.push_back(SameLength(std::to_string(a), std::to_string(b)));
  }
  return Alternatives(alts);
}

std::string IntegerRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (hi >= 0) alts.push_back(UnsignedRangeGbnf(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back("\"-\" " + UnsignedRangeGbnf(hi < 0 ? -hi : 1, -lo));
  return Alternatives(alts);
}

std::string NumberRangeGbnf(int64_t lo, int64_t hi) {
  if (lo >= 0) return UnsignedReal(lo, hi);
  if (hi < 0) return "\"-\" " + UnsignedReal(-hi, -lo);
  if (hi == 0) return "( " + UnsignedReal(0, 0) + " | \"-\" " + UnsignedReal(0, -lo) + " )";
  return "( " + UnsignedReal(0, hi) + " | \"-\" " + UnsignedReal(0, -lo) + " )";
}

}  // namespace lifeline::grammar
