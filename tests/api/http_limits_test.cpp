// Limits, deadlines, back-pressure, cancellation and shutdown over real sockets (T8, T10,
// T13, T15, T23, T25 of the reliability plan), with test-sized timeouts.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A valid completion body of exactly `size` bytes.
std::string BodyOfSize(size_t size) {
  const std::string head = R"({"prompt":")";
  const std::string tail = R"("})";
  return head + std::string(size - head.size() - tail.size(), 'a') + tail;
}

// Chunked transfer framing written out here (not the server's helper): hex size, CRLF,
// payload, CRLF.
std::string ChunkFrameForTest(const std::string& payload) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  return size + payload + "\r\n";
}

FakeScript LongStream(size_t tokens, size_t token_bytes, std::chrono::milliseconds interval) {
  FakeScript s;
  s.tokens.assign(tokens, std::string(token_bytes, 't'));
  s.token_interval = interval;
  return s;
}

const std::string kStream = R"({"prompt":"x","stream":true})";

TEST_F(ServerTest, BodyExactlyAtLimitIsServedAndOneMoreIs413) {
  const size_t limit = TestOptions().limits.max_body_bytes;
  ASSERT_EQ(limit, 1024u * 1024u);  // the documented default
  auto at = Roundtrip(PostRequest("/v1/completions", BodyOfSize(limit)));
  ASSERT_TRUE(at);
  EXPECT_EQ(at->status, 200);
  auto over = Roundtrip(PostRequest("/v1/completions", BodyOfSize(limit + 1)));
  ASSERT_TRUE(over);
  EXPECT_EQ(ExpectErrorBody(*over, 413)["code"], "body_too_large");
  EXPECT_TRUE(over->closed);
}

TEST_F(ServerTest, OversizeContentLengthIsRejectedBeforeTheBodyIsSent) {
  TestClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 2147483648\r\n\r\n"));
  auto reply = c.ReadResponse(2s);  // no body byte was sent
  ASSERT_TRUE(reply);
  ExpectErrorBody(*reply, 413);
}

TEST_F(ServerTest, ChunkedBodyIsCutOffAtTheLimit) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.max_body_bytes = 64 * 1024;
  StartServer(o);
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  // Under the limit: a chunked JSON body works.
  const std::string small = R"({"prompt":"chunked"})";
  auto ok = Roundtrip(head + ChunkFrameForTest(small) + "0\r\n\r\n");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  // 16 chunks of 8 KiB = 128 KiB, twice the limit, no Content-Length anywhere.
  std::string big = head + ChunkFrameForTest(R"({"prompt":")");
  for (int i = 0; i < 16; ++i) big += ChunkFrameForTest(std::string(8192, 'a'));
  big += ChunkFrameForTest(R"("})") + "0\r\n\r\n";
  auto over = Roundtrip(big);
  ASSERT_TRUE(over);
  ExpectErrorBody(*over, 413);
}

TEST_F(ServerTest, HugeHeadersAre431) {
  auto big = Roundtrip("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'h') +
                       "\r\n\r\n");
  ASSERT_TRUE(big);
  EXPECT_EQ(ExpectErrorBody(*big, 431)["code"], "headers_too_large");
  EXPECT_TRUE(big->closed);
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 1000; ++i) many += "X-H" + std::to_string(i) + ": some-longer-value\r\n";  // ~25 KB
  auto reply = Roundtrip(many + "\r\n");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 431);
  auto after = Roundtrip(GetRequest("/health"));  // and the server is fine
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

// Many small header fields within the byte limit: 100 are served, the 101st is a 431 naming
// the limit (a field count is its own bound, as Apache's LimitRequestFields).
TEST_F(ServerTest, TooManyHeaderFieldsAre431) {
  auto with_fields = [](int n) {
    std::string r = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 1; i < n; ++i) r += "X" + std::to_string(i) + ": v\r\n";  // Host is field 1
    return r + "\r\n";
  };
  auto ok = Roundtrip(with_fields(100));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto over = Roundtrip(with_fields(101));
  ASSERT_TRUE(over);
  const nlohmann::json e = ExpectErrorBody(*over, 431);
  EXPECT_EQ(e["code"], "headers_too_large");
  EXPECT_NE(e["message"].get<std::string>().find("101 header fields"), std::string::npos);
  EXPECT_TRUE(over->closed);
}

