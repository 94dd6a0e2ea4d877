#include "serving/remote_backend.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "base/excerpt.h"
#include "engine/sampler/stop.h"
#include "net/sse.h"
#include "net/url.h"

namespace lifeline::serving {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using api::ErrorKind;
using api::MakeError;

namespace {

constexpr size_t kReadChunkBytes = 16 * 1024;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxErrorBodyKept = 4 * 1024;  // of an HTTP error body, for the message

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int64_t ToUs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// At most `n` bytes of `s` for a message (base/excerpt.h), control characters as spaces.
std::string Excerpt(std::string_view s, size_t n = 120) {
  std::string out = lifeline::Excerpt(s, n);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}


// The JSON body sent upstream: the request's own fields, OpenAI names; non-standard knobs
// (top_k, min_p, repeat_penalty, ignore_eos, chat_template_kwargs, documents,
// add_generation_prompt) only when they differ from their defaults. Chat messages and tools go
// as the client sent them, key order kept: the remote server applies its own template to them.
std::string UpstreamBody(const api::GenerationRequest& r, const std::string& remote_model,
                         std::optional<int64_t> max_tokens) {
  nlohmann::ordered_json b;
  b["model"] = remote_model;
  if (r.is_chat) {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    for (const auto& m : r.messages) {
      if (m.object.is_object()) {
        msgs.push_back(m.object);
      } else {
        msgs.push_back({{"role", m.role}, {"content", m.content}});
      }
    }
    b["messages"] = std::move(msgs);
    if (!r.tools.is_null()) b["tools"] = r.tools;
    if (!r.tool_choice.is_null()) b["tool_choice"] = r.tool_choice;
    if (!r.documents.is_null()) b["documents"] = r.documents;
    if (r.chat_template_kwargs.is_object() && !r.chat_template_kwargs.empty()) {
      b["chat_template_kwargs"] = r.chat_template_kwargs;
    }
    if (!r.add_generation_prompt) b["add_generation_prompt"] = false;
    if (!r.reasoning_effort.empty()) b["reasoning_effort"] = r.reasoning_effort;
    if (r.thinking_budget_tokens) b["thinking_budget_tokens"] = *r.thinking_budget_tokens;
  } else {
    // A single prompt (checked by RemoteUnsupported), as text or token ids.
    const api::PromptInput& p = r.prompts.front();
    if (p.is_tokens) {
      b["prompt"] = p.tokens;
    } else {
      b["prompt"] = p.text;
    }
    if (r.suffix) b["suffix"] = *r.suffix;
  }
  switch (r.constraint.kind) {
    case api::OutputConstraint::Kind::kNone:
      break;
    case api::OutputConstraint::Kind::kJsonObject:
      b["response_format"] = {{"type", "json_object"}};
      break;
    case api::OutputConstraint::Kind::kJsonSchema:
      b["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "response"},
                                               {"schema", r.constraint.schema},
                                               {"strict", r.constraint.strict}}}};
      break;
    case api::OutputConstraint::Kind::kGrammar:
      b["grammar"] = r.constraint.grammar;
      break;
  }
  if (!r.logit_bias.empty()) {
    nlohmann::ordered_json bias = nlohmann::ordered_json::object();
    for (const auto& [id, v] : r.logit_bias) bias[std::to_string(id)] = v;
    b["logit_bias"] = std::move(bias);
  }
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  if (max_tokens) b["max_tokens"] = *max_tokens;
  const auto& s = r.sampling;
  b["temperature"] = s.temperature;
  b["top_p"] = s.top_p;
  if (s.top_k > 0) b["top_k"] = s.top_k;
  if (s.min_p > 0) b["min_p"] = s.min_p;
  if (s.seed) b["seed"] = *s.seed;
  if (s.presence_penalty != 0) b["presence_penalty"] = s.presence_penalty;
  if (s.frequency_penalty != 0) b["frequency_penalty"] = s.frequency_penalty;
  if (s.repeat_penalty != 1.0) b["repeat_penalty"] = s.repeat_penalty;
  if (!r.stop.empty()) b["stop"] = r.stop;
  if (r.ignore_eos) b["ignore_eos"] = true;
  return b.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// What a remote member cannot relay: its answer would come back without it (the stream parser
// reads text deltas of one choice). Names the field, or "" when the request can go upstream.
std::string RemoteUnsupported(const api::GenerationRequest& r) {
  if (r.n != 1) return "n";
  if (r.logprobs) return "logprobs";
  if (r.echo) return "echo";
  if (r.is_infill) return "input_suffix";
  if (!r.is_chat && (r.prompts.size() != 1)) return "prompt";
  if (r.is_chat && r.tools.is_array() && !r.tools.empty() &&
      !(r.tool_choice.is_string() && r.tool_choice == "none")) {
    return "tools";
  }
  return "";
}

}  // namespace

