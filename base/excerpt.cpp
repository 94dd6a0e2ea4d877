#include "base/excerpt.h"

namespace lifeline {

std::string Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

std::string Excerpt(std::string_view s, size_t max_bytes) {
  std::string out = Utf8Prefix(s, max_bytes);
  if (out.size() < s.size()) out += "...";
  return out;
}

}  // namespace lifeline
