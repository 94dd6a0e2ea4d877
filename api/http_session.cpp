// One client connection: reads requests with Beast's parser under the configured limits and
// deadlines, dispatches them, and writes responses and SSE streams with explicit
// back-pressure accounting. Everything of one connection runs on its strand (the socket's
// executor), so the Session's fields need no locks; engine events arrive through a sink that
// posts onto that strand. Work whose cost grows with the request (parsing and submitting a
// generation request, /tokenize, /detokenize, /apply-template) runs on the prep pool
// (prep_pool.h); its result is posted back onto the strand, so the I/O thread stays free
// for every other connection meanwhile.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "text/toolcall/format.h"
#include "api/choice_assembler.h"
#include "api/dashboard.h"
#include "api/errors.h"
#include "api/generation_prep.h"
#include "api/http_framing.h"
#include "api/http_message.h"
#include "api/openai.h"
#include "api/outcomes.h"
#include "api/pending_submit.h"
#include "api/request_log.h"
#include "api/prep_pool.h"
#include "api/responses.h"
#include "api/api_translation.h"
#include "api/router.h"
#include "api/server_core.h"
#include "api/socket_queue.h"
#include "api/token_endpoints.h"

namespace lifeline::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr size_t kReadChunkBytes = 4096;
// The probe sent to a client that half-closed during a request (OnPeerEof).
constexpr std::string_view kInterimContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// One read of a request body. The read buffer holds at most one unfinished framing element
// (max_framing_line_bytes, max_trailer_bytes) plus this: chunk data goes straight into the
// body string, and no element grows past its cap because each byte is counted on arrival.
constexpr size_t kBodyReadBytes = 16 * 1024;
// After an error response we stop reading requests but drain what the client still sends for
// a moment (ServerLimits::linger_timeout), so closing does not reset the connection before
// the client has read the answer; at most this much, or max_unauthenticated_body_bytes from
// a client without a valid API key.
constexpr size_t kLingerMaxBytes = 4 * 1024 * 1024;

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// "<prefix><salt hex><serial hex>": unique per server, unguessable across restarts.
std::string NewRequestId(ServerCore& core, const char* prefix) {
  char buf[48];
  const uint64_t n = core.next_id.fetch_add(1);
  std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix,
                static_cast<unsigned long long>(core.id_salt), static_cast<unsigned long long>(n));
  return buf;
}

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

ApiError ShuttingDownError(int retry_after_s) {
  return UnavailableError("server is shutting down", "shutting_down", retry_after_s);
}

// Every prep thread is busy and max_prep_queued requests already wait for one.
ApiError PrepQueueFullError(const ServerLimits& limits) {
  return UnavailableError("too many requests waiting to be prepared (max_prep_queued = " +
                              std::to_string(limits.max_prep_queued) + ")",
                          "prep_queue_full", limits.retry_after_s);
}

// The API shape a generation route's body comes in.
ApiShape ShapeOf(Route route) {
  switch (route) {
    case Route::kResponses: return ApiShape::kResponses;
    case Route::kMessages: return ApiShape::kMessages;
    case Route::kEmbeddings: return ApiShape::kEmbeddings;
    case Route::kRerank: return ApiShape::kRerank;
    default: return ApiShape::kChat;
  }
}

// The prefix of a generation request's id (the X-Request-Id of its answers unless the client
// sent one): an embeddings or rerank answer has no text completion's id.
const char* ResponseIdPrefix(Endpoint endpoint, ApiShape shape) {
  if (shape == ApiShape::kEmbeddings) return "embd-";
  if (shape == ApiShape::kRerank) return "rerank-";
  return endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-";
}

// The one generation request in flight on a connection.
struct Exchange {
  uint64_t serial = 0;
  RequestHandle handle = 0;
  bool stream = false;
  bool include_usage = false;
  std::string route_label;
  CompletionContext ctx;
  std::unique_ptr<ChoiceAssembler> assembler;  // the choices' text, logprobs, tool calls
  // Terminal outcome recorded in the ledger (or, given up while pending, left to
  // PendingSubmit to record).
  bool finished = false;
  bool cancel_sent = false;
  // From posting the prep job until OnSubmitted takes its outcome: what the prep thread and
  // the session share (pending_submit.h), and the engine's events that arrive before the
  // outcome is taken (the sink posts them as soon as Submit accepts), replayed in order then.
  std::shared_ptr<PendingSubmit> pending;
  std::vector<GenerationEvent> early;
  // POST /v1/responses and /v1/messages: served as chat, answered in their API's shapes
  // (api_translation.h); /v1/embeddings and /v1/rerank: served as completions, answered as
  // vectors or rankings (embeddings_api.h, installed by OnSubmitted); null for chat and
  // completions.
  std::unique_ptr<ApiTranslation> translation;
  // For the request log (request_log.h): what the prep thread learned of the request, and
  // when its first token reached this connection (the TTFT of a request that then fails or
  // whose client leaves; a completed one reports the engine's).
  std::string requested_model;
  std::string slo_class;
  std::string user_role;
  Clock::time_point first_token_at{};
};