// ---- Impl ---------------------------------------------------------------------------------

struct Call;

// Why the relay ended a stream itself instead of waiting for the upstream's `data: [DONE]`:
// the upstream went past a limit of the request (its max_tokens or the ladder's cap, one of
// its stop strings, its deadline), so nothing more it sends can reach the client.
enum class RelayStop { kNone, kMaxTokens, kStop, kDeadline };

const char* RelayStopName(RelayStop s) {
  switch (s) {
    case RelayStop::kMaxTokens: return "max_tokens";
    case RelayStop::kStop: return "stop";
    case RelayStop::kDeadline: return "deadline";
    case RelayStop::kNone: break;
  }
  return "";
}

struct RemoteBackend::Impl {
  RemoteBackendOptions options;
  lifeline::net::HttpUrl url;
  slo::LatencyTracker* tracker = nullptr;

  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;

  std::mutex mu;         // stopped, started
  bool stopped = false;
  bool started = false;
  std::atomic<int64_t> in_flight{0};
  std::atomic<uint64_t> accepted{0}, completed{0}, errored{0}, cancelled{0};

  // Backend thread only.
  std::unordered_map<api::RequestHandle, std::shared_ptr<Call>> calls;

  std::string Describe() const {
    return "upstream '" + options.name + "' (" + options.url + ")";
  }
  void FailAll();
};

// One upstream request, touched only on the backend thread.
struct Call : std::enable_shared_from_this<Call> {
  Call(RemoteBackend::Impl* owner_in)
      : owner(owner_in), resolver(owner_in->io), stream(owner_in->io),
        sse(static_cast<size_t>(owner_in->options.max_sse_line_bytes)),
        connect_timer(owner_in->io), total_timer(owner_in->io) {}

  RemoteBackend::Impl* owner;
  api::RequestHandle handle = 0;
  api::GenerationSink sink;
  bool is_chat = false;
  std::string slo_class;
  bool capped = false;
  std::string cap_reason;
  Clock::time_point first_byte;  // the request's first byte (server timeline)
  Clock::time_point mark;        // validated: where the remote phase starts
  Clock::time_point deadline;
  bool deadline_is_request = false;  // the request's own deadline, not total_timeout
  // The local limits of what is relayed (the upstream is asked for the same; these hold
  // when it does not comply): the max_tokens sent upstream (the request's, or the ladder's
  // cap when lower; none when neither), and the request's stop strings (null when none).
  std::optional<int64_t> max_tokens;
  std::optional<StopMatcher> stop;

  tcp::resolver resolver;
  beast::tcp_stream stream;
  lifeline::net::SseParser sse;
  net::steady_timer connect_timer;
  net::steady_timer total_timer;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  std::optional<http::response_parser<http::buffer_body>> parser;
  std::vector<char> chunk = std::vector<char>(kReadChunkBytes);

  bool finished = false;
  bool error_status = false;  // HTTP status != 200: the body is an error message
  unsigned status = 0;
  std::string error_body;

  // SSE state: `sse` (above, constructed with the line cap).
  std::string finish_reason;
  bool has_usage = false;
  api::Usage usage;
  int64_t content_events = 0;  // non-empty text events received (and not dropped)
  json upstream_timings;

  // Timeline.
  Clock::time_point connected, head_read, last_token;
  double ttft_ms = -1;
  double ttfa_ms = -1;  // the first answer (not thinking) text
  std::vector<double> itl_ms;

