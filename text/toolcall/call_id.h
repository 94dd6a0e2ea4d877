// CallIdGenerator: the ids of parsed tool calls. A model's own ids (Mistral Nemo writes one)
// are not used: the client sends our id back in the next turn's tool message, and the chat
// template then checks it, so the id must have the shape the template demands.
//
//   OpenAI style (every format but Mistral's): "call_" + 24 characters of [A-Za-z0-9].
//   Mistral formats: exactly 9 characters of [A-Za-z0-9]. Mistral Nemo's and Small 3.2's
//   templates raise "Tool call IDs should be alphanumeric strings with length 9!" for any other
//   length; Small 3.1's takes the last 9 of a longer one.
//
// The sequence is a pure function of the seed (splitmix64), so tests are deterministic; the
// server seeds each request from a random source.
//
// Ownership: value type. Thread-safety: one instance per request. Failure: none.
#pragma once

#include <cstdint>
#include <string>

#include "text/toolcall/format.h"

namespace lifeline::toolcall {

inline constexpr size_t kOpenAiIdChars = 24;   // after the "call_" prefix
inline constexpr size_t kMistralIdChars = 9;

class CallIdGenerator {
 public:
  explicit CallIdGenerator(uint64_t seed) : state_(seed) {}
  std::string Next(ToolCallFormat format);

 private:
  uint64_t NextU64();
  uint64_t state_;
};

}  // namespace lifeline::toolcall
