// RemoteBackend against a scripted fake upstream (tests/serving/remote_fake_upstream.h):
// streamed text, finish_reason and usage pass through; the upstream request names the remote
// model and streams; every failure (HTTP 500, refused, malformed SSE, over-long line, body
// over its cap, wrong content type, timeout) is exactly one terminal 502 upstream_error whose
// message names the backend and the cause; Cancel closes the upstream connection; Stop ends
// live requests; the in-flight cap is a 429. Then ServingHub with a local heavy model and
// a remote light member: the ladder at level 3 routes to the remote, which is named as the
// served model, listed by Models(), counted in metrics, and never gates Ready().
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/serving_hub.h"
#include "serving/remote_backend.h"
#include "serving/remote_fake_upstream.h"
#include "slo/slo_config.h"
#include "common/http_test_client.h"
#include "stories_engine.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;
using lifeline::testing::FakeUpstream;
using nlohmann::json;

// Collects one request's events; counts terminal events (must end at exactly one).
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<api::GenerationEvent> events;
  int terminals = 0;

  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.terminal()) ++terminals;
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  // The terminal event (kError with code "test_timeout" if none came within 20 s).
  api::GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, 20s, [&] { return terminals > 0; })) {
      api::ApiError e;
      e.code = "test_timeout";
      return api::GenerationEvent::Error(e);
    }
    return events.back();
  }
  bool WaitTokens(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 20s, [&] { return events.size() >= n; });
  }
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& e : events) {
      if (e.kind == api::GenerationEvent::Kind::kToken) out += e.text;
    }
    return out;
  }
  int Terminals() {
    std::lock_guard<std::mutex> lock(mu);
    return terminals;
  }
};

constexpr const char* kSseHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

std::string Chunked(std::string_view payload) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  return std::string(size) + std::string(payload) + "\r\n";
}

api::GenerationRequest Completion(const std::string& prompt, int32_t max_tokens) {
  api::GenerationRequest r;
  r.model = "light";
  r.prompts = {api::PromptInput{prompt, {}, false}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

RemoteBackendOptions Options(const std::string& url) {
  RemoteBackendOptions o;
  o.name = "light";
  o.url = url;
  o.remote_model = "upstream-model";
  o.connect_timeout = 2000ms;
  o.total_timeout = 10000ms;
  return o;
}

std::unique_ptr<RemoteBackend> Make(RemoteBackendOptions o) {
  auto b = RemoteBackend::Create(std::move(o));
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return nullptr;
  (*b)->Start();
  return std::move(b).value();
}

// Submits one completion and waits for its terminal event.
api::GenerationEvent RunOne(RemoteBackend& b, Collector& c,
                               api::GenerationRequest r = Completion("Hi", 8)) {
  auto err = b.Submit(1, std::move(r), c.Sink());
  EXPECT_FALSE(err.has_value()) << (err ? err->message : "");
  if (err) return api::GenerationEvent::Error(*err);
  return c.Wait();
}

void ExpectUpstreamError(const api::GenerationEvent& ev, const std::string& cause) {
  ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kError) << ev.finish_reason;
  EXPECT_EQ(ev.error.http_status, 502);
  EXPECT_EQ(ev.error.code, "upstream_error");
  EXPECT_EQ(ev.error.type, "upstream_error");
  EXPECT_NE(ev.error.message.find("upstream 'light'"), std::string::npos) << ev.error.message;
  EXPECT_NE(ev.error.message.find(cause), std::string::npos) << ev.error.message;
}

TEST(RemoteBackendTest, AnHttpsUrlIsRefusedAtCreation) {
  RemoteBackendOptions o = Options("https://api.example.com/v1");
  auto b = RemoteBackend::Create(o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("https:// is not supported"), std::string::npos);
}

TEST(RemoteBackendTest, StreamedTextFinishReasonAndUsagePassThrough) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    // Chunked, with an event split across writes and CRLF line ends, a heartbeat comment
    // and an `event:` field the client must ignore.
    c.Send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
           "Transfer-Encoding: chunked\r\n\r\n");
    c.Send(Chunked(": keep-alive\n\n"));
    c.Send(Chunked("data: {\"choices\":[{\"index\":0,\"text\":\"Once\",\"finish_r"));
    std::this_thread::sleep_for(20ms);
    c.Send(Chunked("eason\":null}]}\r\n\r\nevent: x\ndata: {\"choices\":[{\"text\":\" upon\","
                   "\"finish_reason\":null}]}\n\n"));
    c.Send(Chunked("data: {\"choices\":[{\"text\":\" a\",\"finish_reason\":\"length\"}]}\n\n"));
    c.Send(Chunked("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,"
                   "\"total_tokens\":8}}\n\ndata: [DONE]\n\n"));
    c.Send("0\r\n\r\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  auto done = RunOne(*b, c, Completion("Tell me", 3));
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.Text(), "Once upon a");
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(done.usage.prompt_tokens, 5);
  EXPECT_EQ(done.usage.completion_tokens, 3);
  EXPECT_GT(done.timings.value("remote_ms", -1.0), 0.0) << done.timings.dump();
  EXPECT_EQ(done.timings["upstream"]["backend"], "light");
  EXPECT_EQ(done.timings["upstream"]["usage_reported"], true);
  // At max_tokens (3) a compliant upstream's finish chunk and usage are still read.
  EXPECT_FALSE(done.timings["upstream"].contains("relay_stopped")) << done.timings;
  EXPECT_NE(done.timed_until, std::chrono::steady_clock::time_point{});
  EXPECT_EQ(c.Terminals(), 1);

  // What the upstream was asked: the remote model, streaming, the request's own fields.
  ASSERT_EQ(up.Requests().size(), 1u);
  const std::string raw = up.Requests()[0];
  EXPECT_EQ(raw.rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u) << raw;
  const json body = json::parse(FakeUpstream::Body(raw));
  EXPECT_EQ(body["model"], "upstream-model");
  EXPECT_EQ(body["prompt"], "Tell me");
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["max_tokens"], 3);
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(b->Snapshot().completed, 1u);
  EXPECT_EQ(b->InFlight(), 0);
}

