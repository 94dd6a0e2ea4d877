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
#include <vector>

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

std::string Base64(const std::string& bytes) {
  static const char* kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

namespace {

nlohmann::json UsageJson(int64_t prompt_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
}

// Words of a request's text, as the fake's token count.
int64_t Words(const nlohmann::json& text) {
  if (!text.is_string()) return 0;
  int64_t n = 0;
  bool in_word = false;
  for (char c : text.get_ref<const std::string&>()) {
    const bool space = c == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

}  // namespace

std::string EmbeddingsBody(int64_t inputs, int width, bool base64, int64_t prompt_tokens) {
  nlohmann::json data = nlohmann::json::array();
  for (int64_t i = 0; i < inputs; ++i) {
    std::vector<float> v(static_cast<size_t>(width));
    for (int d = 0; d < width; ++d) {
      v[static_cast<size_t>(d)] = 0.5f / static_cast<float>(d + 1 + i);
    }
    nlohmann::json e = v;
    if (base64) {
      // Little-endian float32 bytes, as the OpenAI SDKs decode them (this host is little-endian).
      e = Base64(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", e}});
  }
  return nlohmann::json({{"object", "list"}, {"data", data}, {"model", "scripted"},
                         {"usage", UsageJson(prompt_tokens)}})
      .dump();
}

std::string RerankBody(int64_t documents, int64_t prompt_tokens, int64_t top_n) {
  nlohmann::json results = nlohmann::json::array();
  const int64_t last = top_n > 0 ? std::max<int64_t>(0, documents - top_n) : 0;
  // Best first: the later documents score higher here, so the indices come in reverse.
  for (int64_t i = documents - 1; i >= last; --i) {
    results.push_back({{"index", i}, {"relevance_score", 0.1 * static_cast<double>(i)}});
  }
  return nlohmann::json({{"object", "list"}, {"model", "scripted"}, {"results", results},
                         {"usage", UsageJson(prompt_tokens)}})
      .dump();
}

Script RetrievalScript(const std::string& request, int width) {
  const std::string line = request.substr(0, request.find("\r\n"));
  const size_t at = request.find("\r\n\r\n");
  const nlohmann::json j = nlohmann::json::parse(
      at == std::string::npos ? std::string() : request.substr(at + 4), nullptr, false);
  auto bad = [] {
    return Script{{{0, JsonResponse(400, "Bad Request", R"({"error":{"message":"bad body"}})")}}};
  };
  if (line.starts_with("POST /v1/embeddings ")) {
    if (!j.is_object() || !j.contains("input") || !j["input"].is_array()) return bad();
    int64_t words = 0;
    for (const nlohmann::json& in : j["input"]) words += Words(in);
    const bool base64 = j.value("encoding_format", "float") == "base64";
    const int64_t n = static_cast<int64_t>(j["input"].size());
    return Script{{{0, JsonResponse(200, "OK", EmbeddingsBody(n, width, base64, words))}}};
  }
  if (line.starts_with("POST /v1/rerank ")) {
    if (!j.is_object() || !j.contains("query") || !j["query"].is_string() ||
        !j.contains("documents") || !j["documents"].is_array()) {
      return bad();
    }
    int64_t words = Words(j["query"]);
    for (const nlohmann::json& d : j["documents"]) words += Words(d);
    const int64_t top_n = j.value("top_n", int64_t{-1});
    const int64_t n = static_cast<int64_t>(j["documents"].size());
    return Script{{{0, JsonResponse(200, "OK", RerankBody(n, words, top_n))}}};
  }
  return Script{{{0, JsonResponse(404, "Not Found", R"({"error":{"message":"no route"}})")}}};
}

}  // namespace lifeline::loadgen::testing
