#include "bench/loadgen/http_client.h"

#include <array>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "net/sse.h"

namespace lifeline::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace {

double MsSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}


}  // namespace

nlohmann::json ParseServerTiming(const std::string& header) {
  nlohmann::json out = nlohmann::json::object();
  size_t start = 0;
  while (start <= header.size()) {
    size_t end = header.find(',', start);
    if (end == std::string::npos) end = header.size();
    std::string entry = header.substr(start, end - start);
    start = end + 1;
    const size_t semi = entry.find(';');
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t");
      const size_t e = s.find_last_not_of(" \t");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    const std::string name = trim(entry.substr(0, semi));
    const size_t dur = entry.find("dur=");
    if (name.empty() || semi == std::string::npos || dur == std::string::npos) continue;
    char* stop = nullptr;
    const std::string value = entry.substr(dur + 4);
    const double ms = std::strtod(value.c_str(), &stop);
    if (stop == value.c_str()) continue;
    out[name + "_ms"] = ms;
  }
  return out;
}

// ---- One exchange ------------------------------------------------------------------------

struct Conn;

// Declaration order matters: connections go before the io_context they were made from.
struct LoopState {
  asio::io_context io;
  std::map<HttpLoop::Handle, std::shared_ptr<Conn>> conns;
  HttpLoop::Handle next = 1;
};

struct Conn : std::enable_shared_from_this<Conn> {
  Conn(LoopState* impl, HttpLoop::Handle id, HttpRequestSpec spec, HttpLoop::DoneFn done)
      : impl(impl), id(id), spec(std::move(spec)), done(std::move(done)), resolver(impl->io),
        socket(impl->io), deadline(impl->io) {}

  LoopState* impl;
  HttpLoop::Handle id;
  HttpRequestSpec spec;
  HttpLoop::DoneFn done;
  HttpExchange x;
  tcp::resolver resolver;
  tcp::socket socket;
  asio::steady_timer deadline;
  http::request<http::string_body> req;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::buffer_body>> parser;
  std::array<char, 16384> chunk{};
  net::SseParser sse;
  std::vector<net::SseEvent> events;
  StreamTokenTimes token_times;
  bool finished = false;
  double answer_ms = -1;  // >= 0: e2e_ms is this time, not the time Finish runs
  bool malformed = false;
  std::string stream_error;