TEST(RemoteBackendTest, ChatDeltasAndMissingUsageFallBackToEventCount) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n");
    c.Send("data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n");
    c.Send("data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n");
    c.Send("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    c.Send("data: [DONE]\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("", 8);
  r.is_chat = true;
  r.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  auto done = RunOne(*b, c, r);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.Text(), "Hello");
  EXPECT_EQ(done.finish_reason, "stop");
  EXPECT_EQ(done.usage.completion_tokens, 2);
  EXPECT_EQ(done.timings["upstream"]["usage_reported"], false);
  const std::string raw = up.Requests().at(0);
  EXPECT_EQ(raw.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << raw;
  const json body = json::parse(FakeUpstream::Body(raw));
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][1]["content"], "Hi");
  EXPECT_FALSE(body.contains("prompt"));
}

// The remote applies its own chat template, so it gets the messages, tools and template
// kwargs as the client sent them, key order kept.
TEST(RemoteBackendTest, ChatObjectsToolsAndKwargsGoUpstreamAsSent) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n");
    c.Send("data: [DONE]\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("", 8);
  r.is_chat = true;
  r.messages = {{"assistant", "", nlohmann::ordered_json::parse(
                    R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]})")},
                {"tool", "42", nlohmann::ordered_json::parse(
                    R"({"role":"tool","tool_call_id":"c1","content":"42"})")}};
  r.tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"zeta":1,"alpha":2}}}])");
  r.tool_choice = "none";  // calls would come back as tool_calls, which are not relayed
  r.chat_template_kwargs = {{"enable_thinking", false}};
  auto done = RunOne(*b, c, r);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  const std::string body = FakeUpstream::Body(up.Requests().at(0));
  EXPECT_NE(body.find(R"("messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1")"),
            std::string::npos) << body;
  EXPECT_NE(body.find(R"({"role":"tool","tool_call_id":"c1","content":"42"})"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("parameters":{"zeta":1,"alpha":2})"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("chat_template_kwargs":{"enable_thinking":false})"), std::string::npos)
      << body;
  EXPECT_EQ(body.find("add_generation_prompt"), std::string::npos) << body;  // the default
  EXPECT_NE(body.find(R"("tool_choice":"none")"), std::string::npos) << body;
}