  void Begin();
  void OnResolve(const beast::error_code& ec, const tcp::resolver::results_type& results);
  void OnConnect(const beast::error_code& ec);
  void OnWrite(const beast::error_code& ec);
  void OnHeader(const beast::error_code& ec);
  void ReadMore();
  void OnRead(beast::error_code ec);
  void Feed(const char* p, size_t n);
  void Dispatch(const std::string& payload);
  // Tokens the upstream has sent so far, at least: every text event carries one or more, and
  // a usage chunk in the middle of the stream may say more.
  int64_t TokensAtLeast() const;
  void Relay(const std::string& text, bool reasoning = false);
  void EndOfBody();
  void Done(RelayStop why = RelayStop::kNone);
  void Fail(const std::string& cause);
  void Finish(api::GenerationEvent event);
  std::string ReadError(const beast::error_code& ec, const char* while_doing) const;
};

void Call::Begin() {
  const auto now = Clock::now();
  if (deadline <= now) {
    return Fail(deadline_is_request ? "the request deadline passed before the upstream call"
                                    : "total timeout passed before the upstream call");
  }
  total_timer.expires_at(deadline);
  total_timer.async_wait([self = shared_from_this()](const beast::error_code& ec) {
    if (ec || self->finished) return;
    // The request's own deadline is one of its limits: what was relayed so far is its
    // answer, cut like a local request stopped at its deadline. Before any text, or at the
    // member's total_timeout, the upstream failed to answer in time.
    if (self->deadline_is_request && self->content_events > 0) {
      return self->Done(RelayStop::kDeadline);
    }
    const double ms = MsBetween(self->mark, Clock::now());
    char buf[160];
    std::snprintf(buf, sizeof buf, "timed out after %.0f ms (%s)", ms,
                  self->deadline_is_request ? "request deadline" : "total_timeout_ms");
    self->Fail(buf);
  });
  connect_timer.expires_after(owner->options.connect_timeout);
  connect_timer.async_wait([self = shared_from_this()](const beast::error_code& ec) {
    if (ec || self->finished) return;
    self->Fail("connect timed out after " +
               std::to_string(self->owner->options.connect_timeout.count()) + " ms");
  });
  resolver.async_resolve(owner->url.host, std::to_string(owner->url.port),
                         [self = shared_from_this()](const beast::error_code& ec,
                                                     const tcp::resolver::results_type& r) {
                           self->OnResolve(ec, r);
                         });
}

void Call::OnResolve(const beast::error_code& ec, const tcp::resolver::results_type& results) {
  if (finished) return;
  if (ec) return Fail("cannot resolve host '" + owner->url.host + "': " + ec.message());
  stream.async_connect(results, [self = shared_from_this()](const beast::error_code& e,
                                                            const tcp::endpoint&) {
    self->OnConnect(e);
  });
}

void Call::OnConnect(const beast::error_code& ec) {
  if (finished) return;
  connect_timer.cancel();
  if (ec) {
    return Fail("connect to " + owner->url.host + ":" + std::to_string(owner->url.port) +
                " failed: " + ec.message());
  }
  connected = Clock::now();
  beast::error_code ignored;
  stream.socket().set_option(tcp::no_delay(true), ignored);
  http::async_write(stream, req, [self = shared_from_this()](const beast::error_code& e, size_t) {
    self->OnWrite(e);
  });
}

std::string Call::ReadError(const beast::error_code& ec, const char* while_doing) const {
  if (ec == http::error::body_limit) {
    return "response exceeds max_response_bytes (" +
           std::to_string(owner->options.max_response_bytes) + ")";
  }
  if (ec == http::error::header_limit) {
    return "response head exceeds " + std::to_string(kMaxHeaderBytes) + " bytes";
  }
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == net::error::eof || ec == net::error::connection_reset) {
    return std::string("connection closed ") + while_doing + " (" + ec.message() + ")";
  }
  return std::string("error ") + while_doing + ": " + ec.message();
}

void Call::OnWrite(const beast::error_code& ec) {
  if (finished) return;
  if (ec) return Fail("sending the request failed: " + ec.message());
  parser.emplace();
  parser->header_limit(kMaxHeaderBytes);
  parser->body_limit(static_cast<uint64_t>(owner->options.max_response_bytes));
  http::async_read_header(stream, buffer, *parser,
                          [self = shared_from_this()](const beast::error_code& e, size_t) {
                            self->OnHeader(e);
                          });
}

