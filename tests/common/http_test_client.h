// A small blocking HTTP/1.1 client over a raw POSIX socket, shared by the server tests (an
// in-process HttpServer) and the integration tests (the real `lifeline serve` process, and a
// Prometheus server's query API). It sends exactly the bytes a test writes, so malformed
// requests are possible, and decodes Content-Length, chunked and close-delimited bodies, so a
// test sees the wire output as a real client would.
//
// Ownership: owns its socket. Thread-safety: none; one client per thread (the free functions
// may be called from several threads). Failure: a refused connection leaves connected() false;
// read timeouts and closes are std::nullopt / false, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::testing {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names; repeated names joined ", "
  std::string body;                            // de-chunked
  bool closed = false;                         // the server sent "Connection: close"
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpTestClient {
 public:
  // Connects to 127.0.0.1:port. `receive_buffer_bytes` > 0 shrinks SO_RCVBUF before
  // connecting (used to make a non-reading client fill up quickly).
  explicit HttpTestClient(uint16_t port, int receive_buffer_bytes = 0);
  ~HttpTestClient();
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all bytes; false if not connected or the peer reset the connection.
  bool Send(std::string_view bytes);
  // Reads one complete response (through the last chunk of a chunked body); a 100 Continue
  // interim response is skipped. `to_head`: the answer to a HEAD request, which has no body
  // whatever its Content-Length says, so only the head is read (as a real client does).
  std::optional<HttpReply> ReadResponse(
      std::chrono::milliseconds timeout = std::chrono::seconds(5), bool to_head = false);
  // Reads until `needle` appears in the raw bytes received so far (or timeout / close).
  bool ReadUntil(std::string_view needle, std::chrono::milliseconds timeout) {
    return ReadUntilCount(needle, 1, timeout);
  }
  // Reads until `needle` occurs at least `count` times in the raw bytes received so far.
  bool ReadUntilCount(std::string_view needle, int count, std::chrono::milliseconds timeout);
  // Reads until the server closes; true if it did within the timeout.
  bool WaitForClose(std::chrono::milliseconds timeout);
  void Close();
  // shutdown(SHUT_WR): the server sees end of stream, and this client can still read.
  void ShutdownWrite();
  // Closes with SO_LINGER 0: the kernel sends a reset instead of a FIN.
  void CloseWithReset();
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

// "POST path HTTP/1.1" with Host, Content-Type (none if empty), Content-Length, then
// `extra_headers` (each line ending in "\r\n") and the body.
std::string PostRequest(std::string_view path, std::string_view body,
                        std::string_view extra_headers = "",
                        std::string_view content_type = "application/json");
std::string GetRequest(std::string_view path, std::string_view extra_headers = "");
std::string HeadRequest(std::string_view path, std::string_view extra_headers = "");

// One request on a fresh connection; nullopt if the connection or the read failed.
std::optional<HttpReply> Roundtrip(uint16_t port, const std::string& request,
                                   std::chrono::milliseconds timeout);

// Splits an SSE body into the payloads of its "data: X" events (comments dropped).
std::vector<std::string> SseData(std::string_view body);
// Splits an SSE body into events: each "data: X" payload, or ":comment" lines as they are.
std::vector<std::string> SseEvents(std::string_view body);

// Decodes a chunked HTTP body prefix (what arrived so far), ignoring an incomplete last chunk.
std::string Dechunk(std::string_view chunked);

// Percent-encodes a query-string value (RFC 3986 unreserved characters stay as they are).
std::string UrlEncode(std::string_view value);

// A loopback port that was free a moment ago: bind port 0, read it back, close. Nothing listens
// there now (a connect is refused), but another process may take it before the caller binds it.
std::optional<uint16_t> FreeLoopbackPort();

// A listening socket on 127.0.0.1 at a port the kernel picks (SO_REUSEADDR), for the tests'
// scripted servers. Returns the fd and sets *port, or -1 when socket/bind/listen fails.
int ListenLoopback(int backlog, uint16_t* port);

}  // namespace lifeline::testing
