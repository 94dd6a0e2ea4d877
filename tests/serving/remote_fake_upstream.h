// A scripted stand-in for a remote OpenAI-compatible server, on plain POSIX sockets (so it
// shares no code with the Beast client under test): listens on 127.0.0.1 port 0, reads each
// request (head + Content-Length body), records it, then runs the test's script on the
// connection, which writes whatever bytes it likes (SSE chunks, errors, garbage, nothing).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace lifeline::testing {

class FakeUpstream {
 public:
  struct Conn {
    FakeUpstream* owner;
    int fd;
    // False once the peer is gone (the bytes could not all be written).
    bool Send(std::string_view bytes) const;
    bool Stopping() const;
    // Reads (and drops) until the client closes the connection: true, or `max` passes or the
    // server stops: false. A close is counted for WaitPeerClosed.
    bool HoldUntilClosed(std::chrono::milliseconds max) const;
  };
  using Script = std::function<void(const Conn&, const std::string& request)>;

  explicit FakeUpstream(Script script);
  ~FakeUpstream();  // stops accepting, lets scripts end, joins every thread

  uint16_t port() const { return port_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::vector<std::string> Requests() const;  // raw requests, head and body
  bool WaitRequests(size_t n, std::chrono::milliseconds timeout);
  bool WaitPeerClosed(std::chrono::milliseconds timeout);
  static std::string Body(const std::string& request);

 private:
  void AcceptLoop();
  std::string ReadRequest(int fd);

  Script script_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> conns_;
  std::vector<std::string> requests_;
  int peer_closed_ = 0;
};


}  // namespace lifeline::testing