void Call::OnHeader(const beast::error_code& ec) {
  if (finished) return;
  if (ec) return Fail(ReadError(ec, "before the response head"));
  head_read = Clock::now();
  const auto& res = parser->get();
  status = res.result_int();
  if (status != 200) {
    error_status = true;
  } else {
    const auto field = res[http::field::content_type];
    const std::string_view type(field.data(), field.size());
    if (type.find("text/event-stream") == std::string_view::npos) {
      return Fail("HTTP 200 with Content-Type '" + Excerpt(type) +
                  "', expected text/event-stream");
    }
  }
  if (parser->is_done()) return EndOfBody();
  ReadMore();
}

void Call::ReadMore() {
  auto& body = parser->get().body();
  body.data = chunk.data();
  body.size = chunk.size();
  // read_some, not read: read would wait to fill the whole chunk, holding back tokens.
  http::async_read_some(stream, buffer, *parser, [self = shared_from_this()](
                                                     beast::error_code e, size_t) {
    self->OnRead(e);
  });
}

void Call::OnRead(beast::error_code ec) {
  if (finished) return;
  if (ec == http::error::need_buffer) ec = {};
  const size_t used = chunk.size() - parser->get().body().size;
  if (error_status) {
    const size_t keep = std::min(used, kMaxErrorBodyKept - std::min(kMaxErrorBodyKept, error_body.size()));
    error_body.append(chunk.data(), keep);
  } else {
    Feed(chunk.data(), used);
    if (finished) return;
  }
  if (ec) return Fail(ReadError(ec, error_status ? "in the error body" : "before data: [DONE]"));
  if (parser->is_done()) return EndOfBody();
  ReadMore();
}

void Call::Feed(const char* p, size_t n) {
  std::vector<lifeline::net::SseEvent> events;
  const bool ok = sse.Feed(std::string_view(p, n), &events);
  for (const lifeline::net::SseEvent& e : events) {
    if (finished) return;
    Dispatch(e.data);
  }
  if (!ok && !finished) {
    Fail("an SSE line exceeds max_sse_line_bytes (" +
         std::to_string(owner->options.max_sse_line_bytes) + ")");
  }
}

void Call::Dispatch(const std::string& payload) {
  const lifeline::net::StreamChunk c = lifeline::net::ParseStreamChunk(payload);
  if (c.done) return Done();
  if (!c.malformed.empty()) return Fail("malformed SSE data: " + c.malformed);
  if (!c.error.empty()) return Fail("error event in the stream: " + c.error);
  if (!c.reasoning.empty()) {
    // The upstream's thinking: relayed as thinking (it counts toward max_tokens).
    if (max_tokens && TokensAtLeast() >= *max_tokens) return Done(RelayStop::kMaxTokens);
    ++content_events;
    Relay(c.reasoning, /*reasoning=*/true);
  }
  if (!c.text.empty()) {
    // Text beyond max_tokens: the upstream ignored the limit it was sent. The relay ends
    // here, before this text, and the connection closes (a compliant upstream ends with its
    // finish chunk and usage instead, which are still read after the last token).
    if (max_tokens && TokensAtLeast() >= *max_tokens) return Done(RelayStop::kMaxTokens);
    ++content_events;
    if (stop) {
      const StopPush push = stop->Push(c.text);
      if (!push.emit.empty()) Relay(push.emit);
      // A stop string in the text: the upstream went on past it; nothing after it is sent.
      if (push.stopped) return Done(RelayStop::kStop);
    } else {
      Relay(c.text);
    }
  }
  if (!c.finish_reason.empty()) finish_reason = c.finish_reason;
  if (c.prompt_tokens >= 0) {
    has_usage = true;
    usage.prompt_tokens = c.prompt_tokens;
    usage.completion_tokens = c.completion_tokens;
  }
  if (c.timings.is_object()) upstream_timings = c.timings;
}

int64_t Call::TokensAtLeast() const {
  return has_usage ? std::max<int64_t>(content_events, usage.completion_tokens) : content_events;
}

