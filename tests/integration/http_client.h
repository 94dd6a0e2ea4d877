// A small blocking HTTP/1.1 client over a raw POSIX socket for the integration tests: it sends
// exactly the bytes a test writes and decodes Content-Length, chunked and close-delimited
// bodies, so a test sees the server's wire output as a real client would.
//
// Ownership: owns its socket. Thread-safety: none; one client per thread. Failure: a refused
// connection leaves connected() false; read timeouts and closes are std::nullopt / false.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::integration {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names; repeated names joined ", "
  std::string body;                            // de-chunked
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port);  // connects to 127.0.0.1:port
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all bytes; false if the peer reset the connection.
  bool Send(std::string_view bytes);
  // Reads one complete response (through the last chunk of a chunked body).
  std::optional<HttpReply> ReadResponse(std::chrono::milliseconds timeout);
  // Reads until `needle` occurs at least `count` times in the raw bytes received so far.
  bool ReadUntilCount(std::string_view needle, int count, std::chrono::milliseconds timeout);
  // Reads until the server closes; true if it did within the timeout.
  bool WaitForClose(std::chrono::milliseconds timeout);
  void Close();
  // Everything received so far, undecoded.
  const std::string& raw() const { return raw_; }

 private:
  // Appends to buf_ and raw_; returns bytes read, 0 on EOF / reset, -1 on timeout.
  int ReadMore(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buf_;  // received, not yet consumed by ReadResponse
  std::string raw_;  // everything received
  bool eof_ = false;
};

std::string PostRequest(std::string_view path, std::string_view body,
                        std::string_view content_type = "application/json",
                        std::string_view extra_headers = "");
std::string GetRequest(std::string_view path);

// One request on a fresh connection.
std::optional<HttpReply> Roundtrip(uint16_t port, const std::string& request,
                                   std::chrono::milliseconds timeout);

// Splits an SSE body into the payloads of its "data: X" events (comments dropped).
std::vector<std::string> SseData(std::string_view body);

// Decodes a chunked HTTP body prefix (what arrived so far), ignoring an incomplete last chunk.
std::string Dechunk(std::string_view chunked);

}  // namespace lifeline::integration