TEST_F(ServerTest, ReadDeadlines) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.header_read_timeout = 300ms;
  o.limits.body_read_timeout = 300ms;
  o.limits.idle_timeout = 200ms;
  StartServer(o);

  // Slowloris: part of a header, then nothing -> 408 after the header deadline.
  std::vector<std::unique_ptr<TestClient>> loris;
  for (int i = 0; i < 20; ++i) {
    loris.push_back(std::make_unique<TestClient>(server_->port()));
    ASSERT_TRUE(loris.back()->Send("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  // A well-behaved client is served at once meanwhile.
  const auto t0 = Clock::now();
  auto quick = Roundtrip(GetRequest("/health"));
  ASSERT_TRUE(quick);
  EXPECT_EQ(quick->status, 200);
  EXPECT_LT(Clock::now() - t0, 250ms);
  for (auto& c : loris) {
    auto reply = c->ReadResponse(2s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(ExpectErrorBody(*reply, 408)["code"], "request_timeout");
    EXPECT_TRUE(c->WaitForClose(2s));
  }
  EXPECT_GE(Clock::now() - t0, 250ms);

  // Body trickle: headers promise 100 bytes, 10 arrive.
  TestClient body(server_->port());
  ASSERT_TRUE(body.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 100\r\n\r\n{\"prompt\":"));
  auto reply = body.ReadResponse(2s);
  ASSERT_TRUE(reply);
  ExpectErrorBody(*reply, 408);

  // A connection that never sends a byte is closed without an answer.
  TestClient silent(server_->port());
  EXPECT_TRUE(silent.WaitForClose(2s));
  EXPECT_TRUE(silent.raw().empty());

  // An idle keep-alive connection is closed after idle_timeout.
  TestClient idle(server_->port());
  ASSERT_TRUE(idle.Send(GetRequest("/health")));
  ASSERT_TRUE(idle.ReadResponse());
  const auto idle_start = Clock::now();
  EXPECT_TRUE(idle.WaitForClose(2s));
  EXPECT_GE(Clock::now() - idle_start, 150ms);
}

TEST_F(ServerTest, ConnectionsAboveTheCapGet503) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.max_connections = 2;
  StartServer(o);
  auto c1 = std::make_unique<TestClient>(server_->port());
  TestClient c2(server_->port());
  for (TestClient* c : {c1.get(), &c2}) {
    ASSERT_TRUE(c->Send(GetRequest("/health")));
    ASSERT_TRUE(c->ReadResponse());
  }
  TestClient c3(server_->port());
  auto refused = c3.ReadResponse(2s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(ExpectErrorBody(*refused, 503)["code"], "too_many_connections");
  EXPECT_EQ(refused->Header("retry-after"), "1");
  EXPECT_TRUE(c3.WaitForClose(2s));
  c1.reset();  // frees a slot
  ASSERT_TRUE(engine_.WaitFor([&] { return server_->metrics().OpenConnections() <= 1; }));
  auto ok = Roundtrip(GetRequest("/health"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, DisconnectMidStreamCancelsExactlyOnce) {
  engine_.SetScript(LongStream(500, 8, 5ms));
  {
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", kStream)));
    ASSERT_TRUE(c.ReadUntil("data: ", 2s));
  }  // closed mid-stream
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 2s));
  ASSERT_TRUE(WaitIdle());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(engine_.cancels_for(1), 1);
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 1u);
  EXPECT_EQ(l.cancelled_by_reason.at("client_disconnect"), 1u);
  ExpectLedgerReconciles();
}

TEST_F(ServerTest, DisconnectWhileWaitingForFirstTokenCancels) {
  ASSERT_NO_FATAL_FAILURE(HangUpBeforeTheFirstToken());
  EXPECT_EQ(server_->Ledger().cancelled, 1u);
}

// A client that half-closes (shutdown(SHUT_WR)) after a complete request still wants its
// answer: end of stream on the read side is not a disconnect (before: cancelled as
// client_disconnect, the connection closed without an answer). The first token comes 200 ms
// after the request so that the server has seen the half-close before it answers.
TEST_F(ServerTest, AHalfClosedClientGetsItsAnswer) {
  FakeScript slow;
  slow.first_token_delay = 200ms;
  engine_.SetScript(slow);
  {
    SCOPED_TRACE("non-streamed");
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
    c.ShutdownWrite();
    auto reply = c.ReadResponse(5s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
    EXPECT_EQ(reply->Json()["choices"][0]["text"], "Hello, world");
    EXPECT_TRUE(c.WaitForClose(5s));  // nothing more can come: the server closes
  }
  {
    SCOPED_TRACE("streamed");
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", kStream)));
    c.ShutdownWrite();
    auto reply = c.ReadResponse(5s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200);
    auto events = SseEvents(reply->body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
  }
  {
    SCOPED_TRACE("two pipelined requests");
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x"})") +
                       PostRequest("/v1/completions", R"({"prompt":"y"})")));
    c.ShutdownWrite();
    for (int i = 0; i < 2; ++i) {
      auto reply = c.ReadResponse(5s);
      ASSERT_TRUE(reply) << i;
      EXPECT_EQ(reply->status, 200) << reply->body;
    }
    EXPECT_TRUE(c.WaitForClose(5s));
  }
  {
    SCOPED_TRACE("HTTP/1.0");
    const std::string body = R"({"prompt":"x"})";
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                       "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    c.ShutdownWrite();
    auto reply = c.ReadResponse(5s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
  }
  ASSERT_TRUE(WaitIdle());
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 5u);
  EXPECT_EQ(l.completed, 5u);
  EXPECT_EQ(l.cancelled, 0u);
}

// A client really gone is still cancelled: one that closed its socket (a FIN, like a
// half-close) answers the server's probe with a reset, and so does one that half-closed and
// then reset the connection.
TEST_F(ServerTest, AClientGoneAfterItsRequestIsStillCancelled) {
  FakeScript slow;
  slow.first_token_delay = 5s;
  engine_.SetScript(slow);
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    const int before = engine_.total_cancels();
    {
      TestClient c(server_->port());
      ASSERT_TRUE(c.Send(PostRequest("/v1/completions", stream ? kStream : R"({"prompt":"x"})")));
      ASSERT_TRUE(engine_.WaitFor([&] { return engine_.accepted() == before + 1; }));
    }  // close(): a FIN, then a reset for the server's probe
    EXPECT_TRUE(engine_.WaitFor([&] { return engine_.total_cancels() == before + 1; }, 3s));
  }
  {
    const int before = engine_.total_cancels();
    const int accepted_before = engine_.accepted();
    TestClient c(server_->port());
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
    c.ShutdownWrite();
    // The server asks with an interim response the client is bound to accept...
    ASSERT_TRUE(c.ReadUntil("HTTP/1.1 100 Continue\r\n\r\n", 3s));
    // (Accepted first: a client gone while its request still waits for a prep thread is
    // dropped before the engine, and a busy machine can keep it waiting that long.)
    ASSERT_TRUE(engine_.WaitFor([&] { return engine_.accepted() == accepted_before + 1; }));
    EXPECT_EQ(engine_.total_cancels(), before);
    c.CloseWithReset();  // ...and a reset is a client gone
    EXPECT_TRUE(engine_.WaitFor([&] { return engine_.total_cancels() == before + 1; }, 3s));
  }
  ASSERT_TRUE(WaitIdle());
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.cancelled_by_reason.at("client_disconnect"), 3u);
  ExpectLedgerReconciles();
}