void Call::Relay(const std::string& text, bool reasoning) {
  const auto now = Clock::now();
  if (ttft_ms < 0) {
    ttft_ms = MsBetween(first_byte, now);
  } else {
    itl_ms.push_back(MsBetween(last_token, now));
  }
  if (!reasoning && ttfa_ms < 0) ttfa_ms = MsBetween(first_byte, now);
  last_token = now;
  if (!sink) return;
  if (reasoning) {
    api::GenerationEvent ev = api::GenerationEvent::Token("", -1);
    ev.reasoning = text;
    sink(std::move(ev));
  } else {
    sink(api::GenerationEvent::Token(text, -1));
  }
}

void Call::EndOfBody() {
  if (finished) return;
  if (error_status) {
    return Fail("HTTP " + std::to_string(status) + ": " + lifeline::net::ErrorBodyMessage(error_body));
  }
  // A last event without its blank line still counts.
  std::vector<lifeline::net::SseEvent> last;
  sse.Finish(&last);
  for (const lifeline::net::SseEvent& e : last) {
    if (finished) return;
    Dispatch(e.data);
  }
  if (finished) return;
  if (!finish_reason.empty()) return Done();  // lenient: a finish_reason but no [DONE]
  Fail("the stream ended before data: [DONE]");
}

void Call::Done(RelayStop why) {
  if (finished) return;
  // Text held back as a possible start of a stop string is answer text after all (not after
  // a matched stop: the matcher has emitted everything before it).
  if (stop && !stop->stopped()) {
    const std::string rest = stop->Finish();
    if (!rest.empty()) Relay(rest);
  }
  const auto now = Clock::now();
  api::Usage u = usage;
  if (!has_usage) {
    // No usage chunk: the count of non-empty text events is the best we know.
    u.prompt_tokens = 0;
    u.completion_tokens = content_events;
  }
  // Cut at max_tokens: the tokens the upstream reported beyond it never reached the client.
  if (why == RelayStop::kMaxTokens) {
    u.completion_tokens = std::min<int64_t>(u.completion_tokens, *max_tokens);
  }
  std::string reason = finish_reason.empty() ? "stop" : finish_reason;
  if (why == RelayStop::kMaxTokens || why == RelayStop::kDeadline) reason = "length";
  if (why == RelayStop::kStop) reason = "stop";
  json upstream = {{"backend", owner->options.name},
                   {"url", owner->options.url},
                   {"model", owner->options.remote_model},
                   {"connect_ms", MsBetween(mark, connected)},
                   {"response_head_ms", MsBetween(connected, head_read)},
                   {"usage_reported", has_usage}};
  if (!upstream_timings.is_null()) upstream["timings"] = upstream_timings;
  // The upstream was still sending when the relay ended: which limit ended it.
  if (why != RelayStop::kNone) upstream["relay_stopped"] = RelayStopName(why);
  const double decode_per_token_ms =
      ttft_ms >= 0 && content_events > 1
          ? (MsBetween(first_byte, last_token) - ttft_ms) / static_cast<double>(content_events - 1)
          : 0.0;
  json timings = {
      {"remote_ms", MsBetween(mark, now)},
      {"latency",
       {{"ttft_ms", ttft_ms}, {"ttfa_ms", ttfa_ms}, {"decode_per_token_ms", decode_per_token_ms}}},
      {"tokens", {{"prompt", u.prompt_tokens}, {"generated", u.completion_tokens}}},
      {"upstream", std::move(upstream)},
  };
  json lifeline;  // the choice's object when the deadline cut it (ChoiceAssembler)
  if (why == RelayStop::kDeadline) {
    timings["lifeline"] = {{"truncated", true}, {"reason", "deadline"}};
    lifeline = {{"truncated", true},
                {"reason", "deadline"},
                {"generated_tokens", u.completion_tokens},
                {"detail", "the remote member was still streaming at the request's deadline"}};
    if (max_tokens) lifeline["max_tokens"] = *max_tokens;
  } else if (capped && reason == "length") {
    timings["lifeline"] = {{"truncated", true}, {"reason", cap_reason}};
  }
  if (owner->tracker != nullptr) {
    slo::RequestSample s;
    const double e2e_ms = MsBetween(first_byte, now);
    s.e2e_ms = e2e_ms;
    if (ttft_ms >= 0) s.ttft_ms = ttft_ms;
    if (ttfa_ms >= 0) s.ttfa_ms = ttfa_ms;
    if (ttft_ms >= 0 && u.completion_tokens > 1) {
      s.tpot_ms = (e2e_ms - ttft_ms) / static_cast<double>(u.completion_tokens - 1);
    }
    s.itl_ms = itl_ms;
    owner->tracker->RecordRequest(slo_class.empty() ? std::string("interactive") : slo_class,
                                  owner->options.name, ToUs(now), s);
  }
  auto ev = api::GenerationEvent::Done(reason, u, std::move(timings));
  if (!lifeline.is_null()) ev.lifeline = std::move(lifeline);
  ev.timed_until = now;  // the server charges the hop to its I/O thread as handoff_ms
  owner->completed.fetch_add(1);
  Finish(std::move(ev));
}

