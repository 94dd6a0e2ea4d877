// Overflow-checked size arithmetic. Every count, length, shape and offset that comes from a
// file or a request goes through these before it is used to index or allocate.
// They return false on overflow instead of aborting, so callers turn it into a Status that
// names the field.
#pragma once

#include <cstdint>

namespace lifeline {

[[nodiscard]] inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

[[nodiscard]] inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Rounds x up to a multiple of align (align must be a power of two > 0).
[[nodiscard]] inline bool CheckedPad(uint64_t x, uint64_t align, uint64_t* out) {
  if (align == 0 || (align & (align - 1)) != 0) return false;
  uint64_t t;
  if (!CheckedAdd(x, align - 1, &t)) return false;
  *out = t & ~(align - 1);
  return true;
}

inline bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace lifeline
