// Beast-free HTTP/1.1 response model and wire serialization. The server writes its own
// responses byte-for-byte (status line, headers, Content-Length or chunked framing) so the
// streaming path can account for every pending byte it has queued (back-pressure).
//
// Ownership: value types. Thread-safety: pure functions. Failure: none (inputs are ours).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/serving_api.h"

namespace lifeline::api {

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers, in order
  std::string body;
};

// "OK", "Not Found", ...; "Unknown" for codes we never send.
std::string_view StatusReason(int status);

// Status line, Content-Type, Content-Length, Connection, extra headers, blank line, body.
// For a HEAD request (`head`) everything but the body: Content-Length stays the GET body's
// size, which the client knows not to read (RFC 9110 9.3.2), so keep-alive framing holds.
std::string SerializeResponse(const HttpResponse& response, bool keep_alive, bool head = false);

// Head of a streamed response (no Content-Length). With `chunked` (HTTP/1.1) the body is sent
// as ChunkFrame()s ending in kLastChunk; otherwise (HTTP/1.0) it is delimited by close.
std::string SerializeStreamHead(const HttpResponse& head, bool chunked, bool keep_alive);
std::string ChunkFrame(std::string_view payload);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The OpenAI error body with its status; Retry-After when error.retry_after_s > 0.
HttpResponse ErrorResponse(const ApiError& error);
HttpResponse JsonResponse(int status, const nlohmann::json& body);

// nlohmann dump that replaces invalid UTF-8 instead of throwing.
std::string DumpJson(const nlohmann::json& value);

}  // namespace lifeline::api