void Call::Fail(const std::string& cause) {
  if (finished) return;
  owner->errored.fetch_add(1);
  Finish(api::GenerationEvent::Error(
      MakeError(ErrorKind::kUpstream, "upstream_error", owner->Describe() + ": " + cause)));
}

void Call::Finish(api::GenerationEvent event) {
  if (finished) return;
  finished = true;
  beast::error_code ignored;
  connect_timer.cancel();
  total_timer.cancel();
  resolver.cancel();
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.socket().close(ignored);
  owner->in_flight.fetch_sub(1);
  auto keep = shared_from_this();  // the map may hold the last reference
  owner->calls.erase(handle);
  api::GenerationSink s = std::move(sink);
  sink = nullptr;
  if (s) s(std::move(event));
}

void RemoteBackend::Impl::FailAll() {
  std::vector<std::shared_ptr<Call>> live;
  for (auto& [h, c] : calls) live.push_back(c);
  for (auto& c : live) {
    cancelled.fetch_add(1);
    c->Finish(api::GenerationEvent::Error(MakeError(
        ErrorKind::kUnavailable, "shutting_down", Describe() + ": the server is shutting down",
        {}, 1)));
  }
}

// ---- RemoteBackend ------------------------------------------------------------------------

RemoteBackend::RemoteBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<RemoteBackend>> RemoteBackend::Create(RemoteBackendOptions options) {
  const std::string field = "models[" + options.name + "].url";
  if (options.name.empty()) return InvalidArgument("remote backend: name must not be empty");
  if (options.remote_model.empty()) {
    return InvalidArgument("models[" + options.name + "].model: must not be empty");
  }
  if (options.max_in_flight < 1) {
    return InvalidArgument("models[" + options.name + "].max_in_flight: must be >= 1");
  }
  if (options.connect_timeout.count() < 1 || options.total_timeout.count() < 1) {
    return InvalidArgument("models[" + options.name + "]: timeouts must be >= 1 ms");
  }
  if (options.max_response_bytes < 1 || options.max_sse_line_bytes < 1) {
    return InvalidArgument("models[" + options.name + "]: byte limits must be >= 1");
  }
  LL_ASSIGN_OR_RETURN(lifeline::net::HttpUrl url, lifeline::net::ParseHttpUrl(options.url, field));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->url = std::move(url);
  impl->work.emplace(net::make_work_guard(impl->io));
  return std::unique_ptr<RemoteBackend>(new RemoteBackend(std::move(impl)));
}

RemoteBackend::~RemoteBackend() { Stop(); }

void RemoteBackend::AttachTracker(slo::LatencyTracker* tracker) { impl_->tracker = tracker; }

void RemoteBackend::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started || impl_->stopped) return;
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

void RemoteBackend::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  net::post(impl_->io, [impl = impl_.get()] { impl->FailAll(); });
  impl_->work.reset();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  } else {
    impl_->io.restart();
    impl_->io.run();  // never started: deliver the terminal events here
  }
}

