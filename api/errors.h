// The one place that maps an outcome to HTTP. Every module says what happened as an
// ErrorKind (the request is invalid, the model is overloaded, the upstream failed, ...) and
// a machine-readable code; only the table in errors.cpp says which HTTP status and OpenAI
// error `type` a client sees for it, and only ErrorJson writes the OpenAI error body. No
// other file picks a status code for an error (tests/scripts/error_map_test.sh checks that).
//
// Thread-safety: pure functions over an immutable table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace lifeline::api {

// An OpenAI-shaped error: {"error":{"message","type","param","code"}} plus the HTTP status it
// maps to (filled from an ErrorKind by MakeError). `param` names the offending request field
// ("" when none); `retry_after_s` > 0 adds a Retry-After header (429/503).
struct ApiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "not_found_error", "unavailable", ...
  std::string code;     // machine-readable detail: "context_length_exceeded", "overloaded", ...
  std::string message;  // human-readable; names the field, the value and the limit
  std::string param;    // offending request field, e.g. "temperature", "messages[3].role"
  int retry_after_s = 0;
};

enum class ErrorKind : uint8_t {
  kInvalidRequest,        // the request as sent can never succeed: fix it, do not retry
  kUnauthorized,          // missing or wrong API key
  kNotFound,              // no such model or route
  kMethodNotAllowed,      // the route exists, not with this method
  kRequestTimeout,        // the request did not arrive in time
  kPayloadTooLarge,       // the body is over the cap
  kUnsupportedMediaType,  // not application/json
  kHeadersTooLarge,       // the header block is over the cap
  kOverloaded,            // load that may pass: retry after retry_after_s
  kCancelled,             // the client went away or cancelled (nginx's 499)
  kInternal,              // a bug or a failure inside this server
  kNotImplemented,        // valid HTTP this server does not implement
  kUpstream,              // a remote backend failed
  kUnavailable,           // not serving now (draining, model failed or not ready)
};

struct HttpErrorClass {
  int http_status;
  std::string_view type;  // OpenAI's error.type
};
HttpErrorClass ClassOf(ErrorKind kind);

// An ApiError of `kind`: its status and type from the table.
ApiError MakeError(ErrorKind kind, std::string code, std::string message,
                   std::string param = {}, int retry_after_s = 0);

// The builders the request parsers use most.
ApiError InvalidRequestError(std::string param, std::string message,
                             std::string code = "invalid_value");
ApiError NotFoundError(std::string param, std::string message, std::string code);
ApiError UnavailableError(std::string message, std::string code, int retry_after_s);
ApiError InternalError(std::string message);

// {"error": {"message", "type", "param", "code"}}: OpenAI's error body.
nlohmann::json ErrorJson(const ApiError& error);

}  // namespace lifeline::api
