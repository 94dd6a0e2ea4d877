// Text helpers for GGUF diagnostics: names and strings from a file are hostile bytes, so they
// are escaped and shortened before they go into an error message or a terminal.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lifeline {

// Printable ASCII kept (backslash and quote escaped), every other byte as \xNN; longer input is
// cut at max_chars output characters and marked with "...". Always one line.
std::string SanitizeForMessage(std::string_view s, size_t max_chars = 80);

}  // namespace lifeline