  void Start() {
    x.start = Clock::now();
    deadline.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(spec.timeout_s)));
    deadline.async_wait([self = shared_from_this()](ErrorCode ec) {
      if (!ec) self->Finish("timeout", "no complete response within " +
                                           std::to_string(self->spec.timeout_s) + " s");
    });
    resolver.async_resolve(spec.url.host, spec.url.PortText(),
                           [self = shared_from_this()](ErrorCode ec,
                                                       tcp::resolver::results_type r) {
                             self->OnResolved(ec, std::move(r));
                           });
  }

  void OnResolved(ErrorCode ec, tcp::resolver::results_type results) {
    if (finished) return;
    x.dns_ms = MsSince(x.start, Clock::now());
    if (ec) return Finish("connect", "resolve " + spec.url.host + ": " + ec.message());
    asio::async_connect(socket, results, [self = shared_from_this()](ErrorCode ec,
                                                                     const tcp::endpoint&) {
      self->OnConnected(ec);
    });
  }

  void OnConnected(ErrorCode ec) {
    if (finished) return;
    x.connect_ms = MsSince(x.start, Clock::now()) - x.dns_ms;
    if (ec) return Finish("connect", "connect " + spec.url.ToString() + ": " + ec.message());
    ErrorCode ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    req.method_string(spec.method);
    req.target(spec.url.base_path + spec.path);
    req.version(11);
    req.set(http::field::host, spec.url.Authority());
    req.set(http::field::user_agent, "lifeline-bench");
    req.set(http::field::connection, "close");
    for (const auto& [k, v] : spec.headers) req.set(k, v);
    if (!spec.body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = spec.body;
    }
    req.prepare_payload();
    http::async_write(socket, req, [self = shared_from_this()](ErrorCode ec, size_t) {
      self->OnWritten(ec);
    });
  }

  void OnWritten(ErrorCode ec) {
    if (finished) return;
    if (ec) return Finish("io", "write: " + ec.message());
    // Waiting for readability first gives the time of the first response byte, before Beast
    // waits for the whole head.
    socket.async_wait(tcp::socket::wait_read, [self = shared_from_this()](ErrorCode ec) {
      if (self->finished) return;
      self->x.ttfb_ms = MsSince(self->x.start, Clock::now());
      if (ec) return self->Finish("io", "wait: " + ec.message());
      self->ReadHead();
    });
  }

  void ReadHead() {
    parser.emplace();
    // Streams are unbounded; a huge limit rather than boost::none, which Boost 1.74 compares
    // wrongly against Content-Length (every length "exceeds" none).
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    http::async_read_header(socket, buffer, *parser,
                            [self = shared_from_this()](ErrorCode ec, size_t) {
                              self->OnHead(ec);
                            });
  }

  void OnHead(ErrorCode ec) {
    if (finished) return;
    if (ec) return OnReadError(ec);
    const auto& res = parser->get();
    x.http_status = static_cast<int>(res.result_int());
    if (auto it = res.find("X-Served-Model"); it != res.end()) {
      x.served_model = std::string(it->value());
    }
    if (auto it = res.find("Server-Timing"); it != res.end()) {
      x.server_timing = std::string(it->value());
    }
    if (auto it = res.find(http::field::content_type); it != res.end()) {
      const auto v = it->value();
      x.streamed = std::string_view(v.data(), v.size()).starts_with("text/event-stream");
    }
    if (parser->is_done()) return OnMessageDone();
    ReadBody();
  }

  void ReadBody() {
    parser->get().body().data = chunk.data();
    parser->get().body().size = chunk.size();
    http::async_read_some(socket, buffer, *parser,
                          [self = shared_from_this()](ErrorCode ec, size_t) {
                            self->OnBody(ec);
                          });
  }

  void OnBody(ErrorCode ec) {
    if (finished) return;
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = chunk.size() - parser->get().body().size;
    if (got > 0) OnBytes(std::string_view(chunk.data(), got));
    if (finished) return;
    if (ec) return OnReadError(ec);
    if (parser->is_done()) return OnMessageDone();
    ReadBody();
  }

  void OnBytes(std::string_view bytes) {
    x.body_bytes += static_cast<int64_t>(bytes.size());
    if (!x.streamed || x.http_status < 200 || x.http_status > 299) {
      const size_t cap = spec.max_body_kept_bytes;
      const size_t room = cap - std::min(cap, x.body.size());
      x.body.append(bytes.substr(0, room));
      return;
    }
    events.clear();
    if (!sse.Feed(bytes, &events)) {
      malformed = true;
      return Finish("malformed_sse", "SSE line longer than the parser's cap");
    }
    const Clock::time_point now = Clock::now();
    for (const net::SseEvent& e : events) OnEvent(e, now);
  }

  void OnEvent(const net::SseEvent& e, Clock::time_point now) {
    const net::StreamChunk c = net::ParseStreamChunk(e.data);
    if (c.done) {
      x.saw_done = true;
      return;
    }
    if (!c.malformed.empty()) {
      if (!malformed) x.error_detail = "malformed SSE data: " + c.malformed;
      malformed = true;
      return;
    }
    if (!c.error.empty() && stream_error.empty()) stream_error = c.error;
    if (x.served_model.empty()) x.served_model = c.model;
    if (!c.finish_reason.empty()) x.finish_reason = c.finish_reason;
    if (c.prompt_tokens >= 0) x.prompt_tokens = c.prompt_tokens;
    if (c.completion_tokens >= 0) x.completion_tokens = c.completion_tokens;
    if (!c.timings.is_null()) x.timings = c.timings;
    token_times.Observe(c, MsSince(x.start, now), &x);
  }

  void OnMessageDone() {
    if (x.http_status < 200 || x.http_status > 299) {
      return Finish("http_status", "HTTP " + std::to_string(x.http_status) + ": " +
                                       x.body.substr(0, 300));
    }
    if (!x.streamed) return FinishPlainBody();
    if (!stream_error.empty()) return Finish("stream_error", stream_error);
    if (malformed) return Finish("malformed_sse", x.error_detail);
    if (!x.saw_done && x.finish_reason.empty()) {
      return Finish("early_close", "stream ended without [DONE] or a finish_reason");
    }
    Finish("", "");
  }

  // A non-streamed completion: the first token, thinking or answer, is only visible with the
  // whole body, so TTFT and TTFA are both the time of the complete body.
  void FinishPlainBody() {
    const Clock::time_point now = Clock::now();
    x.ttft_ms = MsSince(x.start, now);
    x.ttfa_ms = x.ttft_ms;
    if (spec.check_body) return FinishCheckedBody();
    const nlohmann::json j = nlohmann::json::parse(x.body, nullptr, false);
    if (j.is_object()) {
      if (x.served_model.empty() && j.contains("model") && j["model"].is_string()) {
        x.served_model = j["model"].get<std::string>();
      }
      const net::StreamChunk c = net::ParseStreamChunk(x.body);
      x.finish_reason = c.finish_reason;
      x.prompt_tokens = c.prompt_tokens;
      x.completion_tokens = c.completion_tokens;
      x.timings = c.timings;
      bool answer = !c.text.empty();
      bool thinking = false;
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const auto& ch = j["choices"][0];
        if (ch.is_object() && ch.contains("message") && ch["message"].is_object()) {
          const auto& m = ch["message"];
          auto non_empty_string = [&m](const char* key) {
            auto it = m.find(key);
            return it != m.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
          };
          answer |= non_empty_string("content");
          answer |= m.contains("tool_calls") && m["tool_calls"].is_array() &&
                    !m["tool_calls"].empty();
          thinking = non_empty_string("reasoning_content") || non_empty_string("reasoning");
        }
      }
      x.answer_events = answer ? 1 : 0;
      x.reasoning_events = thinking ? 1 : 0;
      x.content_events = answer || thinking ? 1 : 0;
    }
    if (x.timings.is_null() && !x.server_timing.empty()) {
      x.timings = ParseServerTiming(x.server_timing);
    }
    Finish("", "");
  }

  // An answer that is not a completion (embeddings, rerank), read once by the request's own
  // check. It is complete when its last byte is, so e2e = TTFT: the check's parsing runs on
  // this thread and is the client's time, not the server's.
  void FinishCheckedBody() {
    answer_ms = x.ttft_ms;
    const std::string why = spec.check_body(&x);
    if (x.timings.is_null() && !x.server_timing.empty()) {
      x.timings = ParseServerTiming(x.server_timing);
    }
    if (!why.empty()) return Finish("malformed_answer", why);
    Finish("", "");
  }

  void OnReadError(ErrorCode ec) {
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe) {
      if (parser && parser->is_done()) return OnMessageDone();
      return Finish("early_close", "connection closed mid-response: " + ec.message());
    }
    Finish("io", "read: " + ec.message());
  }

  void Finish(const std::string& error, const std::string& detail) {
    if (finished) return;
    finished = true;
    x.e2e_ms = answer_ms >= 0 ? answer_ms : MsSince(x.start, Clock::now());
    x.error = error;
    if (!detail.empty()) x.error_detail = detail;
    ErrorCode ignored;
    deadline.cancel();
    resolver.cancel();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    auto keep = shared_from_this();
    impl->conns.erase(id);
    HttpLoop::DoneFn fn = std::move(done);
    if (fn) fn(std::move(x));
  }
};