TEST_F(ServerTest, RepeatedDisconnectsAtEveryPhaseReconcile) {
  // Phases: before the first token (stream and non-stream), mid-stream, and right after the
  // request is sent. Then a normal request must still be served.
  for (int i = 0; i < 24; ++i) {
    FakeScript s = LongStream(50, 4, 2ms);
    s.first_token_delay = (i % 2 == 0) ? 20ms : 0ms;
    engine_.SetScript(s);
    TestClient c(server_->port());
    const bool stream = i % 3 != 0;
    ASSERT_TRUE(c.Send(PostRequest("/v1/completions", stream ? kStream : R"({"prompt":"x"})")));
    if (stream && i % 4 == 1) c.ReadUntil("data: ", 1s);
    if (i % 4 == 2) std::this_thread::sleep_for(3ms);
  }
  ASSERT_TRUE(WaitIdle(5s));
  engine_.SetScript(FakeScript{});
  auto reply = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x"})"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  ASSERT_TRUE(WaitIdle());
  // A request whose client left before a prep thread took it up was never submitted
  // (nothing is owed to it); every other one was accepted and ended exactly once.
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_GE(l.accepted, 1u);
  EXPECT_LE(l.accepted, 25u);
  ExpectLedgerReconciles();
}

TEST_F(ServerTest, StalledReaderIsCancelledAfterTheWriteDeadline) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.write_timeout = 300ms;
  o.limits.max_stream_buffer_bytes = 64 * 1024 * 1024;  // only the deadline can trigger
  o.limits.socket_send_buffer_bytes = 4096;
  StartServer(o);
  engine_.SetScript(LongStream(4000, 1024, 1ms));  // ~1 MB/s for 4 s
  TestClient c(server_->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", kStream)));
  // Never read. The kernel buffers fill, the write stalls, the deadline cancels. The peer
  // acknowledged every byte it was sent (it is alive, its window is shut): a slow reader.
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 3s));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().cancelled_by_reason.at("slow_reader"), 1u);
}

