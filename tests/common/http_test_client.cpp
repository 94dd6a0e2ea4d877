#include "common/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace lifeline::testing {

using Clock = std::chrono::steady_clock;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  return s;
}

// Parses "HTTP/1.1 200 OK\r\nName: value\r\n..." (without the blank line) into `reply`.
bool ParseHead(const std::string& head, HttpReply* reply) {
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.")) return false;
  reply->status = std::stoi(status_line.substr(9, 3));
  while (line_end != std::string::npos && line_end < head.size()) {
    const size_t next = head.find("\r\n", line_end + 2);
    const std::string line = head.substr(
        line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      auto& slot = reply->headers[Lower(line.substr(0, colon))];
      slot = slot.empty() ? value : slot + ", " + value;
    }
    line_end = next;
  }
  return true;
}

}  // namespace

HttpTestClient::HttpTestClient(uint16_t port, int receive_buffer_bytes) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  if (receive_buffer_bytes > 0) {
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

HttpTestClient::~HttpTestClient() { Close(); }

void HttpTestClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void HttpTestClient::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void HttpTestClient::CloseWithReset() {
  if (fd_ < 0) return;
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  Close();
}

bool HttpTestClient::Send(std::string_view bytes) {
  if (fd_ < 0) return false;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

int HttpTestClient::ReadMore(Clock::time_point deadline) {
  if (eof_ || fd_ < 0) return 0;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    char tmp[16384];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // EOF; a reset counts as closed too
      eof_ = true;
      return 0;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    raw_.append(tmp, static_cast<size_t>(n));
    return static_cast<int>(n);
  }
}

bool HttpTestClient::ReadUntilCount(std::string_view needle, int count,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto occurrences = [&] {
    int n = 0;
    for (size_t p = raw_.find(needle); p != std::string::npos; p = raw_.find(needle, p + 1)) ++n;
    return n;
  };
  while (occurrences() < count) {
    if (ReadMore(deadline) <= 0) return occurrences() >= count;
  }
  return true;
}

bool HttpTestClient::WaitForClose(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const int n = ReadMore(deadline);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

std::optional<HttpReply> HttpTestClient::ReadResponse(std::chrono::milliseconds timeout,
                                                      bool to_head) {
  const auto deadline = Clock::now() + timeout;
  size_t head_end;
  while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (ReadMore(deadline) <= 0) return std::nullopt;
  }
  HttpReply reply;
  if (!ParseHead(buf_.substr(0, head_end), &reply)) return std::nullopt;
  buf_.erase(0, head_end + 4);
  if (reply.status == 100) return ReadResponse(timeout, to_head);  // interim response
  const std::string te = Lower(reply.Header("transfer-encoding"));
  const std::string cl = reply.Header("content-length");
  if (to_head) {
    // No body follows; anything still buffered belongs to the next response.
  } else if (te == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) {
        if (ReadMore(deadline) <= 0) return std::nullopt;
      }
      const size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
      while (buf_.size() < eol + 2 + size + 2) {
        if (ReadMore(deadline) <= 0) return std::nullopt;
      }
      reply.body += buf_.substr(eol + 2, size);
      buf_.erase(0, eol + 2 + size + 2);
      if (size == 0) break;
    }
  } else if (!cl.empty()) {
    const size_t size = std::stoul(cl);
    while (buf_.size() < size) {
      if (ReadMore(deadline) <= 0) return std::nullopt;
    }
    reply.body = buf_.substr(0, size);
    buf_.erase(0, size);
  } else if (reply.status != 204 && reply.status != 304) {
    while (ReadMore(deadline) > 0) {
    }
    reply.body = std::move(buf_);
    buf_.clear();
  }
  reply.closed = Lower(reply.Header("connection")) == "close";
  return reply;
}

std::string PostRequest(std::string_view path, std::string_view body,
                        std::string_view extra_headers, std::string_view content_type) {
  std::string r = "POST " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!content_type.empty()) r += "Content-Type: " + std::string(content_type) + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

std::string GetRequest(std::string_view path, std::string_view extra_headers) {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n" +
         std::string(extra_headers) + "\r\n";
}

std::string HeadRequest(std::string_view path, std::string_view extra_headers) {
  return "HEAD " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n" +
         std::string(extra_headers) + "\r\n";
}

std::optional<HttpReply> Roundtrip(uint16_t port, const std::string& request,
                                   std::chrono::milliseconds timeout) {
  HttpTestClient c(port);
  if (!c.connected() || !c.Send(request)) return std::nullopt;
  return c.ReadResponse(timeout);
}

namespace {

// Calls `f` with every blank-line-separated event of an SSE body.
template <typename F>
void ForEachSseEvent(std::string_view body, F f) {
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string_view::npos) end = body.size();
    f(body.substr(pos, end - pos));
    pos = end + 2;
  }
}

}  // namespace

std::vector<std::string> SseData(std::string_view body) {
  std::vector<std::string> out;
  ForEachSseEvent(body, [&](std::string_view event) {
    if (event.starts_with("data: ")) out.emplace_back(event.substr(6));
  });
  return out;
}

std::vector<std::string> SseEvents(std::string_view body) {
  std::vector<std::string> out;
  ForEachSseEvent(body, [&](std::string_view event) {
    if (event.starts_with("data: ")) {
      out.emplace_back(event.substr(6));
    } else if (!event.empty()) {
      out.emplace_back(event);
    }
  });
  return out;
}

std::string Dechunk(std::string_view chunked) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t eol = chunked.find("\r\n", pos);
    if (eol == std::string_view::npos) break;
    size_t size = 0;
    try {
      size = std::stoul(std::string(chunked.substr(pos, eol - pos)), nullptr, 16);
    } catch (const std::exception&) {
      break;
    }
    if (size == 0 || eol + 2 + size > chunked.size()) break;
    out.append(chunked.substr(eol + 2, size));
    pos = eol + 2 + size + 2;
  }
  return out;
}

std::string UrlEncode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

int ListenLoopback(int backlog, uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

std::optional<uint16_t> FreeLoopbackPort() {
  uint16_t port = 0;
  const int fd = ListenLoopback(1, &port);
  if (fd < 0) return std::nullopt;
  ::close(fd);
  return port;
}

}  // namespace lifeline::testing