// What a remote member cannot relay is refused up front with the field named, never dropped.
TEST(RemoteBackendTest, FeaturesARemoteAnswerCannotCarryAreRefused) {
  auto b = Make(Options("http://127.0.0.1:9/v1"));
  ASSERT_NE(b, nullptr);
  auto refuse = [&](api::GenerationRequest r) {
    Collector c;
    auto err = b->Submit(1, std::move(r), c.Sink(), {});
    return err ? err->param : std::string("<accepted>");
  };
  api::GenerationRequest n = Completion("x", 4);
  n.n = 2;
  EXPECT_EQ(refuse(n), "n");
  api::GenerationRequest lp = Completion("x", 4);
  lp.logprobs = true;
  EXPECT_EQ(refuse(lp), "logprobs");
  api::GenerationRequest two = Completion("x", 4);
  two.prompts.push_back(two.prompts.front());
  EXPECT_EQ(refuse(two), "prompt");
  api::GenerationRequest tools = Completion("", 4);
  tools.is_chat = true;
  tools.messages = {{"user", "hi", nullptr}};
  tools.tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(refuse(tools), "tools");
}

TEST(RemoteBackendTest, Http500WithOpenAiErrorBodyIsOneUpstreamError) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    const std::string body =
        R"({"error":{"message":"CUDA out of memory","type":"server_error","code":null}})";
    c.Send("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  auto ev = RunOne(*b, c);
  ExpectUpstreamError(ev, "HTTP 500: CUDA out of memory");
  EXPECT_EQ(c.Terminals(), 1);
  EXPECT_EQ(b->Snapshot().errored, 1u);
}

TEST(RemoteBackendTest, ConnectionRefusedIsOneUpstreamError) {
  const uint16_t refused_port = lifeline::testing::FreeLoopbackPort().value();
  auto b = Make(Options("http://127.0.0.1:" + std::to_string(refused_port) + "/v1"));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "failed");
  EXPECT_EQ(c.Terminals(), 1);
}

TEST(RemoteBackendTest, MalformedSseDataIsOneUpstreamErrorAfterTheGoodTokens) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"text\":\"ok\"}]}\n\n");
    c.Send("data: {this is not json\n\n");
    c.HoldUntilClosed(5s);
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "malformed SSE data");
  EXPECT_EQ(c.Text(), "ok");
  EXPECT_EQ(c.Terminals(), 1);
}

TEST(RemoteBackendTest, ErrorEventInsideTheStreamIsAnUpstreamError) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"error\":{\"message\":\"engine died\",\"code\":\"engine_error\"}}\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "engine died");
}

TEST(RemoteBackendTest, StreamEndingBeforeDoneIsAnUpstreamError) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"text\":\"half\"}]}\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "before data: [DONE]");
}

TEST(RemoteBackendTest, NonEventStreamContentTypeIsAnUpstreamError) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "expected text/event-stream");
}

TEST(RemoteBackendTest, OverLongSseLineIsNamedByItsLimit) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: " + std::string(5000, 'x'));
    c.HoldUntilClosed(5s);
  });
  RemoteBackendOptions o = Options(up.Url());
  o.max_sse_line_bytes = 1024;
  auto b = Make(o);
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "max_sse_line_bytes (1024)");
}

TEST(RemoteBackendTest, ResponseOverMaxResponseBytesIsNamedByItsLimit) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    for (int i = 0; i < 200 && !c.Stopping(); ++i) {
      c.Send("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
    }
    c.HoldUntilClosed(5s);
  });
  RemoteBackendOptions o = Options(up.Url());
  o.max_response_bytes = 1000;
  auto b = Make(o);
  ASSERT_NE(b, nullptr);
  Collector c;
  // A max_tokens the 200 events stay under, so the byte cap is what ends the stream.
  ExpectUpstreamError(RunOne(*b, c, Completion("Hi", 1000)), "max_response_bytes (1000)");
  EXPECT_EQ(c.Terminals(), 1);
}

TEST(RemoteBackendTest, SilentUpstreamTimesOutAndTheConnectionIsClosed) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.HoldUntilClosed(10s);  // accepts, reads the request, never answers
  });
  RemoteBackendOptions o = Options(up.Url());
  o.total_timeout = 300ms;
  auto b = Make(o);
  ASSERT_NE(b, nullptr);
  Collector c;
  const auto t0 = std::chrono::steady_clock::now();
  ExpectUpstreamError(RunOne(*b, c), "timed out");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(up.WaitPeerClosed(5s));
}

