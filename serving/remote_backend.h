// RemoteBackend: a cascade member served by a remote OpenAI-compatible server (vLLM,
// llama.cpp's server, another Lifeline) instead of a local model.
//
//   HTTP thread: Submit() checks the in-flight cap, renders the upstream JSON body
//   ({"model": <remote model>, "stream": true, ...}) and posts the call to the backend's own
//   io_context thread -- it never touches the network, so it never blocks.
//   Backend thread: resolve -> connect (connect timeout) -> POST {base}/completions or
//   {base}/chat/completions -> read the SSE stream chunk by chunk (Boost.Beast) and turn
//   `data: {...}` events into the GenerationEvent sequence a local engine produces: text
//   deltas as token events, then one kDone with finish_reason, usage and timings at
//   `data: [DONE]`. Every failure (refused, HTTP 4xx/5xx with an OpenAI error body,
//   malformed SSE, a line or response over its limit, timeout) is one terminal kError
//   (502, type/code "upstream_error") whose message names the backend, its URL and the cause.
//
// Local limits: the upstream is asked for the request's max_tokens (or the ladder's lower
// cap) and stop strings, and the relay holds it to them whether it complies or not: no text
// beyond max_tokens (counted as text events, each at least one token, or the usage the
// stream reports), none from a stop string on (held back while it may be one), none after the
// request's own deadline. The request then ends with finish_reason "length" (max_tokens, the
// deadline: truncated, reason "deadline") or "stop", and the upstream connection is closed
// at once. A deadline before any text, or total_timeout, stays an upstream_error.
//
// Exactly one terminal event per accepted request, including after Cancel (499 "cancelled";
// the upstream connection is closed at once) and Stop (503 "shutting_down").
//
// Timings: the request's time from validation to the upstream's last event is one phase,
// `remote_ms` (connect, upstream queueing and compute, streaming); the server adds
// http_read_ms, validate_ms and handoff_ms, so the phases still sum to server_total_ms.
// The split inside the upstream (its own `timings`, when it sends them) is reported under
// timings.upstream, not as phases.
//
// Only http:// is supported (no TLS library among the dependencies): Create() rejects
// https:// with a message saying so. One upstream connection per request (no pooling).
//
// Ownership: owns its io_context, thread and the live calls. Thread-safety: Submit, Cancel,
// InFlight and Snapshot may be called from any thread; the calls live on the backend thread.
// Failure: Create() returns InvalidArgument for a bad URL or option; request refusals are
// api::ApiError values (429 at the in-flight cap, 503 after Stop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "api/serving_api.h"
#include "slo/latency_tracker.h"

namespace lifeline::serving {

struct RemoteBackendOptions {
  std::string name;          // the served name: requests' `model`, X-Served-Model, metrics
  std::string url;           // http://host[:port][/base], e.g. http://127.0.0.1:8000/v1
  std::string remote_model;  // the `model` sent upstream
  int32_t max_in_flight = 256;                      // accepted and unfinished; above: 429
  std::chrono::milliseconds connect_timeout{5000};  // resolve + TCP connect
  std::chrono::milliseconds total_timeout{300000};  // whole request; the deadline wins if earlier
  int64_t max_response_bytes = 64ll << 20;          // upstream response body (decoded)
  int64_t max_sse_line_bytes = 1ll << 20;           // one SSE line
};
// The URL is checked by net::ParseHttpUrl (net/url.h) when the backend is created; errors name
// "models[NAME].url".

// What the caller (ServingHub) resolved for one request.
struct RemoteSubmit {
  std::string slo_class;                  // label of the latency samples
  std::optional<int64_t> deadline_us;     // absolute, steady clock in us
  std::optional<int64_t> max_tokens_cap;  // ladder truncation: caps max_tokens sent upstream
  std::string cap_reason;
};

struct RemoteSnapshot {
  int64_t in_flight = 0;
  uint64_t accepted = 0;
  uint64_t completed = 0;
  uint64_t errored = 0;    // upstream errors and timeouts
  uint64_t cancelled = 0;  // Cancel and Stop
};

class RemoteBackend {
 public:
  static Result<std::unique_ptr<RemoteBackend>> Create(RemoteBackendOptions options);
  ~RemoteBackend();  // Stop()
  RemoteBackend(const RemoteBackend&) = delete;
  RemoteBackend& operator=(const RemoteBackend&) = delete;

  void Start();
  // Ends every live request with a terminal error ("shutting_down"), closes their upstream
  // connections and joins the thread. Later Submits are refused with 503.
  void Stop();
  // Before Start(): the tracker fed one sample set per finished request (may be null).
  void AttachTracker(slo::LatencyTracker* tracker);

  // Accepts (events follow on the backend thread) or refuses with an ApiError.
  std::optional<api::ApiError> Submit(api::RequestHandle handle,
                                         api::GenerationRequest request,
                                         api::GenerationSink sink,
                                         const RemoteSubmit& ctx = {});
  // Non-blocking, idempotent: closes the upstream connection, then the terminal event.
  void Cancel(api::RequestHandle handle);

  int64_t InFlight() const;
  RemoteSnapshot Snapshot() const;
  const std::string& name() const;
  const RemoteBackendOptions& options() const;

  struct Impl;  // remote_backend.cpp (Boost stays out of this header)

 private:
  explicit RemoteBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lifeline::serving
