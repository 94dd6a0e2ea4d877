#include "api/http_message.h"

#include <cstdio>

#include "api/openai.h"

namespace lifeline::api {

std::string_view StatusReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

namespace {

std::string Head(const HttpResponse& r, bool keep_alive) {
  std::string out;
  out.reserve(256);
  out += "HTTP/1.1 ";
  out += std::to_string(r.status);
  out += ' ';
  out += StatusReason(r.status);
  out += "\r\nServer: lifeline\r\n";
  if (!r.content_type.empty()) {
    out += "Content-Type: ";
    out += r.content_type;
    out += "\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : r.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  return out;
}

}  // namespace

std::string SerializeResponse(const HttpResponse& r, bool keep_alive, bool head) {
  std::string out = Head(r, keep_alive);
  // A 304 has no body by definition and must not announce one (RFC 9110 8.6).
  if (r.status != 304) {
    out += "Content-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\n";
  }
  out += "\r\n";
  if (!head) out += r.body;
  return out;
}

std::string SerializeStreamHead(const HttpResponse& head, bool chunked, bool keep_alive) {
  std::string out = Head(head, keep_alive && chunked);
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  out += "\r\n";
  return out;
}

std::string ChunkFrame(std::string_view payload) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  std::string out = size;
  out += payload;
  out += "\r\n";
  return out;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse JsonResponse(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse r = JsonResponse(error.http_status, ErrorJson(error));
  if (error.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  return r;
}

}  // namespace lifeline::api
