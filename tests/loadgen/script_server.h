// A scripted HTTP server for the load generator's client tests: raw POSIX sockets, one thread
// per connection. For each request it runs a script of (delay, bytes) steps chosen by the test
// (so streams with exact delays, malformed SSE, early closes and 429s are all possible), then
// closes the connection (or leaves it open for `hold_open_ms`).
// Thread-safety: the script function may be called from several connection threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lifeline::loadgen::testing {

struct ScriptStep {
  int delay_ms = 0;   // sleep before writing
  std::string bytes;  // written as is
};

struct Script {
  std::vector<ScriptStep> steps;
  int hold_open_ms = 0;  // keep the connection open after the last step
};

class ScriptServer {
 public:
  using ScriptFn = std::function<Script(const std::string& request_head_and_body)>;
  explicit ScriptServer(ScriptFn fn);
  ~ScriptServer();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests();  // every request received (head + body)
  // Most connections served at once, each counted from its accept to just before its last
  // scripted write (hold_open_ms not included).
  int max_concurrent() const { return max_concurrent_.load(); }

 private:
  void AcceptLoop();
  void Serve(int fd);

  ScriptFn fn_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::vector<std::string> requests_;
};

// Helpers for scripts.
std::string ChunkFrame(const std::string& payload);  // "<hex>\r\n<payload>\r\n"
std::string SseHead(const std::string& extra_headers = "");  // 200, event-stream, chunked
std::string JsonResponse(int status, const std::string& reason, const std::string& body,
                         const std::string& extra_headers = "");
// One OpenAI completion chunk as an SSE event: data: {"model":..,"choices":[{"text":..}]}\n\n
std::string TextEvent(const std::string& text, const std::string& model = "scripted");

// Retrieval answers as an OpenAI-compatible server gives them (api/README.md): `inputs`
// embeddings of `width` values each (float arrays, or base64 float32), or a ranking of
// `documents` documents, best first (the top_n best when top_n > 0); usage.prompt_tokens =
// `prompt_tokens`.
std::string EmbeddingsBody(int64_t inputs, int width, bool base64, int64_t prompt_tokens);
std::string RerankBody(int64_t documents, int64_t prompt_tokens, int64_t top_n = -1);
std::string Base64(const std::string& bytes);  // standard alphabet, padded

// A fake server's answer to POST /v1/embeddings or /v1/rerank, read off the request itself:
// one vector of `width` values per input in the encoding asked for, or one result per
// document (at most top_n); prompt tokens = the words sent. Another route: 404. A request
// body that is not the route's shape: 400.
Script RetrievalScript(const std::string& request_head_and_body, int width = 4);

}  // namespace lifeline::loadgen::testing