class Session final : public ConnectionHandle, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, tcp::socket socket)
      : core_(std::move(core)),
        limits_(core_->options.limits),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        heartbeat_timer_(socket_.get_executor()),
        id_(core_->next_id.fetch_add(1)) {
    core_->open_connections.fetch_add(1);
    core_->metrics.ConnectionOpened();
  }

  ~Session() override {
    // Only reachable with an unfinished exchange when the server stopped with handlers
    // pending; the ledger must still close.
    if (exchange_ && !exchange_->finished) FinishCancelled(CancelReason::kShutdown);
    core_->metrics.ConnectionClosed();
    core_->open_connections.fetch_sub(1);
    std::lock_guard lock(core_->registry_mu);
    core_->registry.erase(id_);
  }

  void Start() {
    {
      std::lock_guard lock(core_->registry_mu);
      core_->registry[id_] = weak_from_this();
    }
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->ReadRequest(true); });
  }

  void PostShutdown() override {
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->OnShutdown(); });
  }

  void ReleaseAfterStop() override { self_ref_.reset(); }

 private:
  // kPrep: the request's answer (or, for generation, its Submit) is being worked out on the
  // prep pool; kExchange: the engine accepted it and its events answer it.
  enum class Phase { kIdle, kHeader, kBody, kPrep, kExchange, kResponding, kLinger, kClosed };
  enum class AfterWrite { kNothing, kNextRequest, kLingerClose };

  // ---- The peer while a request runs ---------------------------------------------------

  // The client ended its side after a complete request. That is what a client does that
  // half-closes (shutdown(SHUT_WR)) and waits for its answer, and also what a client that
  // closed the whole socket looks like: both send a FIN. The request goes on and the server
  // reads no more; it asks which one it is by sending something the client must accept
  // anyway: a `100 Continue` interim response (RFC 9110 15.2: a client must parse 1xx
  // responses it did not expect), or an SSE comment once the stream began. A socket that
  // was closed answers data with a reset, which the error wait below sees and cancels on. An
  // HTTP/1.0 request before its answer began cannot be asked (no 1xx for HTTP/1.0): a client
  // that closed is then found at the first write.
  void OnPeerEof() {
    peer_eof_ = true;
    if (phase_ == Phase::kPrep || phase_ == Phase::kExchange) {
      if (head_sent_) {
        SendFrame(kSseHeartbeat);
      } else if (!http10_) {
        Send(kInterimContinue);
      }
    }
    WatchPeer();
  }

  // While a request runs: a read that notices EOF or a reset, or after EOF a wait for the
  // socket's error (a reset; reads would only repeat the EOF).
  void WatchPeer() {
    if (phase_ == Phase::kClosed) return;
    if (!peer_eof_) {
      if (!raw_reading_) StartRawRead();
      return;
    }
    if (peer_wait_armed_) return;
    peer_wait_armed_ = true;
    socket_.async_wait(tcp::socket::wait_error,
                       [self = shared_from_this()](ErrorCode ec) { self->OnPeerWait(ec); });
  }

  void OnPeerWait(ErrorCode ec) {
    peer_wait_armed_ = false;
    if (phase_ == Phase::kClosed) return;
    if (!ec && PeerReset(socket_.native_handle())) {
      if (exchange_ && !exchange_->finished) return Abort(CancelReason::kClientDisconnect);
      return CloseSocket();
    }
    // Woken without a reset (or the wait was cancelled): keep watching while a request runs;
    // a failed write still ends it otherwise.
    if (phase_ == Phase::kPrep || phase_ == Phase::kExchange) WatchPeer();
  }

  // ---- Reading requests ----------------------------------------------------------------

  void ReadRequest(bool fresh) {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kIdle;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    body_limit_bytes_ = limits_.max_body_bytes;
    body_limit_name_ = "max_body_bytes";
    meter_.reset();
    read_timed_out_ = false;
    cors_.clear();
    head_ = false;
    request_id_.clear();
    session_id_.clear();
    auth_error_.reset();
    authenticated_ = core_->options.api_keys.empty();
    if (raw_reading_) {
      // The disconnect monitor of the previous exchange is still reading. If it already
      // buffered a pipelined request, stop it and parse; otherwise it becomes the idle wait.
      if (buffer_.size() > 0) {
        cancel_raw_for_parse_ = true;
        ErrorCode ec;
        socket_.cancel(ec);
      } else {
        ArmReadDeadline(limits_.idle_timeout);
      }
      return;
    }
    if (buffer_.size() > 0) {
      timeline_ = {};
      timeline_.first_byte = Clock::now();
      ReadHeader();
      return;
    }
    // The client half-closed and every request it sent has been answered.
    if (peer_eof_) return CloseSocket();
    ArmReadDeadline(fresh ? limits_.header_read_timeout : limits_.idle_timeout);
    StartRawRead();
  }

  // A plain read_some used while idle (waiting for the first byte), during an exchange (to
  // notice a disconnect) and while lingering before close.
  void StartRawRead() {
    raw_reading_ = true;
    socket_.async_read_some(net::buffer(raw_buf_),
                            [self = shared_from_this()](ErrorCode ec, size_t n) {
                              self->OnRawRead(ec, n);
                            });
  }

  void OnRawRead(ErrorCode ec, size_t n) {
    raw_reading_ = false;
    if (phase_ == Phase::kClosed) return;
    if (phase_ == Phase::kLinger) {
      linger_bytes_ += n;
      if (ec || read_timed_out_ || linger_bytes_ >= linger_max_bytes_) return CloseSocket();
      return StartRawRead();
    }
    if (n > 0) {
      const size_t room = limits_.max_header_bytes + limits_.max_body_bytes;
      if (buffer_.size() + n <= room) {
        buffer_.commit(net::buffer_copy(buffer_.prepare(n), net::buffer(raw_buf_.data(), n)));
      }
    }
    if (phase_ == Phase::kPrep || phase_ == Phase::kExchange || phase_ == Phase::kResponding) {
      // End of stream after a complete request: the client half-closed (or closed), see
      // OnPeerEof.
      if (ec == net::error::eof) return OnPeerEof();
      if (ec) {
        // A reset while the request runs: the client is gone.
        if (phase_ != Phase::kResponding) return Abort(CancelReason::kClientDisconnect);
        return CloseSocket();
      }
      // Pipelined bytes are kept for the next request; keep watching unless the buffer is
      // already full (then a disconnect shows up on the next write instead).
      if (buffer_.size() < limits_.max_header_bytes) StartRawRead();
      return;
    }
    // phase_ == kIdle
    if (cancel_raw_for_parse_ && ec == net::error::operation_aborted) {
      cancel_raw_for_parse_ = false;
      DisarmReadDeadline();
      timeline_ = {};
      timeline_.first_byte = Clock::now();
      return ReadHeader();
    }
    if (ec || read_timed_out_) return CloseSocket();  // idle timeout or client closed
    timeline_ = {};
    timeline_.first_byte = Clock::now();
    ReadHeader();
  }

  void ReadHeader() {
    cancel_raw_for_parse_ = false;
    phase_ = Phase::kHeader;
    ArmReadDeadline(limits_.header_read_timeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](ErrorCode ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(ErrorCode ec) {
    DisarmReadDeadline();
    if (phase_ == Phase::kClosed) return;
    // Even a refusal of the header (a Content-Length over the limit is reported here as 413;
    // 431; 408) is framed for HEAD and carries the client's id when those parsed. The parser
    // holds only complete fields, so a cut-off id is never echoed.
    NoteRequestHead(parser_->get());
    if (ec) return OnReadError(ec, "header");
    timeline_.headers_read = Clock::now();
    const auto& req = parser_->get();
    if (auto err = CheckFraming(req)) return RespondAndClose(*err);
    // RFC 9112 3.2, before the body is read (closing: the body is never parsed as a request).
    size_t host_lines = 0, fields = 0;
    for (const auto& field : req) {
      host_lines += field.name() == http::field::host;
      ++fields;
    }
    if (fields > limits_.max_header_fields) {
      return RespondAndClose(MakeError(ErrorKind::kHeadersTooLarge, "headers_too_large",
                                       "request has " + std::to_string(fields) +
                                           " header fields; at most " +
                                           std::to_string(limits_.max_header_fields) +
                                           " (max_header_fields)"));
    }
    if (auto err = CheckHost(host_lines, static_cast<int>(req.version()))) {
      return RespondAndClose(*err);
    }
    NoteRequestContext(req);
    // The API key is judged from the header alone, before any body byte is read: a client
    // without one makes the server read (and hold) no body for a route it may not use. With
    // a body announced, the 401 closes the connection (the body is not read; lingering
    // discards at most max_unauthenticated_body_bytes of it); without one, the connection
    // stays usable as for any other answer (HandleRequest).
    const RouteMatch match =
        MatchRoute(View(req.method_string()), OriginFormTarget(View(req.target())));
    if (auth_error_ && match.spec && !match.spec->public_access && !parser_->is_done()) {
      keep_alive_ = false;
      return RespondUnauthorized(match.label);
    }
    // A public route (or none) is open to a client without a key, its body much less so.
    if (auth_error_ && limits_.max_unauthenticated_body_bytes < body_limit_bytes_) {
      body_limit_bytes_ = limits_.max_unauthenticated_body_bytes;
      body_limit_name_ = "max_unauthenticated_body_bytes";
      parser_->body_limit(body_limit_bytes_);
      if (const auto length = parser_->content_length(); length && *length > body_limit_bytes_) {
        return RespondAndClose(MakeError(
            ErrorKind::kPayloadTooLarge, "body_too_large",
            "request body of " + std::to_string(*length) + " bytes exceeds " + body_limit_name_ +
                " = " + std::to_string(body_limit_bytes_) + " (a request without a valid API key)"));
      }
    }
    auto expect = req.find(http::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
      Send(kInterimContinue);
    }
    if (parser_->is_done()) return HandleRequest();
    ReadBody();
  }

  // The body is read here rather than by http::async_read so that each received byte of a
  // chunked body passes the meter (http_framing.h) before the parser may hold it: Beast
  // keeps a whole chunk-size line or trailer section in the buffer, with no limit.
  void ReadBody() {
    phase_ = Phase::kBody;
    ArmReadDeadline(limits_.body_read_timeout);
    parser_->eager(true);
    if (parser_->chunked()) {
      ChunkedLimits cl;
      cl.max_body_bytes = body_limit_bytes_;
      cl.body_limit_name = body_limit_name_;
      cl.max_framing_line_bytes = limits_.max_framing_line_bytes;
      cl.max_trailer_bytes = limits_.max_trailer_bytes;
      meter_.emplace(std::move(cl));
      // What the header read already took in is the body's start.
      if (auto err = MeterReceived(buffer_.size())) return RefuseBody(*err);
    }
    ParseBody();
  }

  // Counts the last `n` bytes of buffer_, just received.
  std::optional<ApiError> MeterReceived(size_t n) {
    if (!meter_ || n == 0) return std::nullopt;
    const auto data = buffer_.data();
    const std::string_view all(static_cast<const char*>(data.data()), data.size());
    return meter_->Feed(all.substr(all.size() - n));
  }

  void RefuseBody(const ApiError& error) {
    DisarmReadDeadline();
    RespondAndClose(error);
  }

  void ParseBody() {
    while (buffer_.size() > 0) {
      ErrorCode ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return OnBody(ec);
      if (parser_->is_done()) return OnBody({});
      if (used == 0) break;
    }
    // The parser keeps at most the unfinished element: the CRLF before a size line and the
    // line, or the last chunk's line and the trailers, plus the rest of the last read. If it
    // wants more after the meter saw the whole body, or holds more than that, it reads the
    // framing differently from the meter (Beast 1.74 runs an unclosed quoted extension value
    // on across lines, waiting for a quote): refused, rather than buffered without a bound.
    const size_t max_unparsed_bytes = 2 + limits_.max_framing_line_bytes +
                                      limits_.max_trailer_bytes + kBodyReadBytes;
    if (meter_ && (meter_->done() || buffer_.size() > max_unparsed_bytes)) {
      return RefuseBody(InvalidRequestError(
          "", "malformed chunked body: the framing cannot be parsed", "bad_http_request"));
    }
    socket_.async_read_some(buffer_.prepare(kBodyReadBytes),
                            [self = shared_from_this()](ErrorCode ec, size_t n) {
                              self->OnBodyRead(ec, n);
                            });
  }

  void OnBodyRead(ErrorCode ec, size_t n) {
    if (phase_ == Phase::kClosed) return;
    buffer_.commit(n);
    if (auto err = MeterReceived(n)) return RefuseBody(*err);
    // The client closed before the body was complete.
    if (ec == net::error::eof) return OnBody(http::error::partial_message);
    if (ec) return OnBody(ec);
    ParseBody();
  }

  // RFC 9112 6.1 / 6.3 (http_framing.h): refused before a body byte is read, and the
  // connection closes (RespondAndClose) instead of parsing what follows as the next request.
  template <class Request>
  std::optional<ApiError> CheckFraming(const Request& req) const {
    std::vector<std::string_view> te;
    for (const auto& field : req) {
      if (field.name() == http::field::transfer_encoding) te.push_back(View(field.value()));
    }
    return CheckTransferEncoding(te, static_cast<int>(req.version()),
                                 req.find(http::field::content_length) != req.end());
  }

  // What the answer depends on that the header already says: keep-alive, HTTP/1.0, CORS,
  // and whether the request carries a valid API key (never judged from trailers).
  template <class Request>
  void NoteRequestContext(const Request& req) {
    keep_alive_ = req.keep_alive() && !core_->draining.load();
    http10_ = req.version() < 11;
    std::optional<std::string_view> origin;
    if (auto it = req.find(http::field::origin); it != req.end()) origin = View(it->value());
    cors_ = CorsHeaders(origin, core_->options.cors_allowed_origins);
    std::vector<std::string_view> auth;
    std::vector<std::string_view> x_api_keys;
    for (const auto& field : req) {
      if (field.name() == http::field::authorization) auth.push_back(View(field.value()));
      if (beast::iequals(field.name_string(), "x-api-key")) x_api_keys.push_back(View(field.value()));
    }
    // Anthropic's clients send the key as `x-api-key: <key>`: taken when no Authorization
    // header came (one of them, judged like a Bearer key).
    std::string from_x_api_key;
    if (auth.empty() && x_api_keys.size() == 1) {
      from_x_api_key = "Bearer " + std::string(x_api_keys.front());
      auth.push_back(from_x_api_key);
    }
    auth_error_ = CheckApiKey(core_->options.api_keys, auth);
    authenticated_ = !auth_error_.has_value();
  }

  void RespondUnauthorized(std::string_view label) {
    HttpResponse r = ErrorResponse(*auth_error_);
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    Respond(std::move(r), label);
  }

  template <class Request>
  void NoteRequestHead(const Request& req) {
    head_ = req.method() == http::verb::head;
    auto it = req.find("x-request-id");
    if (it != req.end() && ValidClientRequestId(View(it->value()))) {
      request_id_ = std::string(View(it->value()));
    }
  }

  void OnBody(ErrorCode ec) {
    DisarmReadDeadline();
    if (phase_ == Phase::kClosed) return;
    if (ec) return OnReadError(ec, "body");
    HandleRequest();
  }

  void OnReadError(ErrorCode ec, const char* what) {
    if (read_timed_out_) {
      // Some bytes of this request arrived (the idle wait closes silently instead).
      const auto limit = phase_ == Phase::kBody ? limits_.body_read_timeout
                                                : limits_.header_read_timeout;
      return RespondAndClose(MakeError(ErrorKind::kRequestTimeout, "request_timeout",
                                       std::string("request ") + what + " not received within " +
                                           std::to_string(limit.count()) + " ms"));
    }
    if (ec == http::error::header_limit) {
      return RespondAndClose(MakeError(ErrorKind::kHeadersTooLarge, "headers_too_large",
                                       "request headers exceed " +
                                           std::to_string(limits_.max_header_bytes) + " bytes"));
    }
    if (ec == http::error::body_limit) {
      return RespondAndClose(MakeError(ErrorKind::kPayloadTooLarge, "body_too_large",
                                       "request body exceeds " + body_limit_name_ + " = " +
                                           std::to_string(body_limit_bytes_)));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == http::error::partial_message || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted) {
      return CloseSocket();
    }
    RespondAndClose(InvalidRequestError("", "malformed HTTP request: " + ec.message(),
                                        "bad_http_request"));
  }

  // ---- Dispatch ------------------------------------------------------------------------

  void HandleRequest() {
    timeline_.body_read = Clock::now();
    auto req = parser_->release();
    keep_alive_ = keep_alive_ && !core_->draining.load();
    std::optional<std::string_view> origin;
    if (auto it = req.find(http::field::origin); it != req.end()) origin = View(it->value());
    const std::string method(View(req.method_string()));
    // RFC 9112 3.2.2: a server must accept the absolute form (what a client sends to a
    // proxy) and serve it as its path.
    const std::string target = OriginFormTarget(View(req.target()));
    try {
      if (method == "OPTIONS") {
        std::optional<std::string_view> requested;
        if (auto it = req.find(http::field::access_control_request_headers); it != req.end()) {
          requested = View(it->value());
        }
        if (auto pre = PreflightResponse(target, origin, core_->options.cors_allowed_origins,
                                         requested)) {
          return Respond(std::move(*pre), "preflight");
        }
      }
      RouteMatch match = MatchRoute(method, target);
      if (match.error) {
        HttpResponse r = ErrorResponse(*match.error);
        if (!match.allow.empty()) r.headers.emplace_back("Allow", match.allow);
        return Respond(std::move(r), match.label);
      }
      // The key was judged from the header (OnHeader); a request that got here without one
      // had no body to refuse unread.
      if (!match.spec->public_access && auth_error_) return RespondUnauthorized(match.label);
      ServingApi& engine = *core_->engine;
      std::optional<std::string_view> content_type;
      if (auto it = req.find(http::field::content_type); it != req.end()) {
        content_type = View(it->value());
      }
      switch (match.spec->route) {
        case Route::kHealth:
          return Respond(HealthResponse(), match.label);
        case Route::kReady: {
          const bool ready = engine.Ready();
          return Respond(ReadyResponse(ready, core_->draining.load(),
                                       ready ? std::string() : engine.NotReadyReason()),
                         match.label);
        }
        case Route::kModels:
          return Respond(ModelsResponse(engine.Models()), match.label);
        case Route::kModel:
          return Respond(ModelResponse(engine.Models(), match.id), match.label);
        // Their cost grows with the body (a 1 MiB text to tokenize, a million ids): the
        // prep pool answers them.
        case Route::kTokenize:
          return AnswerOnPrepPool(
              match.label, [&engine, limits = &core_->options.request_limits,
                            type = OwnedContentType(content_type),
                            body = std::move(req.body())] {
                return TokenizeResponse(engine, type, body, *limits);
              });
        case Route::kDetokenize:
          return AnswerOnPrepPool(
              match.label, [&engine, limits = &core_->options.request_limits,
                            type = OwnedContentType(content_type),
                            body = std::move(req.body())] {
                return DetokenizeResponse(engine, type, body, *limits);
              });
        case Route::kMetrics:
          return Respond(
              MetricsResponse(core_->metrics,
                              PrepMetricsText(core_->prep->Stats()) +
                                  (core_->options.request_log
                                       ? core_->options.request_log->MetricsText()
                                       : std::string()) +
                                  (core_->options.economics
                                       ? core_->options.economics->MetricsText()
                                       : std::string()) +
                                  engine.MetricsText()),
              match.label);
        case Route::kSlo:
          return Respond(SloResponse(engine.SloStatusJson()), match.label);
        case Route::kEconomics:
          if (!core_->options.economics) return Respond(EconomicsOffResponse(), match.label);
          return Respond(JsonResponse(200, core_->options.economics->EconomicsJson()),
                         match.label);
        case Route::kOutcomes:
          if (!core_->options.economics) return Respond(EconomicsOffResponse(), match.label);
          // Up to a thousand events to parse and join: on the prep pool.
          return AnswerOnPrepPool(
              match.label, [economics = core_->options.economics,
                            log = core_->options.request_log,
                            limits = &core_->options.request_limits,
                            type = OwnedContentType(content_type), body = std::move(req.body())] {
                return OutcomesResponse(*economics, log.get(), type, body, *limits);
              });
        case Route::kDashboardPage:
          return Respond(DashboardPageResponse(), match.label);
        case Route::kDashboardState: {
          std::optional<std::string_view> if_none_match;
          if (auto it = req.find(http::field::if_none_match); it != req.end()) {
            if_none_match = View(it->value());
          }
          const nlohmann::json state = DashboardState(
              {&engine, &core_->metrics, &core_->recent, core_->options.economics.get(),
               core_->id_salt, core_->draining.load()});
          return Respond(DashboardStateResponse(state, if_none_match), match.label);
        }
        case Route::kApplyTemplate:
          return AnswerOnPrepPool(
              match.label, [&engine, limits = &core_->options.request_limits,
                            type = OwnedContentType(content_type),
                            body = std::move(req.body())] {
                return ApplyTemplateResponse(engine, type, body, *limits);
              });
        case Route::kResponses:
        case Route::kMessages:
        case Route::kEmbeddings:
        case Route::kRerank:
        case Route::kCompletions:
        case Route::kChatCompletions:
        case Route::kInfill: {
          const Endpoint ep = match.spec->route == Route::kCompletions ? Endpoint::kCompletions
                              : match.spec->route == Route::kInfill    ? Endpoint::kInfill
                                                                       : Endpoint::kChatCompletions;
          // X-SLO-Class / X-User-Role override the body's slo_class / user_role.
          std::optional<std::string> slo_class, user_role;
          for (const auto& field : req) {
            if (beast::iequals(field.name_string(), "x-slo-class")) {
              slo_class = std::string(View(field.value()));
            } else if (beast::iequals(field.name_string(), "x-user-role")) {
              user_role = std::string(View(field.value()));
            } else if (beast::iequals(field.name_string(), "x-session-id") &&
                       ValidClientRequestId(View(field.value()))) {
              // The conversation it belongs to: a load balancer's affinity key, and the id an
              // outcome posted for the session joins (outcomes.h).
              session_id_ = std::string(View(field.value()));
            }
          }
          // /v1/responses, /v1/messages: translated onto a chat body on the prep thread
          // (GenerationInput::shape), then validated like any chat body; /v1/embeddings,
          // /v1/rerank: parsed there onto a completions-style request (embeddings_api.h).
          next_shape_ = ShapeOf(match.spec->route);
          return HandleGeneration(ep, content_type, std::move(req.body()), match.label,
                                  std::move(slo_class), std::move(user_role));
        }
      }
    } catch (const std::exception& e) {
      // Our own code does not throw on purpose; a dependency's exception (e.g. bad_alloc)
      // becomes a 500 for this request only.
      if (exchange_ && !exchange_->finished) return Abort(CancelReason::kShutdown);
      return Respond(ErrorResponse(InternalError(std::string("internal error: ") + e.what())),
                     "other");
    }
  }

  // Copies a header value the request owns, for a job that outlives the request object.
  static std::optional<std::string> OwnedContentType(std::optional<std::string_view> v) {
    if (!v) return std::nullopt;
    return std::string(*v);
  }

  // ---- Work on the prep pool -----------------------------------------------------------

  // Runs `fn(session)` on the session's strand, from a prep or engine thread, unless the
  // server has stopped (the gate closed) or the session is gone. It holds only the gate and
  // a weak reference: no executor copy, so nothing touches the io_context once Stop() has
  // closed the gate.
  template <class Fn>
  static void PostBack(const std::shared_ptr<SinkGate>& gate, const std::weak_ptr<Session>& weak,
                       Fn fn) {
    std::shared_lock lock(gate->mu);
    if (!gate->open) return;
    auto self = weak.lock();
    if (!self) return;
    auto executor = self->socket_.get_executor();
    net::post(executor,
              [self = std::move(self), fn = std::move(fn)]() mutable { fn(*self); });
  }

  // The session waits for a prep job: no reading of further requests (pipelined bytes stay
  // buffered, so answers keep their order), but a disconnect is noticed.
  void EnterPrep(std::string_view label) {
    prep_label_ = std::string(label);
    self_ref_ = shared_from_this();  // the job's answer needs us alive; dropped at the end
    phase_ = Phase::kPrep;
    WatchPeer();
  }

  // /tokenize, /detokenize, /apply-template: `work` computes the whole answer on a prep
  // thread; OnPrepAnswer sends it. A full queue is answered at once.
  void AnswerOnPrepPool(std::string_view label, std::function<HttpResponse()> work) {
    const uint64_t serial = ++prep_serial_;
    auto job = [work = std::move(work), gate = core_->gate, weak = weak_from_this(), serial,
                retry_after_s = limits_.retry_after_s](bool run) {
      HttpResponse response;
      if (!run) {
        response = ErrorResponse(ShuttingDownError(retry_after_s));
      } else if (weak.expired()) {
        return;  // the connection closed while the job was queued: nobody waits for it
      } else {
        // The pool swallows what escapes a job, and this session would then wait for ever.
        try {
          response = work();
        } catch (const std::exception& e) {
          response = ErrorResponse(InternalError(std::string("internal error: ") + e.what()));
        } catch (...) {
          response = ErrorResponse(InternalError("internal error"));
        }
      }
      PostBack(gate, weak, [serial, response = std::move(response)](Session& s) mutable {
        s.OnPrepAnswer(serial, std::move(response));
      });
    };
    if (!core_->prep->TryPost(std::move(job))) {
      return Respond(ErrorResponse(PrepQueueFullError(limits_)), label);
    }
    EnterPrep(label);
  }

  void OnPrepAnswer(uint64_t serial, HttpResponse response) {
    // An answer the session no longer waits for (it closed, or shutdown answered first).
    if (serial != prep_serial_ || phase_ != Phase::kPrep) return;
    Respond(std::move(response), prep_label_);
  }

  // A generation request: the cheap refusals here, then parse + validate + Submit on the
  // prep pool (PrepareGeneration); OnSubmitted picks the outcome up on the strand.
  void HandleGeneration(Endpoint ep, std::optional<std::string_view> content_type,
                        std::string body, std::string_view label,
                        std::optional<std::string> slo_class_header,
                        std::optional<std::string> user_role_header) {
    // Taken at once: a refusal below must not leave it set for the connection's next request.
    const ApiShape shape = std::exchange(next_shape_, ApiShape::kChat);
    ServingApi& engine = *core_->engine;
    // The body's "id"; also the X-Request-Id of every answer to this request (errors too)
    // unless the client sent its own, which then is the request_id the engine logs.
    const std::string response_id = NewRequestId(*core_, ResponseIdPrefix(ep, shape));
    if (request_id_.empty()) request_id_ = response_id;
    if (core_->draining.load()) {
      const ApiError err = ShuttingDownError(limits_.retry_after_s);
      LogRefused(label, err);
      return Respond(ErrorResponse(err), label);
    }
    // An engine that can say why it is not ready (a model whose file changed under it) knows
    // which model failed: it refuses that model's requests itself with the documented 503
    // model_failed and serves its other models. Only an unready engine that cannot say why
    // (nothing loaded yet, a stalled loop) is refused here, as not_ready.
    if (!engine.Ready() && engine.NotReadyReason().empty()) {
      const ApiError err =
          UnavailableError("engine is not ready", "not_ready", limits_.retry_after_s);
      LogRefused(label, err);
      return Respond(ErrorResponse(err), label);
    }
    if (auto err = CheckContentType(content_type)) {
      LogRefused(label, *err);
      return Respond(ErrorResponse(*err), label);
    }

    auto ex = std::make_shared<Exchange>();
    ex->translation = MakeApiTranslation(shape);
    ex->serial = ++exchange_serial_;
    ex->route_label = std::string(label);
    ex->pending = std::make_shared<PendingSubmit>(core_->metrics, engine);
    GenerationInput in;
    in.endpoint = ep;
    in.body = std::move(body);
    in.slo_class_header = std::move(slo_class_header);
    in.user_role_header = std::move(user_role_header);
    in.timeline = timeline_;
    in.request_id = request_id_;
    in.response_id = response_id;
    in.serial = ex->serial;
    in.sink = MakeSink(ex->serial);
    in.reasoning_field = core_->options.reasoning_field;
    in.shape = shape;
    // The job borrows the engine and the limits: the pool is joined (Stop) before either
    // goes. Whichever of it and the session learns of the other's side last accounts for
    // the request (PendingSubmit), so the ledger holds whether the client stays or not.
    auto job = [&engine, limits = &core_->options.request_limits, pending = ex->pending,
                gate = core_->gate, weak = weak_from_this(), serial = ex->serial,
                retry_after_s = limits_.retry_after_s, in = std::move(in)](bool run) mutable {
      PrepOutcome outcome;
      if (!run) {
        outcome.error = ShuttingDownError(retry_after_s);
      } else if (pending->GivenUp()) {
        // The client left (or shutdown answered it) while the job was queued: nobody waits
        // for this work, so none is done and nothing reaches the engine.
        outcome.error = ShuttingDownError(retry_after_s);
      } else {
        try {
          outcome = PrepareGeneration(engine, *limits, std::move(in));
        } catch (...) {
          // PrepareGeneration catches what can be thrown before Submit accepts; this only
          // keeps the session from waiting for ever.
          outcome.error = InternalError("internal error");
        }
      }
      if (!pending->Deliver(std::move(outcome))) return;  // the session gave up: accounted
      PostBack(gate, weak, [serial](Session& s) { s.OnSubmitted(serial); });
    };
    if (!core_->prep->TryPost(std::move(job))) {
      const ApiError err = PrepQueueFullError(limits_);
      LogRefused(label, err);
      return Respond(ErrorResponse(err), label);
    }
    exchange_ = std::move(ex);
    EnterPrep(label);
  }

  // On the strand: what the prep thread made of the request. Accepted: from here on it is
  // an exchange like any other, and the engine events that came first are replayed.
  void OnSubmitted(uint64_t serial) {
    if (!exchange_ || exchange_->serial != serial || !exchange_->pending) return;
    std::optional<PrepOutcome> outcome = exchange_->pending->Take();
    if (!outcome) return;  // the session gave up meanwhile; PendingSubmit accounted for it
    Exchange& ex = *exchange_;
    ex.pending.reset();
    ex.requested_model = outcome->requested_model;
    ex.slo_class = outcome->slo_class;
    ex.user_role = outcome->user_role;
    if (!outcome->accepted()) {
      const std::string label = ex.route_label;
      LogRefused(label, *outcome->error);
      exchange_.reset();  // never accepted: nothing to cancel, nothing in the ledger
      return Respond(ErrorResponse(*outcome->error), label);
    }
    core_->metrics.CountAccepted();
    ex.handle = outcome->submitted.handle;
    ex.stream = outcome->stream;
    ex.include_usage = outcome->include_usage;
    ex.ctx = outcome->assembler.ctx;
    ex.assembler = std::make_unique<ChoiceAssembler>(std::move(outcome->assembler));
    // Embeddings / rerank: the answer's translation knows the request (dimensions, top_n, ...).
    if (outcome->translation) ex.translation = std::move(outcome->translation);
    timeline_.validated = outcome->validated;
    phase_ = Phase::kExchange;
    last_send_ = Clock::now();
    WatchPeer();  // notice a disconnect while we wait
    if (ex.stream) ArmHeartbeat();
    std::vector<GenerationEvent> early = std::move(ex.early);
    ex.early.clear();
    for (GenerationEvent& event : early) OnEngineEvent(serial, std::move(event));
  }

  // The sink holds only the gate and a weak reference: no executor copy, so nothing in it
  // touches the io_context once Stop() has closed the gate.
  GenerationSink MakeSink(uint64_t serial) {
    return [gate = core_->gate, weak = weak_from_this(), serial](GenerationEvent event) {
      PostBack(gate, weak, [serial, event = std::move(event)](Session& s) mutable {
        s.OnEngineEvent(serial, std::move(event));
      });
    };
  }

  // ---- Engine events -------------------------------------------------------------------

  void OnEngineEvent(uint64_t serial, GenerationEvent event) {
    if (!exchange_ || exchange_->serial != serial || exchange_->finished) return;
    if (phase_ == Phase::kClosed) return;
    if (exchange_->pending) {
      // Submit accepted it on the prep thread, which has not told us yet (or is about to).
      exchange_->early.push_back(std::move(event));
      return;
    }
    switch (event.kind) {
      case GenerationEvent::Kind::kToken:
        return OnToken(event);
      case GenerationEvent::Kind::kChoiceDone:
        return SendChunks(exchange_->assembler->OnChoiceDone(event.index, event.finish_reason,
                                                             exchange_->stream, event.lifeline));
      case GenerationEvent::Kind::kDone:
        return OnDone(event);
      case GenerationEvent::Kind::kError:
        return OnError(event.error);
      case GenerationEvent::Kind::kRouted:
        // Before any token: the stream head (sent at the first event or heartbeat) and the
        // body name the model that serves it.
        exchange_->ctx.model = event.text;
        exchange_->assembler->SetModel(event.text);
        return;
    }
  }

  void OnToken(const GenerationEvent& event) {
    Exchange& ex = *exchange_;
    if (ex.first_token_at == Clock::time_point{}) ex.first_token_at = Clock::now();
    SendChunks(ex.assembler->OnToken(event, ex.stream));
  }

  // Streaming: each chunk as one SSE event (nothing for a non-streamed answer).
  void SendChunks(const std::vector<nlohmann::json>& chunks) {
    if (chunks.empty() || !exchange_->stream) return;
    if (PendingBytes() > limits_.max_stream_buffer_bytes) {
      return Abort(CancelReason::kSlowReader);
    }
    EnsureStreamHead();
    for (const nlohmann::json& chunk : chunks) SendChunk(chunk);
  }

  // One chat chunk as the client asked for it: itself, or its API's events.
  void SendChunk(const nlohmann::json& chunk) {
    if (!exchange_->translation) return SendFrame(SseEvent(chunk));
    SendEvents(exchange_->translation->Feed(chunk));
  }

  void SendEvents(const std::vector<ApiTranslation::Event>& events) {
    for (const auto& [name, data] : events) SendFrame(NamedSseEvent(name, data));
  }

  nlohmann::json MergedTimings(const GenerationEvent& event) const {
    const nlohmann::json& engine_timings = event.timings;
    nlohmann::json t = engine_timings.is_object() ? engine_timings : nlohmann::json::object();
    const auto now = Clock::now();
    t["http_read_ms"] = MsBetween(timeline_.first_byte, timeline_.body_read);
    t["validate_ms"] = MsBetween(timeline_.body_read, timeline_.validated);
    if (event.timed_until != Clock::time_point{}) {
      // Engine -> I/O thread hand-off: building the event, posting it, this thread waking.
      t["handoff_ms"] = MsBetween(event.timed_until, now);
    }
    t["server_total_ms"] = MsBetween(timeline_.first_byte, now);
    return t;
  }

  void OnDone(const GenerationEvent& event) {
    Exchange& ex = *exchange_;
    ex.finished = true;
    core_->metrics.CountCompleted();
    EndExchangeTimers();
    const nlohmann::json timings = MergedTimings(event);
    const RequestSplit split = SplitOfTimings(timings);
    core_->recent.Record(request_id_, ex.ctx.model, split,
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count());
    if (Recording()) {
      RequestLogEntry e = LogEntry(ex.route_label, "completed");
      e.answered_status = 200;
      e.finish_reason = event.finish_reason;
      e.timings = timings;
      e.split = split;
      if (split.ttft_ms >= 0) e.ttft_ms = split.ttft_ms;
      if (split.ttfa_ms >= 0) e.ttfa_ms = split.ttfa_ms;
      Record(e);
    }
    if (!ex.stream) {
      nlohmann::json final_body = ex.assembler->FinalBody(event, timings);
      if (ex.translation) final_body = ex.translation->Whole(final_body);
      HttpResponse r = JsonResponse(200, final_body);
      if (std::string st = ServerTimingHeader(timings); !st.empty()) {
        r.headers.emplace_back("Server-Timing", st);
      }
      r.headers.emplace_back("X-Request-Id", request_id_);
      r.headers.emplace_back("X-Served-Model", ex.ctx.model);
      // finish_reason stays OpenAI's "length"; this says the server, not max_tokens, cut it.
      if (std::string cut = ex.assembler->TruncatedReasons(); !cut.empty()) {
        r.headers.emplace_back("X-Lifeline-Truncated", cut);
      }
      if (std::string th = ThinkingHeader(timings); !th.empty()) {
        r.headers.emplace_back("X-Lifeline-Thinking", th);
      }
      return Respond(std::move(r), ex.route_label);
    }
    EnsureStreamHead();
    for (const nlohmann::json& chunk : ex.assembler->StreamEnd(event, ex.include_usage, timings)) {
      SendChunk(chunk);
    }
    if (ex.translation) {
      SendEvents(ex.translation->Finish());
    } else {
      SendFrame(kSseDone);
    }
    EndStream(/*reusable=*/true);
  }

  void OnError(const ApiError& error) {
    Exchange& ex = *exchange_;
    ex.finished = true;
    if (Recording()) {
      RequestLogEntry e = LogEntry(ex.route_label, "error");
      e.answered_status = head_sent_ ? 200 : error.http_status;  // a stream's status was sent
      e.error_code = error.code.empty() ? error.type : error.code;
      Record(e);
    }
    core_->metrics.CountErrored(error.code.empty() ? std::to_string(error.http_status)
                                                   : error.code);
    EndExchangeTimers();
    if (!head_sent_) {
      // Nothing streamed yet: a plain HTTP error, identical for stream and non-stream.
      return Respond(ErrorResponse(error), ex.route_label);
    }
    SendFrame(SseEvent(ErrorJson(error)));
    EndStream(/*reusable=*/false);
  }

  // ---- Request log ---------------------------------------------------------------------

  // What every line of this request shares; the caller adds its outcome's fields.
  RequestLogEntry LogEntry(std::string_view label, std::string_view outcome) const {
    RequestLogEntry e;
    const auto now = Clock::now();
    e.id = request_id_;
    e.session_id = session_id_;
    e.endpoint = std::string(label);
    e.outcome = std::string(outcome);
    e.e2e_ms = MsBetween(timeline_.first_byte, now);
    e.arrival_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count() -
                        static_cast<int64_t>(e.e2e_ms);
    if (exchange_) {
      const Exchange& ex = *exchange_;
      e.model = ex.requested_model;
      e.served_model = ex.ctx.model;
      e.slo_class = ex.slo_class;
      e.user_role = ex.user_role;
      e.stream = ex.stream;
      if (ex.first_token_at != Clock::time_point{}) {
        e.ttft_ms = MsBetween(timeline_.first_byte, ex.first_token_at);
      }
    }
    return e;
  }

  // Whether a finished request goes anywhere: the request log, the economics plane.
  bool Recording() const { return core_->options.request_log || core_->options.economics; }

  void Record(const RequestLogEntry& e) {
    if (core_->options.request_log) core_->options.request_log->Append(RequestLogLine(e));
    if (core_->options.economics) core_->options.economics->OnFinished(e);
  }

  // A generation request refused before the engine accepted it (shed, invalid, draining).
  void LogRefused(std::string_view label, const ApiError& error) {
    if (!Recording()) return;
    RequestLogEntry e = LogEntry(label, "refused");
    e.served_model.clear();
    e.answered_status = error.http_status;
    e.error_code = error.code.empty() ? error.type : error.code;
    Record(e);
  }

  void EnsureStreamHead() {
    if (head_sent_) return;
    head_sent_ = true;
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers = cors_;
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.headers.emplace_back("X-Accel-Buffering", "no");
    head.headers.emplace_back("X-Request-Id", request_id_);
    head.headers.emplace_back("X-Served-Model", exchange_->ctx.model);
    core_->metrics.CountResponse(exchange_->route_label, 200);
    Send(SerializeStreamHead(head, /*chunked=*/!http10_, keep_alive_));
  }

  void SendFrame(std::string_view payload) {
    if (payload.empty()) return;
    Send(http10_ ? std::string(payload) : ChunkFrame(payload));
  }

  // Ends the SSE body. A failed stream (or an HTTP/1.0 one) also ends the connection.
  void EndStream(bool reusable) {
    if (!http10_) Send(kLastChunk);
    head_sent_ = false;
    ReleaseExchange();
    phase_ = Phase::kResponding;
    after_write_ = (reusable && keep_alive_ && !http10_) ? AfterWrite::kNextRequest
                                                         : AfterWrite::kLingerClose;
    if (!writing_) OnWriteDrained();
  }

  // Cancels the in-flight request (exactly once) and ends the connection.
  void Abort(CancelReason reason) {
    if (!exchange_ || exchange_->finished) return CloseSocket();
    FinishCancelled(reason);
    EndExchangeTimers();
    if (reason == CancelReason::kShutdown && phase_ != Phase::kClosed) {
      // The client is still there: tell it why, then close.
      const ApiError err = ShuttingDownError(limits_.retry_after_s);
      if (head_sent_) {
        SendFrame(SseEvent(ErrorJson(err)));
        keep_alive_ = false;
        return EndStream(/*reusable=*/false);
      }
      keep_alive_ = false;
      return Respond(ErrorResponse(err), exchange_->route_label);
    }
    CloseSocket();
  }

  void FinishCancelled(CancelReason reason) {
    Exchange& ex = *exchange_;
    ex.finished = true;
    if (Recording()) {
      RequestLogEntry e = LogEntry(ex.route_label, "cancelled");
      e.answered_status = head_sent_ ? 200 : 0;
      e.cancel_reason = std::string(CancelReasonName(reason));
      if (reason == CancelReason::kClientDisconnect) e.disconnect_ms = e.e2e_ms;
      Record(e);
    }
    if (ex.pending) {
      // Submit has not answered yet, or its answer is unread: if the engine accepts (or
      // accepted) the request, PendingSubmit counts it accepted and cancelled and cancels it.
      ex.pending->GiveUp(reason);
      ex.pending.reset();
      ex.early.clear();
      return;
    }
    core_->metrics.CountCancelled(reason);
    if (!ex.cancel_sent) {
      ex.cancel_sent = true;
      core_->metrics.CountEngineCancel();
      core_->engine->Cancel(ex.handle);
    }
  }

  void EndExchangeTimers() {
    ++heartbeat_gen_;
    heartbeat_timer_.cancel();
  }

  // The exchange object stays until the response is written; only the self-reference that
  // kept us alive for the engine goes.
  void ReleaseExchange() { self_ref_.reset(); }

  void OnShutdown() {
    if (phase_ == Phase::kClosed) return;
    if (exchange_ && !exchange_->finished) return Abort(CancelReason::kShutdown);
    if (phase_ == Phase::kPrep) {
      // A /tokenize-like answer still on the prep pool: it is dropped when it comes.
      ++prep_serial_;
      keep_alive_ = false;
      return Respond(ErrorResponse(ShuttingDownError(limits_.retry_after_s)), prep_label_);
    }
    if (phase_ == Phase::kResponding || writing_) {
      keep_alive_ = false;
      after_write_ = AfterWrite::kLingerClose;
      return;
    }
    CloseSocket();
  }

  // ---- Heartbeat -----------------------------------------------------------------------

  void ArmHeartbeat() {
    const uint64_t gen = ++heartbeat_gen_;
    heartbeat_timer_.expires_after(limits_.heartbeat_interval);
    heartbeat_timer_.async_wait([self = shared_from_this(), gen](ErrorCode ec) {
      if (ec || gen != self->heartbeat_gen_) return;
      self->OnHeartbeat();
    });
  }

  void OnHeartbeat() {
    if (!exchange_ || exchange_->finished || phase_ != Phase::kExchange) return;
    if (Clock::now() - last_send_ >= limits_.heartbeat_interval) {
      if (PendingBytes() > limits_.max_stream_buffer_bytes) {
        return Abort(CancelReason::kSlowReader);
      }
      EnsureStreamHead();
      SendFrame(kSseHeartbeat);
    }
    ArmHeartbeat();
  }

  // ---- Responses and writing -----------------------------------------------------------

  void Respond(HttpResponse response, std::string_view label) {
    bool has_cors = false, has_id = false;
    for (const auto& h : response.headers) {
      has_cors |= h.first == "Access-Control-Allow-Origin";
      has_id |= h.first == "X-Request-Id";
    }
    if (!has_cors) response.headers.insert(response.headers.end(), cors_.begin(), cors_.end());
    // Every answer names its request, so a client can quote it (errors and small endpoints
    // included); without a client id or a generation id, a fresh one.
    if (!has_id) {
      if (request_id_.empty()) request_id_ = NewRequestId(*core_, "req-");
      response.headers.emplace_back("X-Request-Id", request_id_);
    }
    core_->metrics.CountResponse(label, response.status);
    ReleaseExchange();  // an exchange's, or a prep job's, hold on the session
    phase_ = Phase::kResponding;
    after_write_ = keep_alive_ ? AfterWrite::kNextRequest : AfterWrite::kLingerClose;
    Send(SerializeResponse(response, keep_alive_, head_));
  }

  void RespondAndClose(const ApiError& error) {
    keep_alive_ = false;
    Respond(ErrorResponse(error), "other");
  }

  // Output the client has not taken: queued here, being written, and what the kernel still
  // holds in the socket's send queue (not yet acknowledged by the peer). Counting the
  // kernel's part keeps max_stream_buffer_bytes meaningful whatever size the kernel grows the
  // send buffer to (megabytes on Linux); the part of out_inflight_ already handed to the
  // kernel is counted twice, so the cap may trigger up to one write early.
  size_t PendingBytes() {
    return out_pending_.size() + out_inflight_.size() +
           KernelQueuedBytes(socket_.native_handle());
  }

  bool PeerStoppedReading() {
    return api::PeerStoppedReading(socket_.native_handle(), !out_inflight_.empty());
  }

  void Send(std::string_view bytes) {
    if (phase_ == Phase::kClosed) return;
    out_pending_.append(bytes);
    last_send_ = Clock::now();
    if (!writing_) StartWrite();
  }

  void StartWrite() {
    if (out_pending_.empty() || phase_ == Phase::kClosed) return;
    out_inflight_.swap(out_pending_);
    out_pending_.clear();
    writing_ = true;
    const uint64_t gen = ++write_gen_;
    write_timer_.expires_after(limits_.write_timeout);
    write_timer_.async_wait([self = shared_from_this(), gen](ErrorCode ec) {
      if (ec || gen != self->write_gen_) return;
      // The client has not taken our bytes within the deadline: give up on it. A peer that
      // acknowledged everything we sent is alive with its receive window shut: it stopped
      // reading (slow_reader). Bytes left unacknowledged mean the network path or the peer
      // is gone (write_timeout).
      if (self->exchange_ && !self->exchange_->finished) {
        return self->Abort(self->PeerStoppedReading() ? CancelReason::kSlowReader
                                                      : CancelReason::kWriteTimeout);
      }
      self->CloseSocket();
    });
    net::async_write(socket_, net::buffer(out_inflight_),
                     [self = shared_from_this()](ErrorCode ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(ErrorCode ec) {
    writing_ = false;
    ++write_gen_;
    write_timer_.cancel();
    out_inflight_.clear();
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      if (exchange_ && !exchange_->finished) return Abort(CancelReason::kClientDisconnect);
      return CloseSocket();
    }
    if (!out_pending_.empty()) return StartWrite();
    OnWriteDrained();
  }

  void OnWriteDrained() {
    const AfterWrite next = after_write_;
    if (phase_ != Phase::kResponding) return;  // mid-stream or 100-continue
    after_write_ = AfterWrite::kNothing;
    if (next == AfterWrite::kNextRequest) {
      exchange_.reset();
      return ReadRequest(false);
    }
    if (next == AfterWrite::kLingerClose) LingerClose();
  }

  void LingerClose() {
    exchange_.reset();
    phase_ = Phase::kLinger;
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return CloseSocket();
    linger_bytes_ = 0;
    // A client without a valid key gets no more of the server's reading than the body it
    // could have sent to a public route.
    linger_max_bytes_ = authenticated_ ? kLingerMaxBytes
                                       : std::min(kLingerMaxBytes,
                                                  limits_.max_unauthenticated_body_bytes);
    ArmReadDeadline(limits_.linger_timeout);
    if (!raw_reading_) StartRawRead();
  }

  void CloseSocket() {
    if (phase_ == Phase::kClosed) return;
    if (exchange_ && !exchange_->finished) FinishCancelled(CancelReason::kClientDisconnect);
    phase_ = Phase::kClosed;
    ReleaseExchange();
    EndExchangeTimers();
    DisarmReadDeadline();
    ++write_gen_;
    write_timer_.cancel();
    ErrorCode ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // ---- Read deadline -------------------------------------------------------------------

  void ArmReadDeadline(std::chrono::milliseconds d) {
    const uint64_t gen = ++read_gen_;
    read_timed_out_ = false;
    read_timer_.expires_after(d);
    read_timer_.async_wait([self = shared_from_this(), gen](ErrorCode ec) {
      if (ec || gen != self->read_gen_) return;
      self->read_timed_out_ = true;
      ErrorCode ignored;
      self->socket_.cancel(ignored);
    });
  }

  void DisarmReadDeadline() {
    ++read_gen_;
    read_timer_.cancel();
  }

  std::shared_ptr<ServerCore> core_;
  const ServerLimits& limits_;
  tcp::socket socket_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  net::steady_timer heartbeat_timer_;
  const uint64_t id_;

  Phase phase_ = Phase::kIdle;
  AfterWrite after_write_ = AfterWrite::kNothing;
  beast::flat_buffer buffer_;
  std::array<char, kReadChunkBytes> raw_buf_{};
  std::optional<http::request_parser<http::string_body>> parser_;
  // This request's body cap and the limit's name for its 413 (max_body_bytes, or lower for
  // a request without a valid API key); the chunked framing meter while a chunked body is read.
  uint64_t body_limit_bytes_ = 0;
  std::string body_limit_name_;
  std::optional<ChunkedBodyMeter> meter_;
  // CheckApiKey's verdict on this request's header (nullopt: a valid key, or none needed);
  // authenticated_ false until a header with a valid key (or no keys configured) was read.
  std::optional<ApiError> auth_error_;
  bool authenticated_ = false;
  RequestTimeline timeline_;
  bool raw_reading_ = false;
  bool cancel_raw_for_parse_ = false;
  bool read_timed_out_ = false;
  uint64_t read_gen_ = 0;
  uint64_t write_gen_ = 0;
  uint64_t heartbeat_gen_ = 0;
  size_t linger_bytes_ = 0;
  bool peer_eof_ = false;        // the client ended its sending side (half-close or close)
  bool peer_wait_armed_ = false;  // an async_wait for the socket's error is pending
  size_t linger_max_bytes_ = kLingerMaxBytes;

  bool keep_alive_ = true;
  bool http10_ = false;
  bool head_ = false;        // this request is HEAD: GET's answer without the body
  std::string session_id_;   // X-Session-Id of this request ("" = none)
  std::string request_id_;   // X-Request-Id of this request's answers ("" = not chosen yet)
  std::vector<std::pair<std::string, std::string>> cors_;

  std::string out_pending_;   // queued, not yet handed to the socket
  std::string out_inflight_;  // being written
  bool writing_ = false;
  Clock::time_point last_send_{};

  std::shared_ptr<Exchange> exchange_;
  uint64_t exchange_serial_ = 0;
  // The answer a prep job (AnswerOnPrepPool) owes: its number and its route's label.
  uint64_t prep_serial_ = 0;
  std::string prep_label_;
  ApiShape next_shape_ = ApiShape::kChat;  // the API shape of the request being handled
  bool head_sent_ = false;
  std::shared_ptr<Session> self_ref_;
};

}  // namespace

void StartConnection(const std::shared_ptr<ServerCore>& core, tcp::socket socket) {
  std::make_shared<Session>(core, std::move(socket))->Start();
}

void RejectConnection(const std::shared_ptr<ServerCore>& core, tcp::socket socket) {
  core->metrics.ConnectionRejected();
  const ApiError err = UnavailableError(
      "too many open connections (max_connections = " +
          std::to_string(core->options.limits.max_connections) + ")",
      "too_many_connections", core->options.limits.retry_after_s);
  core->metrics.CountResponse("other", err.http_status);
  HttpResponse response = ErrorResponse(err);
  response.headers.emplace_back("X-Request-Id", NewRequestId(*core, "req-"));
  auto state = std::make_shared<std::pair<tcp::socket, std::string>>(
      std::move(socket), SerializeResponse(response, /*keep_alive=*/false));
  net::async_write(state->first, net::buffer(state->second), [state](ErrorCode, size_t) {
    ErrorCode ec;
    state->first.shutdown(tcp::socket::shutdown_send, ec);
    state->first.close(ec);
  });
}

}  // namespace lifeline::api
