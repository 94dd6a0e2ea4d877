// Server-sent events as both OpenAI-compatible clients read them (the remote cascade member
// and the load generator): an incremental parser over response-body bytes (any split point,
// LF / CRLF / CR line ends as the SSE specification allows, comments, multi-line data) and the
// reading of one OpenAI streaming chunk (text, thinking, tool calls, finish reason, model, usage,
// timings, error).
//
// Ownership: SseParser owns its partial-line buffer. Thread-safety: one parser per stream.
// Failure: a line longer than the cap is a protocol error reported by Feed; a chunk that is
// not a well-formed OpenAI chunk says why in StreamChunk::malformed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::net {

struct SseEvent {
  std::string event;  // "event:" field ("" = message)
  std::string data;   // "data:" lines joined with '\n'
};

class SseParser {
 public:
  explicit SseParser(size_t max_line_bytes = 4 << 20) : max_line_bytes_(max_line_bytes) {}
  // Appends complete events found in `bytes` to *out. False once a line exceeds the cap.
  bool Feed(std::string_view bytes, std::vector<SseEvent>* out);
  // The body ended: a last line without its line end, and an event without its blank line,
  // still count (appended to *out).
  void Finish(std::vector<SseEvent>* out);
  // True when bytes of an unfinished event are pending (a stream that ends here was cut).
  bool HasPartialEvent() const { return !line_.empty() || has_data_ || !event_.event.empty(); }

 private:
  void OnLine(std::string_view line, std::vector<SseEvent>* out);
  size_t max_line_bytes_;
  std::string line_;
  bool last_was_cr_ = false;
  bool has_data_ = false;
  SseEvent event_;
};

// What one `data:` payload of an OpenAI-style stream says.
struct StreamChunk {
  bool done = false;       // "[DONE]"
  std::string malformed;   // why it is not a chunk ("" when it is): not a JSON object,
                           // `choices` not an array, the text not a string, ...
  std::string error;       // an error event's message ({"error": {"message"}} or "error")
  std::string model;       // "" when absent
  std::string text;        // choices[0].text or choices[0].delta.content
  // choices[0].delta.reasoning_content (llama.cpp, DeepSeek) or .reasoning (vLLM): a
  // thinking model's thinking
  std::string reasoning;
  // choices[0].delta.tool_calls is a non-empty array: a piece of a streamed tool call (part
  // of the answer, like text)
  bool tool_calls = false;
  std::string finish_reason;
  int64_t prompt_tokens = -1;      // usage, when present (both >= 0)
  int64_t completion_tokens = -1;
  nlohmann::json timings;  // null when absent
};

StreamChunk ParseStreamChunk(std::string_view data);

// The message of an OpenAI-style error body ({"error":{"message"}}, {"error":"..."} or
// vLLM's {"message"}), cut to 500 bytes; the body excerpt otherwise.
std::string ErrorBodyMessage(std::string_view body);

}  // namespace lifeline::net
