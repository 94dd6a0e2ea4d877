// The load generator's asynchronous HTTP/1.1 client (Boost.Asio + Beast, kept inside the .cpp).
// One HttpLoop drives any number of concurrent exchanges and timers on the thread that calls
// Run(); every exchange uses a fresh connection so DNS and connect times are measured per
// request, and is timed from its own start:
//
//   dns_ms      resolve finished          connect_ms  TCP connect finished (after DNS)
//   ttfb_ms     first response byte readable
//   ttft_ms     first SSE event carrying output: answer text, thinking (delta.reasoning_content,
//               or vLLM's delta.reasoning) or a tool call (non-streaming: the complete body)
//   ttfa_ms     first SSE event carrying answer: text or a tool call, i.e. the first token
//               after any thinking; equal to ttft_ms when the server does not think
//               (non-streaming: the complete body, like ttft_ms)
//   itl_ms      gap between consecutive output events (events read together have gap 0)
//   e2e_ms      last byte of the response (or the failure)
//
// Ownership: the loop owns its connections, timers and callbacks. Thread-safety: not
// thread-safe; call Send / Cancel / At from the loop thread (inside callbacks) or before Run.
// Failure: never throws; each exchange ends in exactly one done callback whose `error` is ""
// or one of the kinds listed at HttpExchange::error.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "net/sse.h"
#include "net/url.h"

namespace lifeline::loadgen {

using Clock = std::chrono::steady_clock;

// A target's base URL: net/url.h (http:// only; errors name the flag).
using Url = net::HttpUrl;

struct HttpExchange;

// What a non-streamed 2xx body must hold when it is not a completion (embeddings, rerank):
// called once with the complete body in x->body; it fills what it reads (prompt tokens, the
// model, timings) and returns "" or why the body is not the answer asked for.
using BodyCheckFn = std::function<std::string(HttpExchange* x)>;

// The most body bytes an exchange keeps by default: a completion's answer and an error's
// message fit well within it.
constexpr size_t kDefaultMaxBodyKeptBytes = size_t{1} << 20;

struct HttpRequestSpec {
  std::string method = "POST";
  Url url;
  std::string path;  // appended to url.base_path, e.g. "/v1/completions"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent with Content-Type: application/json when not empty
  double timeout_s = 60;
  // Set: a non-streamed 2xx body is read by this check instead of as a completion; a non-empty
  // answer fails the exchange as "malformed_answer". The answer's time is then that of the
  // complete body for TTFT, TTFA and e2e alike (the check's parsing is the client's time).
  BodyCheckFn check_body;
  size_t max_body_kept_bytes = kDefaultMaxBodyKeptBytes;  // x.body keeps at most this many
};

struct HttpExchange {
  Clock::time_point start;
  double dns_ms = -1;  // -1: the phase was not reached
  double connect_ms = -1;
  double ttfb_ms = -1;
  double ttft_ms = -1;
  double ttfa_ms = -1;  // -1: no answer event (a successful one then counts its e2e_ms)
  double e2e_ms = -1;
  std::vector<double> itl_ms;
  int http_status = 0;  // 0: no response head
  // "" (success), "connect" (DNS or TCP), "timeout", "cancelled", "http_status" (non-2xx),
  // "early_close" (connection ended mid-response, or a stream ended without [DONE] or a
  // finish_reason), "malformed_sse" (a data payload that is not a JSON object, or an
  // over-long line), "stream_error" (an error event inside the stream), "malformed_answer"
  // (HttpRequestSpec::check_body refused the body), "io" (other socket errors).
  std::string error;
  std::string error_detail;
  bool streamed = false;        // the response was text/event-stream
  bool saw_done = false;        // "[DONE]" arrived
  std::string served_model;     // X-Served-Model header, else the body's / chunks' `model`
  std::string server_timing;    // raw Server-Timing header
  std::string finish_reason;
  int64_t content_events = 0;   // SSE events with output (text, thinking or a tool call)
  int64_t answer_events = 0;    // of those, events with answer text or a tool call
  int64_t reasoning_events = 0; // of those, events with thinking (an event may carry both)
  int64_t prompt_tokens = -1;   // from usage, when present
  int64_t completion_tokens = -1;
  nlohmann::json timings;       // the server's `timings` object (stream or body), else null
  std::string body;             // non-streamed body (its first max_body_kept_bytes); error
                                // bodies included
  int64_t body_bytes = 0;
};

class HttpLoop {
 public:
  using Handle = uint64_t;
  using DoneFn = std::function<void(HttpExchange)>;

  HttpLoop();
  ~HttpLoop();
  HttpLoop(const HttpLoop&) = delete;
  HttpLoop& operator=(const HttpLoop&) = delete;

  // Starts an exchange now; `done` runs exactly once on the loop thread.
  Handle Send(HttpRequestSpec spec, DoneFn done);
  // Ends an exchange with error "cancelled" (its done callback runs before Cancel returns).
  // Unknown or finished handles are ignored.
  void Cancel(Handle h);
  // Runs `fn` on the loop thread at `when` (at once when it is past).
  void At(Clock::time_point when, std::function<void()> fn);
  // Processes events until no exchange and no timer is pending, or Stop().
  void Run();
  // Makes Run return as soon as the current handler finishes; pending timers are dropped when
  // the loop is destroyed (call it only when no exchange is in flight).
  void Stop();
  size_t in_flight() const;
  // Output events (text, thinking or a tool call) seen so far by an in-flight exchange; -1
  // when `h` is not in flight.
  int64_t ContentEvents(Handle h) const;
  // The same for answer events (text or a tool call: thinking excluded).
  int64_t AnswerEvents(Handle h) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How a stream's events become token times, apart from the socket so that tests can feed it
// chunks at chosen times: TTFT at the first event with output (text, thinking or a tool call),
// TTFA at the first with answer (text or a tool call), ITL between consecutive output events.
// `at_ms` is the event's time from the exchange's start (the client passes the time the
// socket read that carried it completed). Events without output change nothing here.
class StreamTokenTimes {
 public:
  void Observe(const net::StreamChunk& c, double at_ms, HttpExchange* x);

 private:
  double last_output_ms_ = -1;
};

// One exchange on a private loop, blocking until it ends.
HttpExchange FetchOnce(HttpRequestSpec spec);

// "queue;dur=1.2, prefill;dur=30.1" -> {"queue_ms": 1.2, "prefill_ms": 30.1}; entries without
// a numeric dur are skipped.
nlohmann::json ParseServerTiming(const std::string& header);

}  // namespace lifeline::loadgen
