#include "serving/remote_fake_upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/http_test_client.h"

namespace lifeline::testing {

FakeUpstream::FakeUpstream(Script script) : script_(std::move(script)) {
  listen_fd_ = ListenLoopback(64, &port_);
  if (listen_fd_ < 0) return;
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeUpstream::~FakeUpstream() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns.swap(conns_);
  }
  for (auto& t : conns) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FakeUpstream::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    conns_.emplace_back([this, fd] {
      std::string request = ReadRequest(fd);
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(request);
      }
      cv_.notify_all();
      script_(Conn{this, fd}, request);
      ::close(fd);
    });
  }
}

std::string FakeUpstream::ReadRequest(int fd) {
  std::string in;
  char buf[4096];
  size_t body_at = std::string::npos;
  size_t want = 0;
  while (!stopping_) {
    if (body_at == std::string::npos) {
      const size_t end = in.find("\r\n\r\n");
      if (end != std::string::npos) {
        body_at = end + 4;
        std::string head = in.substr(0, end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("content-length:");
        if (cl != std::string::npos) want = std::stoul(head.substr(cl + 15));
      }
    }
    if (body_at != std::string::npos && in.size() >= body_at + want) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

std::vector<std::string> FakeUpstream::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

bool FakeUpstream::WaitRequests(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

bool FakeUpstream::WaitPeerClosed(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return peer_closed_ > 0; });
}

bool FakeUpstream::Conn::Send(std::string_view bytes) const {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool FakeUpstream::Conn::Stopping() const { return owner->stopping_; }

bool FakeUpstream::Conn::HoldUntilClosed(std::chrono::milliseconds max) const {
  const auto until = std::chrono::steady_clock::now() + max;
  char buf[256];
  while (!owner->stopping_ && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      {
        std::lock_guard<std::mutex> lock(owner->mu_);
        ++owner->peer_closed_;
      }
      owner->cv_.notify_all();
      return true;
    }
  }
  return false;
}

std::string FakeUpstream::Body(const std::string& request) {
  const size_t at = request.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : request.substr(at + 4);
}

}  // namespace lifeline::testing