TEST(RemoteBackendTest, TricklingUpstreamHitsTheTotalTimeout) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    // A byte every 20 ms: never idle, never done.
    for (int i = 0; i < 500 && !c.Stopping(); ++i) {
      c.Send(":");
      std::this_thread::sleep_for(20ms);
    }
  });
  RemoteBackendOptions o = Options(up.Url());
  o.total_timeout = 300ms;
  auto b = Make(o);
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "timed out after");
  EXPECT_EQ(c.Terminals(), 1);
}

TEST(RemoteBackendTest, GarbageInsteadOfHttpIsAnUpstreamError) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send("\x01\x02 not http at all\r\n\r\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ExpectUpstreamError(RunOne(*b, c), "before the response head");
  EXPECT_EQ(c.Terminals(), 1);
}

TEST(RemoteBackendTest, RequestDeadlineBoundsTheUpstreamCall) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.HoldUntilClosed(10s);  // head, then nothing
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("Hi", 8);
  r.deadline_ms = 200;
  ExpectUpstreamError(RunOne(*b, c, r), "(request deadline)");
}

// ---- Local limits on what a remote member sends -------------------------------------------

// One completions text event.
std::string TextEvent(const std::string& text) {
  return "data: " + json{{"choices", {{{"index", 0}, {"text", text}, {"finish_reason", nullptr}}}}}
                        .dump() + "\n\n";
}

// An upstream that ignores every limit: after `first` (events sent as they are), text event
// after text event (`word(i)`), `gap` apart, until the client closes the connection; then
// the close is counted for WaitPeerClosed.
FakeUpstream::Script Runaway(std::vector<std::string> first, std::function<std::string(int)> word,
                             std::chrono::milliseconds gap = 0ms) {
  return [first = std::move(first), word = std::move(word), gap](const FakeUpstream::Conn& c,
                                                                 const std::string&) {
    bool open = c.Send(kSseHead);
    for (const std::string& e : first) open = open && c.Send(TextEvent(e));
    for (int i = 0; open && !c.Stopping(); ++i) {
      open = c.Send(TextEvent(word(i)));
      if (gap.count() > 0) std::this_thread::sleep_for(gap);
    }
    c.HoldUntilClosed(10s);
  };
}

std::string Word(int i) { return "w" + std::to_string(i) + " "; }

// The issue's case: max_tokens 8, and the upstream streams on (529 chunks were relayed until
// the remote timeout). The relay stops after the eighth text event: "length", 8 tokens, the
// upstream connection closed.
TEST(RemoteBackendTest, AnUpstreamStreamingPastMaxTokensIsCutThereAndClosed) {
  FakeUpstream up(Runaway({}, Word));
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  auto done = RunOne(*b, c, Completion("Hi", 8));
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(c.Text(), "w0 w1 w2 w3 w4 w5 w6 w7 ");
  EXPECT_EQ(done.usage.completion_tokens, 8);
  EXPECT_EQ(done.timings["upstream"].value("relay_stopped", ""), "max_tokens") << done.timings;
  // The request's own max_tokens: a choice that ended at its own limit is not truncated.
  EXPECT_FALSE(done.timings.contains("lifeline")) << done.timings;
  EXPECT_TRUE(done.lifeline.is_null()) << done.lifeline;
  EXPECT_TRUE(up.WaitPeerClosed(5s)) << "the upstream connection stayed open";
  EXPECT_EQ(json::parse(FakeUpstream::Body(up.Requests().at(0)))["max_tokens"], 8);
  EXPECT_EQ(c.Terminals(), 1);
  EXPECT_EQ(b->InFlight(), 0);
  EXPECT_EQ(b->Snapshot().completed, 1u);
}

// The ladder's cap (lower than the request's max_tokens) bounds the relay the same way, and
// the answer says it was cut.
TEST(RemoteBackendTest, TheLaddersCapBoundsTheRelayAndSaysSo) {
  FakeUpstream up(Runaway({}, Word));
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  RemoteSubmit ctx;
  ctx.max_tokens_cap = 3;
  ctx.cap_reason = "ladder level truncate";
  ASSERT_FALSE(b->Submit(1, Completion("Hi", 100), c.Sink(), ctx).has_value());
  auto done = c.Wait();
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(c.Text(), "w0 w1 w2 ");
  EXPECT_EQ(done.timings["lifeline"].value("truncated", false), true) << done.timings;
  EXPECT_TRUE(up.WaitPeerClosed(5s));
  EXPECT_EQ(c.Terminals(), 1);
}

