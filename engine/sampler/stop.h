// Stop sequences over streamed text.
//
// The generation loop pushes each newly detokenized piece of text; the matcher answers with
// the part that is safe to send to the client now. It holds back (a) the longest suffix of
// the pending text that is a proper prefix of some stop string, since the next piece could
// complete it, and (b) an incomplete UTF-8 sequence at the very end, so every emitted chunk is
// whole characters. When a stop string appears, the text before it is emitted, and neither the
// stop string nor anything after it is ever emitted; the matcher is then finished.
//
// Matching is on bytes; because stop strings are validated as UTF-8 and UTF-8 is
// self-synchronizing, a match in valid UTF-8 text always starts on a character boundary.
// When several stops occur, the one starting earliest wins (ties: the longest).
//
// Limits (validated by ValidateStopSequences, as the request edge should):
//   at most kMaxStopSequences (16) strings, each 1..kMaxStopSequenceBytes (1024) bytes of valid
//   UTF-8. Held-back text is therefore < 1024 + 3 bytes, and each Push costs
//   O((held + piece) * total stop bytes) at worst.
//
// Ownership: owns copies of the stop strings and the held-back text. Thread-safety: none
// (one per request). Failure: Create() returns the validation Status; Push/Finish never fail.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lifeline {

inline constexpr size_t kMaxStopSequences = 16;
inline constexpr size_t kMaxStopSequenceBytes = 1024;

// Ok, or an error naming the field: "stop" (count) or "stop[i]" (empty, too long, bad UTF-8).
Status ValidateStopSequences(const std::vector<std::string>& stops);

struct StopPush {
  std::string emit;      // text to send now (may be empty)
  bool stopped = false;  // a stop string matched; nothing more will ever be emitted
};

class StopMatcher {
 public:
  static Result<StopMatcher> Create(std::vector<std::string> stops);

  // Appends `text` to the stream. After a stop has matched, returns {"" , true}.
  StopPush Push(std::string_view text);

  // Generation ended for another reason (EOS, max tokens): returns everything still held.
  // Further Push calls are not expected; if made, they behave as on a fresh stream.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // Index into the stops given to Create of the stop that matched; -1 while none has.
  int matched_index() const { return matched_index_; }
  // Bytes currently held back (for tests and diagnostics).
  size_t held_bytes() const { return pending_.size(); }

 private:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Length of the longest suffix of pending_ that is a proper prefix of some stop.
  size_t LongestStopPrefixSuffix() const;

  std::vector<std::string> stops_;
  std::string pending_;  // text received but not yet emitted
  bool stopped_ = false;
  int matched_index_ = -1;
};

// Bytes at the end of `text` that form an incomplete (so far valid) UTF-8 sequence, 0..3.
size_t IncompleteUtf8TailBytes(std::string_view text);

}  // namespace lifeline
