#include "loadgen/script_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/http_test_client.h"

namespace lifeline::loadgen::testing {

ScriptServer::ScriptServer(ScriptFn fn) : fn_(std::move(fn)) {
  uint16_t port = 0;
  listen_fd_ = lifeline::testing::ListenLoopback(128, &port);
  if (listen_fd_ < 0) {
    std::perror("script server");
    std::abort();
  }
  port_ = port;
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

ScriptServer::~ScriptServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

std::vector<std::string> ScriptServer::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void ScriptServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void ScriptServer::Serve(int fd) {
  const int now = ++concurrent_;
  int prev = max_concurrent_.load();
  while (now > prev && !max_concurrent_.compare_exchange_weak(prev, now)) {
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Read the head, then Content-Length bytes of body.
  std::string req;
  char buf[4096];
  size_t need = std::string::npos;
  while (true) {
    const size_t head_end = req.find("\r\n\r\n");
    if (head_end != std::string::npos && need == std::string::npos) {
      size_t content_length = 0;
      std::string lower = req.substr(0, head_end);
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (size_t at = lower.find("content-length:"); at != std::string::npos) {
        content_length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
      }
      need = head_end + 4 + content_length;
    }
    if (need != std::string::npos && req.size() >= need) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
  }
  const Script script = fn_(req);
  // The response stops counting as in flight just before its last write: once that write
  // lands, the client may open its next request at once, possibly before this thread runs
  // again (a busy machine), which would count one client slot twice.
  bool counted = true;
  auto done = [&] {
    if (counted) --concurrent_;
    counted = false;
  };
  for (size_t i = 0; i < script.steps.size(); ++i) {
    const ScriptStep& s = script.steps[i];
    if (s.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.delay_ms));
    if (i + 1 == script.steps.size()) done();
    if (!s.bytes.empty() && ::send(fd, s.bytes.data(), s.bytes.size(), MSG_NOSIGNAL) < 0) break;
  }
  done();
  if (script.hold_open_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(script.hold_open_ms));
  }
  ::close(fd);
}

std::string ChunkFrame(const std::string& payload) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%zx\r\n", payload.size());
  return hex + payload + "\r\n";
}

std::string SseHead(const std::string& extra_headers) {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n" +
         extra_headers + "\r\n";
}

std::string JsonResponse(int status, const std::string& reason, const std::string& body,
                         const std::string& extra_headers) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

std::string TextEvent(const std::string& text, const std::string& model) {
  const nlohmann::json j = {{"model", model},
                            {"choices", nlohmann::json::array({{{"index", 0}, {"text", text},
                                                                {"finish_reason", nullptr}}})}};
  return "data: " + j.dump() + "\n\n";
}

}  // namespace lifeline::loadgen::testing
