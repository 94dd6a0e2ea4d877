#include "engine/sampler/stop.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace lifeline {
namespace {

// Offset of the first byte that breaks UTF-8 well-formedness (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or npos when the whole string is valid.
size_t FirstInvalidUtf8Byte(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;  // overlong
      if (b0 == 0xED) hi = 0x9F;  // surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;  // overlong
      if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    const auto b1 = static_cast<uint8_t>(s[i + 1]);
    if (b1 < lo || b1 > hi) return i + 1;
    for (size_t k = 2; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return i + k;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

size_t IncompleteUtf8TailBytes(std::string_view text) {
  const size_t n = text.size();
  size_t cont = 0;  // trailing continuation bytes (10xxxxxx), at most 3 can be useful
  while (cont < 3 && cont < n && (static_cast<uint8_t>(text[n - 1 - cont]) & 0xC0) == 0x80) {
    ++cont;
  }
  if (cont == n) return 0;  // no lead byte in reach: not a sequence we could ever complete
  const auto lead = static_cast<uint8_t>(text[n - 1 - cont]);
  size_t need = 0;
  if (lead < 0x80) {
    need = 1;
  } else if ((lead & 0xE0) == 0xC0) {
    need = 2;
  } else if ((lead & 0xF0) == 0xE0) {
    need = 3;
  } else if ((lead & 0xF8) == 0xF0) {
    need = 4;
  }
  // Invalid lead bytes are passed through: holding them would only delay garbage.
  if (need == 0) return 0;
  return cont + 1 < need ? cont + 1 : 0;
}

Status ValidateStopSequences(const std::vector<std::string>& stops) {
  if (stops.size() > kMaxStopSequences) {
    return OutOfRange("stop: " + std::to_string(stops.size()) + " sequences exceeds the limit of " +
                      std::to_string(kMaxStopSequences));
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    const std::string field = "stop[" + std::to_string(i) + "]";
    if (stops[i].empty()) return InvalidArgument(field + ": empty string is not allowed");
    if (stops[i].size() > kMaxStopSequenceBytes) {
      return OutOfRange(field + ": " + std::to_string(stops[i].size()) +
                        " bytes exceeds the limit of " + std::to_string(kMaxStopSequenceBytes) +
                        " bytes");
    }
    if (size_t bad = FirstInvalidUtf8Byte(stops[i]); bad != std::string_view::npos) {
      return InvalidArgument(field + ": invalid UTF-8 at byte " + std::to_string(bad));
    }
  }
  return Status::Ok();
}

Result<StopMatcher> StopMatcher::Create(std::vector<std::string> stops) {
  LL_RETURN_IF_ERROR(ValidateStopSequences(stops));
  return StopMatcher(std::move(stops));
}

size_t StopMatcher::LongestStopPrefixSuffix() const {
  size_t best = 0;
  for (const std::string& stop : stops_) {
    // Only proper prefixes: a whole stop in pending_ would already have matched.
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > best; --len) {
      if (std::memcmp(pending_.data() + pending_.size() - len, stop.data(), len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

StopPush StopMatcher::Push(std::string_view text) {
  StopPush out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(text);

  size_t best_pos = std::string::npos;
  size_t best_len = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && stops_[i].size() > best_len)) {
      best_pos = pos;
      best_len = stops_[i].size();
      matched_index_ = static_cast<int>(i);
    }
  }
  if (best_pos != std::string::npos) {
    out.emit = pending_.substr(0, best_pos);
    out.stopped = true;
    stopped_ = true;
    pending_.clear();
    pending_.shrink_to_fit();
    return out;
  }

  const size_t hold = std::max(LongestStopPrefixSuffix(), IncompleteUtf8TailBytes(pending_));
  const size_t ready = pending_.size() - hold;
  out.emit = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string StopMatcher::Finish() {
  if (stopped_) return {};
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace lifeline
