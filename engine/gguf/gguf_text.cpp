#include "engine/gguf/gguf_text.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace lifeline {

std::string SanitizeForMessage(std::string_view s, size_t max_chars) {
  std::string out;
  out.reserve(std::min(s.size(), max_chars) + 3);
  for (unsigned char ch : s) {
    char buf[8];
    if (ch == '\\' || ch == '\'' || ch == '"') {
      buf[0] = '\\';
      buf[1] = static_cast<char>(ch);
      buf[2] = 0;
    } else if (ch >= 0x20 && ch < 0x7f) {
      buf[0] = static_cast<char>(ch);
      buf[1] = 0;
    } else {
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
    }
    if (out.size() + std::char_traits<char>::length(buf) > max_chars) {
      out += "...";
      break;
    }
    out += buf;
  }
  return out;
}

}  // namespace lifeline