std::optional<api::ApiError> RemoteBackend::Submit(api::RequestHandle handle,
                                                      api::GenerationRequest request,
                                                      api::GenerationSink sink,
                                                      const RemoteSubmit& ctx) {
  Impl& im = *impl_;
  if (std::string field = RemoteUnsupported(request); !field.empty()) {
    return api::InvalidRequestError(
        field, "'" + field + "' is not supported by model '" + im.options.name +
                   "', which a remote server answers (only one text choice is relayed)",
        "unsupported_value");
  }
  std::optional<int64_t> max_tokens;
  if (request.max_tokens) max_tokens = *request.max_tokens;
  bool capped = false;
  if (ctx.max_tokens_cap && (!max_tokens || *ctx.max_tokens_cap < *max_tokens)) {
    max_tokens = std::max<int64_t>(1, *ctx.max_tokens_cap);
    capped = true;
  }
  // The same stop strings the upstream is sent, matched here too (see Call::Dispatch);
  // checked like a local request's, so a bad list is a 400 here, not the upstream's answer.
  std::optional<StopMatcher> stop;
  if (!request.stop.empty()) {
    auto matcher = StopMatcher::Create(request.stop);
    if (!matcher.ok()) {
      return api::InvalidRequestError("stop", matcher.status().message());
    }
    stop = std::move(matcher).value();
  }
  auto call = std::make_shared<Call>(&im);
  call->handle = handle;
  call->sink = std::move(sink);
  call->max_tokens = max_tokens;
  call->stop = std::move(stop);
  call->is_chat = request.is_chat;
  call->slo_class = ctx.slo_class;
  call->capped = capped;
  call->cap_reason = ctx.cap_reason;
  call->first_byte = request.timeline.first_byte;
  call->mark = request.timeline.validated != Clock::time_point{} ? request.timeline.validated
                                                                  : Clock::now();
  call->deadline = call->mark + im.options.total_timeout;
  std::optional<int64_t> deadline_us = ctx.deadline_us;
  if (!deadline_us && request.deadline_ms) {
    deadline_us = ToUs(request.timeline.first_byte) + *request.deadline_ms * 1000;
  }
  if (deadline_us) {
    const Clock::time_point d{std::chrono::microseconds(*deadline_us)};
    if (d < call->deadline) {
      call->deadline = d;
      call->deadline_is_request = true;
    }
  }
  auto& req = call->req;
  req.method(http::verb::post);
  req.target(im.url.base_path + (request.is_chat ? "/chat/completions" : "/completions"));
  req.version(11);
  req.set(http::field::host, im.url.Authority());
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.set(http::field::user_agent, "lifeline");
  req.set(http::field::connection, "close");
  if (!request.request_id.empty()) req.set("X-Request-Id", request.request_id);
  req.body() = UpstreamBody(request, im.options.remote_model, max_tokens);
  req.prepare_payload();

  std::lock_guard<std::mutex> lock(im.mu);
  if (im.stopped) {
    return MakeError(ErrorKind::kUnavailable, "shutting_down",
                     im.Describe() + ": the server is shutting down", {}, 1);
  }
  if (im.in_flight.fetch_add(1) >= im.options.max_in_flight) {
    im.in_flight.fetch_sub(1);
    return MakeError(ErrorKind::kOverloaded, "overloaded",
                     im.Describe() + ": " + std::to_string(im.options.max_in_flight) +
                         " requests already in flight (max_queue_requests); retry later",
                     {}, 1);
  }
  im.accepted.fetch_add(1);
  // Posted under the mutex, so Stop's FailAll (posted after it sets `stopped`) runs later.
  net::post(im.io, [call, &im] {
    im.calls[call->handle] = call;
    call->Begin();
  });
  return std::nullopt;
}

void RemoteBackend::Cancel(api::RequestHandle handle) {
  Impl* im = impl_.get();
  std::lock_guard<std::mutex> lock(im->mu);
  if (im->stopped) return;
  net::post(im->io, [im, handle] {
    auto it = im->calls.find(handle);
    if (it == im->calls.end()) return;
    std::shared_ptr<Call> call = it->second;
    im->cancelled.fetch_add(1);
    call->Finish(api::GenerationEvent::Error(
        MakeError(ErrorKind::kCancelled, "cancelled", "the request was cancelled")));
  });
}

int64_t RemoteBackend::InFlight() const { return impl_->in_flight.load(); }

RemoteSnapshot RemoteBackend::Snapshot() const {
  RemoteSnapshot s;
  s.in_flight = impl_->in_flight.load();
  s.accepted = impl_->accepted.load();
  s.completed = impl_->completed.load();
  s.errored = impl_->errored.load();
  s.cancelled = impl_->cancelled.load();
  return s;
}

const std::string& RemoteBackend::name() const { return impl_->options.name; }
const RemoteBackendOptions& RemoteBackend::options() const { return impl_->options; }

}  // namespace lifeline::serving
