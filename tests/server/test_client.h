// A small blocking HTTP/1.1 client over a raw POSIX socket for the server tests: it sends
// exactly the bytes a test writes (so malformed requests are possible) and decodes
// Content-Length, chunked and close-delimited bodies. Not thread-safe; one per test thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::server::testing {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names; repeated names joined ", "
  std::string body;                            // de-chunked
  bool closed = false;                         // the server closed after this reply
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class TestClient {
 public:
  // Connects to 127.0.0.1:port. `receive_buffer_bytes` > 0 shrinks SO_RCVBUF before connecting
  // (used to make a non-reading client fill up quickly).
  explicit TestClient(uint16_t port, int receive_buffer_bytes = 0);
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all bytes; false if the peer reset the connection.
  bool Send(std::string_view bytes);
  // Reads one complete response (through the last chunk of a chunked body).
  std::optional<HttpReply> ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads until `needle` appears in the raw bytes received so far (or timeout / close).
  bool ReadUntil(std::string_view needle, std::chrono::milliseconds timeout);
  // Reads until the server closes; true if it did within the timeout.
  bool WaitForClose(std::chrono::milliseconds timeout);
  void Close();
  const std::string& raw() const { return raw_; }

 private:
  // Appends to buf_; returns bytes read, 0 on EOF, -1 on timeout / error.
  int ReadMore(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buf_;  // received, not yet consumed
  std::string raw_;  // everything received
  bool eof_ = false;
};

std::string PostRequest(std::string_view path, std::string_view body,
                        std::string_view extra_headers = "",
                        std::string_view content_type = "application/json");
std::string GetRequest(std::string_view path, std::string_view extra_headers = "");

// Splits an SSE body into events: each "data: X" payload, or ":comment" lines as-is.
std::vector<std::string> SseEvents(std::string_view body);

}  // namespace lifeline::server::testing
