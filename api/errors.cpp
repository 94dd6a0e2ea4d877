#include "api/errors.h"

#include <utility>

#include <nlohmann/json.hpp>

namespace lifeline::api {

HttpErrorClass ClassOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return {400, "invalid_request_error"};
    case ErrorKind::kUnauthorized: return {401, "authentication_error"};
    case ErrorKind::kNotFound: return {404, "not_found_error"};
    case ErrorKind::kMethodNotAllowed: return {405, "invalid_request_error"};
    case ErrorKind::kRequestTimeout: return {408, "invalid_request_error"};
    case ErrorKind::kPayloadTooLarge: return {413, "invalid_request_error"};
    case ErrorKind::kUnsupportedMediaType: return {415, "invalid_request_error"};
    case ErrorKind::kHeadersTooLarge: return {431, "invalid_request_error"};
    case ErrorKind::kOverloaded: return {429, "overloaded_error"};
    // Not a standard status: nginx's "client closed request". It is never written to a
    // client that is still there; it labels the outcome in logs and metrics.
    case ErrorKind::kCancelled: return {499, "cancelled"};
    case ErrorKind::kInternal: return {500, "internal_error"};
    case ErrorKind::kNotImplemented: return {501, "invalid_request_error"};
    case ErrorKind::kUpstream: return {502, "upstream_error"};
    case ErrorKind::kUnavailable: return {503, "unavailable"};
  }
  return {500, "internal_error"};
}

ApiError MakeError(ErrorKind kind, std::string code, std::string message, std::string param,
                   int retry_after_s) {
  const HttpErrorClass c = ClassOf(kind);
  ApiError e;
  e.http_status = c.http_status;
  e.type = std::string(c.type);
  e.code = std::move(code);
  e.message = std::move(message);
  e.param = std::move(param);
  e.retry_after_s = retry_after_s;
  return e;
}

ApiError InvalidRequestError(std::string param, std::string message, std::string code) {
  return MakeError(ErrorKind::kInvalidRequest, std::move(code), std::move(message),
                   std::move(param));
}

ApiError NotFoundError(std::string param, std::string message, std::string code) {
  return MakeError(ErrorKind::kNotFound, std::move(code), std::move(message), std::move(param));
}

ApiError UnavailableError(std::string message, std::string code, int retry_after_s) {
  return MakeError(ErrorKind::kUnavailable, std::move(code), std::move(message), {},
                   retry_after_s);
}

ApiError InternalError(std::string message) {
  return MakeError(ErrorKind::kInternal, "internal_error", std::move(message));
}

nlohmann::json ErrorJson(const ApiError& e) {
  using json = nlohmann::json;
  json inner = json::object();
  inner["message"] = e.message;
  inner["type"] = e.type;
  inner["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  inner["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", std::move(inner)}};
}

}  // namespace lifeline::api
