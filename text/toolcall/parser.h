// Tool-call parsing of model output, whole (ParseToolCalls) or streamed
// (ToolCallStreamParser). The formats and their syntax are described in format.h.
//
// Result: the content (all text outside calls, with leading and trailing whitespace removed,
// as OpenAI's message.content never carries the blank line a model writes before a call) and
// the calls, each {id, name, arguments}, where arguments is the compact JSON serialisation
// (nlohmann dump(), keys in the model's order, non-ASCII kept as UTF-8) of the call's
// arguments object. Arguments written as a JSON string holding an object (Mistral Nemo's
// training format) are parsed and re-serialised the same way.
//
// Malformed calls: when a call marker (or, for the JSON-at-start formats, a JSON value that
// begins like a call) is not followed by a well-formed call, no text is lost: the text from
// the marker up to the byte where it stopped being a call goes to the content as written,
// parsing resumes at that byte, and `malformed` is set. A JSON value that is complete but
// not a call object (no string "name", arguments not an object) is content in the same way.
// Nothing throws.
//
// Streaming: Push() returns what became certain with this chunk; Finish() flushes the rest.
// Content is released as soon as it cannot be the start of a marker (e.g. "<tool" at the end
// of a chunk is held until the next byte says whether "<tool_call>" follows). A call is
// emitted when its JSON is complete and checked, as two deltas: the first carries index, id
// and name with empty arguments, the second the whole arguments string. Why not stream the
// arguments as they are generated: until the JSON closes, the call may still turn out
// malformed, and then its text belongs to the content; a fragment sent to a client cannot be
// taken back. Calls are short next to the answers around them, so the wait is small, and
// the concatenation of a call's fragments is exactly its arguments string, valid compact
// JSON. The stream is a byte-driven state machine: the concatenated content, the calls and
// the ids are the same however the output is split into chunks, and equal ParseToolCalls's.
//
// Limits: one call's text may be at most kMaxCallBytes and its JSON nested kMaxCallDepth
// deep; past either it is malformed (content). The parser holds at most one call plus a
// marker's length of text.
//
// Ownership: the stream parser owns copies of pending text. Thread-safety: one instance per
// output, one thread at a time. Failure: none (see Malformed calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/toolcall/format.h"

namespace lifeline::toolcall {

inline constexpr size_t kMaxCallBytes = size_t{1} << 20;
inline constexpr size_t kMaxCallDepth = 64;

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // compact JSON object text
  bool operator==(const ToolCall&) const = default;
};

struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
  bool malformed = false;  // some call-like text could not be parsed; it is in `content`
};

struct ToolCallParseOptions {
  uint64_t id_seed = 0;  // seeds the call ids (call_id.h); the server passes a random value
  // The prompt ended inside a thinking block (QwQ's and DeepSeek R1's generation prompt ends
  // with "<think>\n"): text up to the closing tag is thinking, kept as content, with no calls
  // inside. Used by kHermes ("</think>") and the Mistral formats ("[/THINK]").
  bool starts_in_thinking = false;
};

// One piece of a streamed result. The server maps it to one OpenAI chunk:
//   kContent                -> delta.content = text
//   kToolCall, first        -> delta.tool_calls = [{index, id, type: "function",
//                                                   function: {name, arguments: ""}}]
//   kToolCall, not first    -> delta.tool_calls = [{index, function: {arguments: text}}]
struct ToolCallDelta {
  enum class Kind : uint8_t { kContent, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;   // content fragment, or arguments fragment ("" on a call's first delta)
  size_t index = 0;   // kToolCall: the call's position in this output, from 0
  bool first = false;  // kToolCall: the call's first delta; id and name are set
  std::string id;
  std::string name;
};

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view output,
                               const ToolCallParseOptions& options = {});

class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallFormat format, const ToolCallParseOptions& options = {});
  ~ToolCallStreamParser();
  ToolCallStreamParser(ToolCallStreamParser&&) noexcept;
  ToolCallStreamParser& operator=(ToolCallStreamParser&&) noexcept;

  std::vector<ToolCallDelta> Push(std::string_view text_delta);
  // Ends the output: held text is released, an unfinished call becomes content. Push and
  // Finish after Finish return nothing.
  std::vector<ToolCallDelta> Finish();

  size_t calls_emitted() const;  // finish_reason "tool_calls" when > 0 at the end
  bool malformed() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lifeline::toolcall
