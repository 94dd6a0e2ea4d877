// Pieces of OpenAI response bodies (the envelope, usage; the choices are built by
// choice_assembler.h), SSE framing, and the W3C Server-Timing header built from the engine's
// timings.
//
// Ownership: pure builders returning values. Thread-safety: no shared state. Failure: none;
// text that is not valid UTF-8 is replaced when serialized (DumpJson), never thrown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/serving_api.h"

namespace lifeline::api {

// Identity shared by every object of one response (and every chunk of one stream).
struct CompletionContext {
  std::string id;            // "cmpl-..." or "chatcmpl-..."
  std::string model;         // the model that actually served the request
  int64_t created_unix_s = 0;
  bool is_chat = false;
};

// {id, object, created, model}: "chat.completion(.chunk)" or "text_completion".
nlohmann::json ResponseEnvelope(const CompletionContext& ctx, bool chunk);
// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}.
nlohmann::json UsageJson(const Usage& usage);

// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseHeartbeat = ": keep-alive\n\n";

// "network;dur=0.2, service;dur=2.1, compute;dur=40, queue;dur=1.2, prefill;dur=30.1, ...":
// with `server_total_ms`, the three layers first (they sum to it: network = http_read,
// compute = prefill + decode + sampling (+ remote), service = the rest), then one entry per
// numeric member named `<name>_ms`, in key order; names are reduced to RFC 7230 token
// characters. Empty when none.
std::string ServerTimingHeader(const nlohmann::json& timings);
// X-Lifeline-Thinking of a thinking model's answer, from timings.lifeline.reasoning:
// "tokens=N; budget=B[; requested=R][; shortened-by=slo|class_max][; cut]" (budget -1:
// unlimited; cut: the budget ended the thinking); "" when the answer had no thinking split.
std::string ThinkingHeader(const nlohmann::json& timings);

}  // namespace lifeline::api
