// The prep pool seen from a socket: work whose cost grows with the request (a generation
// request's parse and ServingApi::Submit, /tokenize, /detokenize, /apply-template) runs off
// the I/O thread. The fake engine's Submit is held on a latch the test releases, so "while
// Submit runs" is a state the test controls, not a duration: nothing here depends on how
// fast the machine is.
#include <string>
#include <thread>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

constexpr const char* kChat = R"({"messages":[{"role":"user","content":"x"}]})";

// Submits stay held while this lives; released however the test ends, so Stop() (which
// joins the prep threads) never waits on a held Submit.
class HeldSubmits {
 public:
  explicit HeldSubmits(FakeEngine& engine) : engine_(engine) { engine_.HoldSubmits(); }
  ~HeldSubmits() { engine_.ReleaseSubmits(); }
  void Release() { engine_.ReleaseSubmits(); }

 private:
  FakeEngine& engine_;
};

// The promise of docs/reliability.md: /health and /ready answer while a request's Submit
// (template, tokens, schema compilation) has not returned. Before the prep pool, Submit ran
// on the only I/O thread: both timed out here.
TEST_F(ServerTest, HealthAndReadyAnswerWhileASubmitIsStillRunning) {
  HeldSubmits held(engine_);
  TestClient gen(server_->port());
  ASSERT_TRUE(gen.Send(PostRequest("/v1/chat/completions", kChat)));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
  for (const char* path : {"/health", "/ready", "/v1/models"}) {
    auto reply = Roundtrip(GetRequest(path), 5s);
    ASSERT_TRUE(reply) << path << " was not answered while a Submit was running";
    EXPECT_EQ(reply->status, 200) << path << ": " << reply->body;
  }
  // Answered meanwhile, not after: the Submit has still not returned.
  EXPECT_EQ(engine_.submits_waiting(), 1);
  EXPECT_EQ(engine_.accepted(), 0);
  held.Release();
  auto reply = gen.ReadResponse(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(reply->Json()["choices"][0]["message"]["content"], "Hello, world");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().completed, 1u);
}

// Requests pipelined on one connection are answered in the order sent, the ones that go
// through the prep pool and the ones that do not.
TEST_F(ServerTest, PipelinedRequestsAroundAHeldSubmitKeepTheirOrder) {
  HeldSubmits held(engine_);
  TestClient c(server_->port());
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x"})") +
                     PostRequest("/tokenize", R"({"content":"ab"})") + GetRequest("/health") +
                     PostRequest("/v1/completions", R"({"prompt":"y","stream":true})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
  held.Release();
  auto first = c.ReadResponse(5s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(first->Json()["choices"][0]["text"], "Hello, world");
  auto tokens = c.ReadResponse(5s);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->Json()["tokens"], nlohmann::json::parse("[97, 98]")) << tokens->body;
  auto health = c.ReadResponse(5s);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body.find("choices"), std::string::npos);
  auto stream = c.ReadResponse(5s);
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->status, 200);
  auto events = SseEvents(stream->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().completed, 2u);
}

// An engine may send a request's events, to the last, before Submit has returned on the
// prep thread: the session keeps them until it has handled the acceptance, then answers
// from them in their order.
TEST_F(ServerTest, EventsSentBeforeSubmitReturnsAreReplayedInOrder) {
  FakeScript script;
  script.events_within_submit = true;
  script.routed_to = "fake-light";
  script.tokens = {"a", "b", "c", "d"};
  engine_.SetScript(script);
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    auto reply = Roundtrip(PostRequest(
        "/v1/completions", stream ? R"({"prompt":"x","stream":true})" : R"({"prompt":"x"})"));
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
    EXPECT_EQ(reply->Header("x-served-model"), "fake-light");
    if (!stream) {
      EXPECT_EQ(reply->Json()["choices"][0]["text"], "abcd");
      continue;
    }
    std::string text;
    for (const std::string& data : lifeline::testing::SseData(reply->body)) {
      if (data == "[DONE]") continue;
      auto chunk = nlohmann::json::parse(data, nullptr, false);
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      const nlohmann::json& piece = chunk["choices"][0]["text"];
      if (piece.is_string()) text += piece.get<std::string>();
    }
    EXPECT_EQ(text, "abcd");
    EXPECT_EQ(SseEvents(reply->body).back(), "[DONE]");
  }
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().completed, 2u);
}

// The client leaves while its Submit runs on a prep thread. The session gives up at once;
// when Submit then accepts, the request is counted accepted and cancelled
// (client_disconnect) and the engine is told once.
TEST_F(ServerTest, ADisconnectWhileSubmitRunsIsCancelledOnceWhenItIsAccepted) {
  int handle = 0;
  for (const bool reset : {true, false}) {
    SCOPED_TRACE(reset ? "reset" : "close");
    ++handle;
    HeldSubmits held(engine_);
    {
      TestClient c(server_->port());
      ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})")));
      ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
      if (reset) c.CloseWithReset();
    }  // close(): a FIN; the server's probe then meets a reset
    // The connection is gone (the session let go of it) while Submit is still held.
    ASSERT_TRUE(engine_.WaitFor([&] { return server_->metrics().OpenConnections() == 0; }));
    EXPECT_EQ(engine_.submits_waiting(), 1);
    EXPECT_EQ(server_->Ledger().accepted, static_cast<uint64_t>(handle - 1));
    held.Release();
    ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(handle) == 1; }));
    ASSERT_TRUE(WaitIdle());
  }
  std::this_thread::sleep_for(50ms);  // no second Cancel trails in
  EXPECT_EQ(engine_.cancels_for(1), 1);
  EXPECT_EQ(engine_.cancels_for(2), 1);
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 2u);
  EXPECT_EQ(l.cancelled_by_reason.at("client_disconnect"), 2u);
  EXPECT_EQ(l.completed, 0u);
  ExpectLedgerReconciles();
}