// A usage chunk in the middle of the stream counts: an upstream that packs several tokens
// into one event and says so is held to max_tokens by its own count.
TEST(RemoteBackendTest, UsageReportedMidStreamCountsTowardMaxTokens) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send(TextEvent("four tokens at once"));
    c.Send("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":4}}\n\n");
    while (!c.Stopping() && c.Send(TextEvent(" more"))) {
    }
    c.HoldUntilClosed(10s);
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  auto done = RunOne(*b, c, Completion("Hi", 4));
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(c.Text(), "four tokens at once");
  EXPECT_EQ(done.usage.prompt_tokens, 2);
  EXPECT_EQ(done.usage.completion_tokens, 4);
  EXPECT_TRUE(up.WaitPeerClosed(5s));
}

// The request's stop strings: text is relayed up to the stop string, split across events or
// not, and never past it; the upstream that went on is closed.
TEST(RemoteBackendTest, TextFromAStopStringOnIsNeverRelayed) {
  FakeUpstream up(Runaway({"Hello", " wor", "ld. E", "ND and more"}, Word));
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("Hi", 1000);
  r.stop = {"END", "never"};
  auto done = RunOne(*b, c, r);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "stop");
  EXPECT_EQ(c.Text(), "Hello world. ");
  EXPECT_EQ(done.timings["upstream"].value("relay_stopped", ""), "stop") << done.timings;
  EXPECT_TRUE(up.WaitPeerClosed(5s)) << "the upstream connection stayed open";
  EXPECT_EQ(json::parse(FakeUpstream::Body(up.Requests().at(0)))["stop"],
            json::array({"END", "never"}));
  EXPECT_EQ(c.Terminals(), 1);
}

// Text held back as a possible stop string is the answer's when the upstream ends by itself.
TEST(RemoteBackendTest, AHeldBackStopPrefixIsRelayedWhenTheUpstreamEnds) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send(TextEvent("The E"));
    c.Send("data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n"
           "data: [DONE]\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("Hi", 8);
  r.stop = {"END"};
  auto done = RunOne(*b, c, r);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.Text(), "The E");
  EXPECT_EQ(done.finish_reason, "stop");
  EXPECT_FALSE(done.timings["upstream"].contains("relay_stopped")) << done.timings;
}

TEST(RemoteBackendTest, AnInvalidStopListIsRefusedBeforeTheUpstreamIsCalled) {
  auto b = Make(Options("http://127.0.0.1:9/v1"));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("Hi", 8);
  r.stop = {"ok", ""};
  auto err = b->Submit(1, r, c.Sink());
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->http_status, 400);
  EXPECT_EQ(err->param, "stop");
  EXPECT_NE(err->message.find("stop[1]"), std::string::npos) << err->message;
  EXPECT_EQ(c.Terminals(), 0);
}

// The request's deadline while the upstream still streams: what was relayed is the answer,
// cut at the deadline ("length", truncated for "deadline"), and the connection is closed.
TEST(RemoteBackendTest, TheRequestDeadlineEndsAStreamingRelayWithLength) {
  FakeUpstream up(Runaway({"first "}, Word, 20ms));
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  api::GenerationRequest r = Completion("Hi", 100000);
  r.deadline_ms = 1000;
  auto done = RunOne(*b, c, r);
  if (done.kind == api::GenerationEvent::Kind::kError && c.Text().empty()) {
    GTEST_SKIP() << "no text arrived within the 1 s deadline on this machine: " << done.error.message;
  }
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(c.Text().rfind("first ", 0), 0u) << c.Text();
  EXPECT_EQ(done.lifeline.value("reason", ""), "deadline") << done.lifeline;
  EXPECT_EQ(done.lifeline.value("truncated", false), true) << done.lifeline;
  EXPECT_EQ(done.timings["lifeline"].value("reason", ""), "deadline") << done.timings;
  EXPECT_EQ(done.timings["upstream"].value("relay_stopped", ""), "deadline") << done.timings;
  EXPECT_TRUE(up.WaitPeerClosed(5s)) << "the upstream connection stayed open";
  EXPECT_EQ(c.Terminals(), 1);
  EXPECT_EQ(b->InFlight(), 0);
}

