// JsonScanner: an incremental recognizer of one JSON object (or array) fed byte by byte. It
// says when the value has ended (the byte that closes the outermost container) or at which
// byte the text stopped being JSON; it builds nothing. The tool-call parser uses it to find
// where a call's JSON ends in a stream (a '}' inside a string does not end it), then parses
// exactly that slice with nlohmann.
//
// Grammar: RFC 8259 (strings without raw control characters, the nine escapes and \uXXXX,
// numbers -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?, true / false / null). UTF-8 validity and
// surrogate pairing are not checked here; the nlohmann parse of the slice checks them.
//
// Ownership: a value type, no allocation beyond the container stack (capped by max_depth).
// Thread-safety: one instance per stream. Failure: state kError; never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lifeline::toolcall {

class JsonScanner {
 public:
  enum class State : uint8_t { kRunning, kDone, kError };

  // allow_array: the outermost value may be an array as well as an object.
  explicit JsonScanner(bool allow_array = false, size_t max_depth = 64)
      : allow_array_(allow_array), max_depth_(max_depth) {}

  // Feeds one byte. The first byte must open the outermost container (no leading whitespace).
  // Once the state is kDone or kError, further bytes are kError.
  State Feed(char c);
  State state() const { return state_; }

 private:
  enum class Mode : uint8_t {
    kStart, kValue, kObjectKeyOrEnd, kObjectKey, kColon, kAfterValue, kArrayValueOrEnd,
    kString, kEscape, kUnicode, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE,
    kNumExpSign, kNumExp, kLiteral,
  };

  State Fail() { return state_ = State::kError; }
  State Open(char bracket);
  State Close(char bracket);
  State StartValue(char c);
  State AfterValue(char c);
  State EndNumber(char c);

  bool allow_array_;
  size_t max_depth_;
  State state_ = State::kRunning;
  Mode mode_ = Mode::kStart;
  std::string stack_;          // '{' or '[' per open container
  bool string_is_key_ = false;
  int unicode_left_ = 0;       // hex digits still expected after \u
  const char* literal_ = nullptr;  // "true" / "false" / "null" being matched
  size_t literal_pos_ = 0;
};

}  // namespace lifeline::toolcall
