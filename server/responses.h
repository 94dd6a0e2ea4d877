// OpenAI response bodies: text_completion / chat.completion objects, their streaming chunk
// forms, SSE framing, and the W3C Server-Timing header built from the engine's timings.
//
// Ownership: pure builders returning values. Thread-safety: no shared state. Failure: none;
// text that is not valid UTF-8 is replaced when serialized (DumpJson), never thrown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/engine_api.h"

namespace lifeline::server {

// Identity shared by every object of one response (and every chunk of one stream).
struct CompletionContext {
  std::string id;            // "cmpl-..." or "chatcmpl-..."
  std::string model;         // the model that actually served the request
  int64_t created_unix_s = 0;
  bool is_chat = false;
};

// Non-streaming body: {id, object, created, model, choices[{index, text | message, finish_reason}],
// usage{prompt_tokens, completion_tokens, total_tokens}, timings}.
nlohmann::json FinalResponseJson(const CompletionContext& ctx, std::string_view text,
                                 std::string_view finish_reason, const Usage& usage,
                                 const nlohmann::json& timings);

// One streamed text delta. Chat uses `delta` (the first one also carries role "assistant").
nlohmann::json StreamDeltaJson(const CompletionContext& ctx, std::string_view text,
                               bool first_chunk);
// The chunk carrying finish_reason (empty delta for chat); `timings` attached when not null.
nlohmann::json StreamFinishJson(const CompletionContext& ctx, std::string_view finish_reason,
                                const nlohmann::json* timings);
// The optional usage chunk (stream_options.include_usage): empty choices plus usage.
nlohmann::json StreamUsageJson(const CompletionContext& ctx, const Usage& usage,
                               const nlohmann::json* timings);

// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseHeartbeat = ": keep-alive\n\n";

// "queue;dur=1.2, prefill;dur=30.1": one entry per numeric member named `<name>_ms`, in
// key order; names are reduced to RFC 7230 token characters. Empty when none.
std::string ServerTimingHeader(const nlohmann::json& timings);

}  // namespace lifeline::server