TEST(RemoteBackendTest, CancelClosesTheUpstreamConnectionAndEndsOnce) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"text\":\"first\"}]}\n\n");
    c.HoldUntilClosed(10s);
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  Collector c;
  ASSERT_FALSE(b->Submit(7, Completion("Hi", 8), c.Sink()).has_value());
  ASSERT_TRUE(c.WaitTokens(1));
  b->Cancel(7);
  b->Cancel(7);  // idempotent
  auto ev = c.Wait();
  ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kError);
  EXPECT_EQ(ev.error.code, "cancelled");
  EXPECT_TRUE(up.WaitPeerClosed(5s)) << "the upstream connection stayed open after Cancel";
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(c.Terminals(), 1);
  EXPECT_EQ(b->InFlight(), 0);
}

TEST(RemoteBackendTest, InFlightCapIs429AndStopEndsLiveRequests) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) { c.HoldUntilClosed(10s); });
  RemoteBackendOptions o = Options(up.Url());
  o.max_in_flight = 1;
  auto b = Make(o);
  ASSERT_NE(b, nullptr);
  Collector first, second;
  ASSERT_FALSE(b->Submit(1, Completion("Hi", 8), first.Sink()).has_value());
  auto refused = b->Submit(2, Completion("Hi", 8), second.Sink());
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->http_status, 429);
  EXPECT_NE(refused->message.find("in flight"), std::string::npos) << refused->message;
  ASSERT_TRUE(up.WaitRequests(1, 5s));
  b->Stop();
  auto ev = first.Wait();
  ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kError);
  EXPECT_EQ(ev.error.code, "shutting_down");
  EXPECT_EQ(first.Terminals(), 1);
  EXPECT_EQ(second.Terminals(), 0);
  auto after = b->Submit(3, Completion("Hi", 8), second.Sink());
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->http_status, 503);
}

TEST(RemoteBackendTest, ManyConcurrentRequestsEachEndExactlyOnce) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string& req) {
    // Odd prompts fail, even ones succeed: the ledger must balance either way.
    const json body = json::parse(FakeUpstream::Body(req));
    const int n = std::stoi(body["prompt"].get<std::string>());
    if (n % 2 == 1) {
      c.Send("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"text\":\"" + std::to_string(n) +
           "\",\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
  });
  auto b = Make(Options(up.Url()));
  ASSERT_NE(b, nullptr);
  constexpr int kN = 16;
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < kN; ++i) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_FALSE(b->Submit(100 + i, Completion(std::to_string(i), 4), cs.back()->Sink()));
  }
  int done = 0, errored = 0;
  for (int i = 0; i < kN; ++i) {
    auto ev = cs[i]->Wait();
    if (i % 2 == 0) {
      ASSERT_EQ(ev.kind, api::GenerationEvent::Kind::kDone) << ev.error.message;
      EXPECT_EQ(cs[i]->Text(), std::to_string(i));
      ++done;
    } else {
      ExpectUpstreamError(ev, "HTTP 503");
      ++errored;
    }
  }
  std::this_thread::sleep_for(50ms);
  for (auto& c : cs) EXPECT_EQ(c->Terminals(), 1);
  const RemoteSnapshot s = b->Snapshot();
  EXPECT_EQ(s.accepted, static_cast<uint64_t>(kN));
  EXPECT_EQ(s.completed, static_cast<uint64_t>(done));
  EXPECT_EQ(s.errored, static_cast<uint64_t>(errored));
  EXPECT_EQ(s.in_flight, 0);
}

// ---- ServingHub: a local heavy model, a remote light member ----------------------------

std::unique_ptr<ModelEngine> MakeLocalEngine(const std::string& name) {
  ModelEngineOptions o;
  o.name = name;
  o.max_running = 4;
  o.max_step_tokens = 64;
  return lifeline::testing::MakeStoriesEngine(o);
}

// A class whose TTFT target no request meets: each tick raises the ladder one level (the
// whole window decides, so ticks alone reach level 3 without new samples in between).
slo::SloConfig CascadeConfig(const std::string& url) {
  auto config = slo::ParseSloConfig(R"(
default_class = "tight"
[classes.tight]
ttft_p95_ms = 0.001
[controller]
tick_ms = 60000
min_samples = 1
[ladder]
min_dwell_ms = 60000
raise_interval_ms = 0
raise_needs_fresh_samples = false
[admission]
predictive = false
[[models]]
name = "heavy"
path = "local"
[[models]]
name = "light"
url = ")" + url + R"("
model = "upstream-model"
)", "test.toml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : slo::DefaultSloConfig();
}