// A client that leaves while its request still waits for a prep thread costs no work: its
// body is never parsed and Submit never called.
TEST_F(ServerTest, AQueuedRequestWhoseClientLeftIsNeverSubmitted) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.prep_threads = 1;
  StartServer(o);
  HeldSubmits held(engine_);
  TestClient running(server_->port());
  ASSERT_TRUE(running.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
  {
    TestClient leaving(server_->port());
    ASSERT_TRUE(leaving.Send(PostRequest("/v1/completions", R"({"prompt":"y"})") +
                             PostRequest("/tokenize", R"({"content":"y"})")));
    ASSERT_TRUE(engine_.WaitFor([&] { return server_->PrepPoolStats().queued == 1; }));
    leaving.CloseWithReset();
  }
  ASSERT_TRUE(engine_.WaitFor([&] { return server_->metrics().OpenConnections() == 1; }));
  held.Release();
  auto reply = running.ReadResponse(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  ASSERT_TRUE(WaitIdle());  // the pool included: the queued job has had its turn
  EXPECT_EQ(engine_.submitted().size(), 1u);
  EXPECT_EQ(engine_.submitted()[0].prompts[0].text, "x");
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 1u);
  EXPECT_EQ(l.completed, 1u);
}

// Stop() while one request's Submit runs and another waits for the (single) prep thread:
// both clients are told shutting_down; the running Submit finishes, and being accepted is
// counted cancelled{shutdown} and cancelled; the queued one never reaches the engine.
TEST_F(ServerTest, StopWhileSubmitsRunAndWaitAnswersEachAndBalancesTheBooks) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.prep_threads = 1;
  StartServer(o);
  HeldSubmits held(engine_);
  TestClient running(server_->port());
  ASSERT_TRUE(running.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
  TestClient queued(server_->port());
  ASSERT_TRUE(queued.Send(PostRequest("/v1/completions", R"({"prompt":"y"})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return server_->PrepPoolStats().queued == 1; }));
  std::thread stopper([&] { server_->Stop(); });
  for (TestClient* c : {&running, &queued}) {
    auto reply = c->ReadResponse(5s);
    EXPECT_TRUE(reply);
    if (reply) {
      EXPECT_EQ(ExpectErrorBody(*reply, 503)["code"], "shutting_down");
    }
  }
  held.Release();
  stopper.join();
  EXPECT_EQ(engine_.submitted().size(), 1u);
  EXPECT_EQ(engine_.cancels_for(1), 1);
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 1u);
  EXPECT_EQ(l.cancelled_by_reason.at("shutdown"), 1u);
  ExpectLedgerReconciles();
}

// Every prep thread busy and max_prep_queued waiting: the next request that needs the pool
// is 503 prep_queue_full with Retry-After, at once; what does not need it is still served.
TEST_F(ServerTest, AFullPrepQueueIs503WithRetryAfter) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.prep_threads = 1;
  o.limits.max_prep_queued = 1;
  StartServer(o);
  HeldSubmits held(engine_);
  TestClient a(server_->port());
  ASSERT_TRUE(a.Send(PostRequest("/v1/completions", R"({"prompt":"a"})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.submits_waiting() == 1; }));
  TestClient b(server_->port());
  ASSERT_TRUE(b.Send(PostRequest("/v1/chat/completions", kChat)));
  ASSERT_TRUE(engine_.WaitFor([&] {
    auto m = Roundtrip(GetRequest("/metrics"));
    return m && m->body.find("lifeline_prep_queued 1\n") != std::string::npos;
  }));
  for (const std::string& request :
       {PostRequest("/v1/completions", R"({"prompt":"c"})"),
        PostRequest("/tokenize", R"({"content":"c"})"),
        PostRequest("/detokenize", R"({"tokens":[99]})"),
        PostRequest("/apply-template", kChat),
        // Even a body that is not JSON: /v1/responses parses it on the prep thread too.
        PostRequest("/v1/responses", "{not json")}) {
    auto reply = Roundtrip(request, 5s);
    ASSERT_TRUE(reply) << request;
    const nlohmann::json e = ExpectErrorBody(*reply, 503);
    EXPECT_EQ(e["code"], "prep_queue_full") << request;
    EXPECT_EQ(e["type"], "unavailable");
    EXPECT_EQ(reply->Header("retry-after"), "1") << request;
  }
  auto health = Roundtrip(GetRequest("/health"), 5s);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  held.Release();
  for (TestClient* c : {&a, &b}) {
    auto reply = c->ReadResponse(5s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
  }
  auto metrics = Roundtrip(GetRequest("/metrics"));
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("lifeline_prep_rejected_total 5\n"), std::string::npos);
  ASSERT_TRUE(WaitIdle());
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 2u);
  EXPECT_EQ(l.completed, 2u);
}

TEST(PrepThreadsOption, StartRefusesACountOutside1To64) {
  FakeEngine engine;
  for (const int threads : {0, 65}) {
    ServerOptions o;
    o.port = 0;
    o.prep_threads = threads;
    HttpServer server(o, &engine);
    const Status st = server.Start();
    EXPECT_FALSE(st.ok()) << threads;
    EXPECT_NE(st.ToString().find("prep_threads"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace lifeline::api::testing
