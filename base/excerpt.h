// Quoting untrusted text in a message (an error naming a field, an upstream body): at most a
// number of bytes, cut before a UTF-8 continuation byte so a quote of valid text stays valid
// UTF-8 (a cut inside a character made a JSON error body carry invalid UTF-8).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lifeline {

// At most `max_bytes` of `s`, never ending inside a UTF-8 sequence.
std::string Utf8Prefix(std::string_view s, size_t max_bytes);
// Utf8Prefix(s, max_bytes), followed by "..." when something was cut.
std::string Excerpt(std::string_view s, size_t max_bytes);

}  // namespace lifeline