TEST(RemoteCascadeTest, LevelThreeRoutesToTheRemoteMemberWhichIsNamedAsServed) {
  FakeUpstream up([](const FakeUpstream::Conn& c, const std::string&) {
    c.Send(kSseHead);
    c.Send("data: {\"choices\":[{\"text\":\"from remote\",\"finish_reason\":\"stop\"}]}\n\n"
           "data: [DONE]\n\n");
  });
  std::vector<std::unique_ptr<ModelEngine>> engines;
  engines.push_back(MakeLocalEngine("heavy"));
  ASSERT_NE(engines[0], nullptr);
  std::vector<std::unique_ptr<RemoteBackend>> remotes;
  RemoteBackendOptions o = Options(up.Url());
  auto remote = RemoteBackend::Create(o);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  remotes.push_back(std::move(remote).value());
  ServingHub service(std::move(engines), std::move(remotes), CascadeConfig(up.Url()));
  service.Start();

  // Listed, and a remote member never gates readiness.
  const auto models = service.Models();
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].id, "heavy");
  EXPECT_EQ(models[1].id, "light");
  EXPECT_TRUE(service.Ready());

  // Level 0: the heavy local model serves.
  {
    Collector c;
    api::GenerationRequest r = Completion("Once upon a time", 2);
    r.model = "heavy";
    auto s = service.Submit(r, c.Sink());
    ASSERT_TRUE(s.accepted()) << s.error->message;
    EXPECT_EQ(s.served_model, "heavy");
    ASSERT_EQ(c.Wait().kind, api::GenerationEvent::Kind::kDone);
  }
  for (int i = 0; i < 3; ++i) service.TickNow();
  ASSERT_EQ(static_cast<int>(service.controller().knobs()->LevelOf("tight")), 3);

  Collector c;
  api::GenerationRequest r = Completion("Once upon a time", 2);
  r.model = "heavy";
  auto s = service.Submit(r, c.Sink());
  ASSERT_TRUE(s.accepted()) << s.error->message;
  EXPECT_EQ(s.served_model, "light");
  auto done = c.Wait();
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.Text(), "from remote");
  // Truncation from level 1 on bounds what the remote is asked for.
  const json body = json::parse(FakeUpstream::Body(up.Requests().at(0)));
  EXPECT_EQ(body["model"], "upstream-model");
  EXPECT_LE(body["max_tokens"].get<int64_t>(), 2);

  const std::string metrics = service.MetricsText();
  EXPECT_NE(metrics.find("lifeline_slo_requests_total{class=\"tight\",model=\"light\",outcome=\"admitted\"} 1"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("lifeline_slo_requests_total{class=\"tight\",model=\"heavy\",outcome=\"routed\"} 1"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("lifeline_remote_requests_total{model=\"light\",outcome=\"completed\"} 1"),
            std::string::npos) << metrics;
  service.Stop();
}

TEST(RemoteCascadeTest, UnreachableRemoteGivesOneErrorAndLeavesTheServiceReady) {
  const uint16_t refused_port = lifeline::testing::FreeLoopbackPort().value();
  const std::string url = "http://127.0.0.1:" + std::to_string(refused_port) + "/v1";
  std::vector<std::unique_ptr<ModelEngine>> engines;
  engines.push_back(MakeLocalEngine("heavy"));
  ASSERT_NE(engines[0], nullptr);
  std::vector<std::unique_ptr<RemoteBackend>> remotes;
  auto remote = RemoteBackend::Create(Options(url));
  ASSERT_TRUE(remote.ok());
  remotes.push_back(std::move(remote).value());
  ServingHub service(std::move(engines), std::move(remotes), CascadeConfig(url));
  service.Start();
  Collector c;
  auto s = service.Submit(Completion("Hi", 4), c.Sink());  // names "light" directly
  ASSERT_TRUE(s.accepted());
  EXPECT_EQ(s.served_model, "light");
  ExpectUpstreamError(c.Wait(), "failed");
  EXPECT_TRUE(service.Ready());
  service.Cancel(s.handle);  // after the end: ignored
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(c.Terminals(), 1);
  service.Stop();
}

}  // namespace
}  // namespace lifeline::serving
