// The HTTP/1.1 + SSE front end: an Asio/Beast server run by a small fixed pool of I/O threads
// (default 1; no thread per connection) that serves the OpenAI-compatible routes listed in
// api/router.h and streams tokens from an ServingApi.
//
// Limits (ServerLimits, all configurable, defaults below) are enforced before work starts:
// header bytes -> 431; Content-Length above max_body_bytes -> 413 before the body is read; a
// chunked body is counted as it arrives, framing included (http_framing.h): all of it above
// max_body_bytes -> 413, one chunk-size line or trailer line above max_framing_line_bytes or
// a trailer section above max_trailer_bytes -> 400 framing_too_large (an element that long
// is not content a client meant to send: a smaller body would not help, so not 413), each
// closing the connection; connections above max_connections get 503 and are closed; a
// header or body not complete within its deadline -> 408; an idle keep-alive connection is
// closed; a write that makes no progress within write_timeout closes the connection (and
// cancels its request). An HTTP/1.1 request without Host, or any with two, is 400 bad_host.
//
// The I/O threads only read, route, write and answer the small endpoints. Work whose cost
// grows with the request -- a generation request's parse and ServingApi::Submit (chat
// template, tokens, grammar or JSON schema, admission), /tokenize, /detokenize,
// /apply-template -- runs on `prep_threads` prep threads (prep_pool.h) and its answer comes
// back to the connection's strand, so /health and /ready answer while a large schema
// compiles. At most max_prep_queued requests wait for a prep thread: above, 503
// prep_queue_full with Retry-After.
//
// With API keys, the key is checked from the header alone: a protected route without a
// valid key is answered 401 before any body byte is read (and when a body was announced the
// connection closes, discarding at most max_unauthenticated_body_bytes of it); a request
// without a valid key to a public route (health, readiness, the page) or to no route may
// send at most max_unauthenticated_body_bytes of body (413 above).
//
// Every generation request the engine accepts ends visibly exactly once: a JSON response, an
// HTTP error, or for a stream that already began a terminal `data: {"error":...}` event with
// no [DONE]. A client that disconnects, stops reading (pending stream bytes above
// max_stream_buffer_bytes or write deadline) or is cut off by Stop() has its request
// cancelled (ServingApi::Cancel exactly once) and counted in the ledger (server_metrics.h).
// A client that half-closes (shutdown(SHUT_WR)) after a complete request gets its answer:
// end-of-stream on the read side is not a disconnect. A client that closed the whole socket
// sends the same FIN, so the server then probes it (an HTTP/1.1 `100 Continue` interim
// response, or an SSE comment once a stream began; a client must accept either): a closed
// socket answers that with a reset, and a reset or a failed write cancels the request as
// client_disconnect. An HTTP/1.0 request before its answer began cannot be probed; a client
// that closed is then found at the first write.
//
// Ownership: owns the I/O threads, sockets and metrics; borrows the ServingApi, which must
// outlive the server (its sinks become no-ops once Stop() returns). Thread-safety: Start and
// Stop from one controlling thread; port(), Ledger(), metrics() and PrepPoolStats() from any
// thread.
// Failure: Start returns a Status naming the address and port (bind/listen errors).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "api/serving_api.h"
#include "api/openai.h"
#include "api/outcomes.h"
#include "api/prep_pool.h"
#include "api/request_log.h"
#include "api/server_metrics.h"