TEST_F(ServerTest, StreamBufferCapCancelsAFastProducerForASlowReader) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.write_timeout = 10s;  // only the buffer cap can trigger
  o.limits.max_stream_buffer_bytes = 64 * 1024;
  o.limits.socket_send_buffer_bytes = 4096;
  StartServer(o);
  engine_.SetScript(LongStream(4000, 1024, 0ms));  // 4 MB as fast as possible
  TestClient c(server_->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", kStream)));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 3s));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().cancelled_by_reason.at("slow_reader"), 1u);
}

TEST_F(ServerTest, HeartbeatsWhileWaitingForTheFirstToken) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.heartbeat_interval = 100ms;
  StartServer(o);
  FakeScript s;
  s.tokens = {"late"};
  s.first_token_delay = 450ms;
  engine_.SetScript(s);
  auto reply = Roundtrip(PostRequest("/v1/completions", kStream));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200);
  auto events = SseEvents(reply->body);
  size_t heartbeats = 0;
  size_t first_data = events.size();
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == ": keep-alive") {
      ++heartbeats;
      EXPECT_LT(i, first_data) << "heartbeat after data";
    } else if (first_data == events.size()) {
      first_data = i;
    }
  }
  EXPECT_GE(heartbeats, 2u) << reply->body;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[first_data])["choices"][0]["text"], "late");
}

TEST_F(ServerTest, StopDrainsShortRequestsAndEndsLongOnesVisibly) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.drain_timeout = 300ms;
  StartServer(o);
  engine_.SetScript(LongStream(1000, 4, 10ms));  // 10 s: will not finish in the drain window
  TestClient long_stream(server_->port());
  ASSERT_TRUE(long_stream.Send(PostRequest("/v1/completions", kStream)));
  ASSERT_TRUE(long_stream.ReadUntil("data: ", 2s));
  TestClient keepalive(server_->port());
  ASSERT_TRUE(keepalive.Send(GetRequest("/health")));
  ASSERT_TRUE(keepalive.ReadResponse());

  std::thread stopper([&] { server_->Stop(); });
  std::this_thread::sleep_for(50ms);
  // While draining: readiness and new generation requests say 503 shutting_down.
  ASSERT_TRUE(keepalive.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
  auto refused = keepalive.ReadResponse(2s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(ExpectErrorBody(*refused, 503)["code"], "shutting_down");

  auto ended = long_stream.ReadResponse(3s);
  stopper.join();
  ASSERT_TRUE(ended);
  auto events = SseEvents(ended->body);
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back(), nullptr, false);
  EXPECT_EQ(last["error"]["code"], "shutting_down") << ended->body;
  EXPECT_EQ(ended->body.find("[DONE]"), std::string::npos);
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.cancelled_by_reason.at("shutdown"), 1u);
  EXPECT_EQ(engine_.cancels_for(1), 1);
  // The listener is gone.
  TestClient late(server_->port());
  EXPECT_FALSE(late.connected() && late.Send(GetRequest("/health")) && late.ReadResponse(500ms));
}

// 12 concurrent streams, every other client disconnecting mid-stream.
void RunConcurrentStreams(HttpServer& server, FakeEngine& engine) {
  engine.SetScript(LongStream(40, 6, 2ms));
  std::atomic<int> done_ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 12; ++i) {
    clients.emplace_back([&, i] {
      TestClient c(server.port());
      if (!c.Send(PostRequest("/v1/completions", kStream))) return;
      if (i % 2 == 0) {
        c.ReadUntil("data: ", 2s);
        return;  // disconnect mid-stream
      }
      auto r = c.ReadResponse(5s);
      if (r && r->body.ends_with("data: [DONE]\n\n")) ++done_ok;
    });
  }
  for (auto& th : clients) th.join();
  EXPECT_EQ(done_ok.load(), 6);
}

TEST_F(ServerTest, ConcurrentStreamsWithHalfDisconnectingReconcile) {
  RunConcurrentStreams(*server_, engine_);
  ASSERT_TRUE(WaitIdle(5s));
  const LedgerSnapshot l = server_->Ledger();
  EXPECT_EQ(l.accepted, 12u);
  EXPECT_GE(l.completed, 6u);
  ExpectLedgerReconciles();
}

TEST_F(ServerTest, SeveralIoThreadsKeepEachConnectionOnItsStrand) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.io_threads = 3;
  StartServer(o);
  RunConcurrentStreams(*server_, engine_);
  ASSERT_TRUE(WaitIdle(5s));
  EXPECT_EQ(server_->Ledger().accepted, 12u);
  ExpectLedgerReconciles();
}

}  // namespace
}  // namespace lifeline::api::testing
