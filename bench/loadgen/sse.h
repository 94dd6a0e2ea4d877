// Server-sent events for the load generator: an incremental parser over response-body bytes
// (any split point, LF / CRLF / CR line ends, comments, multi-line data) and the reading of one
// OpenAI streaming chunk (text, model, usage, timings, error).
//
// Ownership: SseParser owns its partial-line buffer. Thread-safety: one parser per stream.
// Failure: a line longer than the cap is a protocol error reported by Feed (the caller records
// the request as malformed); a chunk that is not JSON is reported in ChunkInfo::malformed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::loadgen {

struct SseEvent {
  std::string event;  // "event:" field ("" = message)
  std::string data;   // "data:" lines joined with '\n'
};

class SseParser {
 public:
  explicit SseParser(size_t max_line_bytes = 4 << 20) : max_line_bytes_(max_line_bytes) {}
  // Appends complete events found in `bytes` to *out. False once a line exceeds the cap.
  bool Feed(std::string_view bytes, std::vector<SseEvent>* out);
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
struct ChunkInfo {
  bool done = false;       // "[DONE]"
  bool malformed = false;  // not JSON, or not an object
  std::string model;       // "" when absent
  std::string text;        // choices[0].text or choices[0].delta.content
  std::string finish_reason;
  int64_t prompt_tokens = -1;      // usage, when present
  int64_t completion_tokens = -1;
  nlohmann::json timings;  // null when absent
  std::string error;       // error.message (or the whole error value) when the chunk is an error
};

ChunkInfo ParseChunk(std::string_view data);

}  // namespace lifeline::loadgen