namespace lifeline::api {

struct ServerLimits {
  size_t max_header_bytes = 16 * 1024;         // request line + headers; above -> 431
  size_t max_header_fields = 100;              // header lines (Apache's default); above -> 431
  size_t max_body_bytes = 1024 * 1024;         // above -> 413 (a chunked body's framing counts)
  // One chunk-size line (size digits, extensions, CRLF) or trailer field line -> 400. A size
  // line needs at most 18 bytes; 4 KiB leaves room for any extension a client has a use for
  // (Node allows 16 KiB of extensions per message, and the OpenAI SDKs and curl send none).
  size_t max_framing_line_bytes = 4 * 1024;
  size_t max_trailer_bytes = 8 * 1024;         // a chunked body's trailer section -> 400
  // With API keys: the most body bytes read from a request without a valid key (a public
  // route's body above it -> 413), and the most discarded after a 401 before closing.
  size_t max_unauthenticated_body_bytes = 64 * 1024;
  int max_connections = 512;                   // above -> 503 + close
  std::chrono::milliseconds header_read_timeout{10'000};  // first byte .. end of headers -> 408
  std::chrono::milliseconds body_read_timeout{30'000};    // end of headers .. end of body -> 408
  std::chrono::milliseconds idle_timeout{60'000};         // keep-alive wait for a request
  std::chrono::milliseconds write_timeout{10'000};        // one write without completion
  size_t max_stream_buffer_bytes = 1024 * 1024;  // queued, unwritten bytes of one stream
  std::chrono::milliseconds heartbeat_interval{5'000};    // SSE comment after this silence
  std::chrono::milliseconds drain_timeout{10'000};        // Stop(): wait for in-flight requests
  // After an answer that closes the connection, unread input is discarded for this long (at
  // most 4 MiB; max_unauthenticated_body_bytes for a client without a valid key) before the
  // close, so that the close does not reset the connection before the client read the answer.
  std::chrono::milliseconds linger_timeout{500};
  // Requests waiting for a prep thread (parse, template, tokens, grammar: ServerOptions::
  // prep_threads) beyond the ones running; above -> 503 prep_queue_full + Retry-After. Each
  // connection has at most one request there, so this only bounds a burst of connections.
  size_t max_prep_queued = 256;
  int retry_after_s = 1;                       // Retry-After on 503s the server makes itself
  int socket_send_buffer_bytes = 0;            // SO_SNDBUF per connection; 0 = OS default
};

struct ServerOptions {
  std::string bind_address = "127.0.0.1";  // loopback by default
  uint16_t port = 8080;                    // 0 = pick a free port (see HttpServer::port())
  int io_threads = 1;
  // Threads that run the work whose cost grows with the request (a generation request's
  // parse and ServingApi::Submit, /tokenize, /detokenize, /apply-template), so the I/O threads
  // never do and /health answers meanwhile.
  int prep_threads = 2;
  std::vector<std::string> api_keys;       // empty = no auth; any one of them is accepted
  std::vector<std::string> cors_allowed_origins;  // empty = CORS off
  // The chat field that carries a thinking model's thinking: "reasoning_content" (llama.cpp,
  // DeepSeek) or "reasoning" (vLLM's name).
  std::string reasoning_field = "reasoning_content";
  // One JSON line per finished generation request (request_log.h); null = off. Shared with
  // `serve`, which reopens it on SIGHUP.
  std::shared_ptr<RequestLog> request_log;
  // The live latency economics (outcomes.h): every finished request, POST /v1/outcomes and
  // GET /v1/economics; null = those routes answer 404 economics_off.
  std::shared_ptr<EconomicsApi> economics;
  ServerLimits limits;
  RequestLimits request_limits;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, ServingApi* engine);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads.
  Status Start();
  // The bound port (the real one when options.port was 0); 0 before Start.
  uint16_t port() const;
  // Graceful: stops accepting, answers new generation requests and /ready with 503, waits up
  // to drain_timeout for in-flight requests, then ends the rest with a terminal error
  // (counted as cancelled{shutdown}), closes every connection and joins the threads (a
  // request still waiting for a prep thread is answered 503 shutting_down; one whose Submit
  // is running finishes it, and if accepted is counted cancelled{shutdown} and cancelled).
  // Idempotent.
  void Stop();

  LedgerSnapshot Ledger() const;
  const ServerMetrics& metrics() const;
  // The prep pool's threads, queue and refusals (all zero before Start).
  PrepStats PrepPoolStats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lifeline::api