struct HttpLoop::Impl : LoopState {};

HttpLoop::HttpLoop() : impl_(std::make_unique<Impl>()) {}

HttpLoop::~HttpLoop() {
  // Pending exchanges are dropped without callbacks; the io_context destructor releases them.
  for (auto& [id, c] : impl_->conns) c->done = nullptr;
  impl_->conns.clear();
}

HttpLoop::Handle HttpLoop::Send(HttpRequestSpec spec, DoneFn done) {
  const Handle id = impl_->next++;
  auto conn = std::make_shared<Conn>(impl_.get(), id, std::move(spec), std::move(done));
  impl_->conns[id] = conn;
  conn->Start();
  return id;
}

void HttpLoop::Cancel(Handle h) {
  auto it = impl_->conns.find(h);
  if (it == impl_->conns.end()) return;
  std::shared_ptr<Conn> c = it->second;
  c->Finish("cancelled", "cancelled by the benchmark");
}

void HttpLoop::At(Clock::time_point when, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->io, when);
  timer->async_wait([timer, fn = std::move(fn)](ErrorCode ec) {
    if (!ec) fn();
  });
}

void HttpLoop::Run() {
  impl_->io.restart();
  impl_->io.run();
}

void HttpLoop::Stop() { impl_->io.stop(); }

size_t HttpLoop::in_flight() const { return impl_->conns.size(); }

int64_t HttpLoop::ContentEvents(Handle h) const {
  auto it = impl_->conns.find(h);
  return it == impl_->conns.end() ? -1 : it->second->x.content_events;
}

int64_t HttpLoop::AnswerEvents(Handle h) const {
  auto it = impl_->conns.find(h);
  return it == impl_->conns.end() ? -1 : it->second->x.answer_events;
}

void StreamTokenTimes::Observe(const net::StreamChunk& c, double at_ms, HttpExchange* x) {
  const bool answer = !c.text.empty() || c.tool_calls;
  const bool thinking = !c.reasoning.empty();
  if (!answer && !thinking) return;
  if (x->content_events == 0) {
    x->ttft_ms = at_ms;
  } else {
    x->itl_ms.push_back(at_ms - last_output_ms_);
  }
  if (answer && x->answer_events == 0) x->ttfa_ms = at_ms;
  last_output_ms_ = at_ms;
  ++x->content_events;
  if (answer) ++x->answer_events;
  if (thinking) ++x->reasoning_events;
}

HttpExchange FetchOnce(HttpRequestSpec spec) {
  HttpLoop loop;
  HttpExchange out;
  loop.Send(std::move(spec), [&out](HttpExchange x) { out = std::move(x); });
  loop.Run();
  return out;
}

}  // namespace lifeline::loadgen
