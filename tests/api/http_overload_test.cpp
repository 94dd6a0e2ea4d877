// What a load balancer and a stalled client see: readiness and new connections during the
// SIGTERM drain, and a streaming client that stops reading with the operating system's own
// socket buffers (no test-sized SO_SNDBUF / SO_RCVBUF).
#include <atomic>
#include <string>
#include <thread>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

FakeScript ManyTokens(size_t tokens, size_t token_bytes, std::chrono::milliseconds interval) {
  FakeScript s;
  s.tokens.assign(tokens, std::string(token_bytes, 't'));
  s.token_interval = interval;
  return s;
}

TEST_F(ServerTest, DrainAnswersNewConnectionsWith503AndRetryAfter) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.drain_timeout = 3s;
  StartServer(o);
  // One request keeps the drain going for its whole timeout.
  engine_.SetScript(ManyTokens(1000, 4, 10ms));
  TestClient stream(server_->port());
  ASSERT_TRUE(stream.Send(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})")));
  ASSERT_TRUE(stream.ReadUntil("data: ", 2s));

  std::thread stopper([&] { server_->Stop(); });
  // Fresh connections while the drain runs: each must be answered, never refused.
  bool saw_draining = false;
  std::string failure;
  for (int i = 0; i < 100 && !saw_draining && failure.empty(); ++i) {
    TestClient probe(server_->port());
    if (!probe.connected() || !probe.Send(GetRequest("/ready"))) {
      failure = "connection refused during the drain (attempt " + std::to_string(i) + ")";
      break;
    }
    auto ready = probe.ReadResponse(2s);
    if (!ready) {
      failure = "no answer to /ready during the drain";
      break;
    }
    if (ready->status == 200) {
      std::this_thread::sleep_for(10ms);  // Stop() has not begun yet
      continue;
    }
    saw_draining = true;
    EXPECT_EQ(ExpectErrorBody(*ready, 503)["code"], "shutting_down");
    EXPECT_GE(std::atoi(ready->Header("retry-after").c_str()), 1) << "no Retry-After";
    EXPECT_TRUE(ready->closed);
  }
  if (saw_draining) {
    TestClient fresh(server_->port());
    EXPECT_TRUE(fresh.connected());
    EXPECT_TRUE(fresh.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
    auto refused = fresh.ReadResponse(2s);
    EXPECT_TRUE(refused);
    if (refused) {
      EXPECT_EQ(ExpectErrorBody(*refused, 503)["code"], "shutting_down");
      EXPECT_GE(std::atoi(refused->Header("retry-after").c_str()), 1);
    }
    TestClient health(server_->port());
    EXPECT_TRUE(health.Send(GetRequest("/health")));
    auto alive = health.ReadResponse(2s);
    EXPECT_TRUE(alive && alive->status == 200);  // alive, just not ready
  }
  stopper.join();
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_TRUE(saw_draining);
  EXPECT_EQ(engine_.accepted(), 1);  // nothing new was accepted while draining
}

// A streaming client that never reads, with the kernel's default socket buffers: the stream
// is cut as a slow reader (the peer is alive and acknowledges, its window is shut), whether
// the write stalls for write_timeout first or the unread bytes pass max_stream_buffer_bytes.
TEST_F(ServerTest, NeverReadingClientIsASlowReaderWithDefaultSocketBuffers) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.write_timeout = 1s;
  StartServer(o);
  engine_.SetScript(ManyTokens(5000, 1024, 2ms));  // ~500 KB/s for 10 s
  TestClient c(server_->port());  // default SO_RCVBUF
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})")));
  // Never read.
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 10s))
      << "the stream was never cut";
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().cancelled_by_reason.count("write_timeout"), 0u);
  EXPECT_EQ(server_->Ledger().cancelled_by_reason.at("slow_reader"), 1u);
}

// The kernel's send queue counts toward max_stream_buffer_bytes: with a send buffer larger
// than the cap, a stalled stream is cut at the cap, long before the write deadline.
TEST_F(ServerTest, KernelSendQueueCountsTowardTheStreamBufferCap) {
  server_->Stop();
  ServerOptions o = TestOptions();
  o.limits.max_stream_buffer_bytes = 128 * 1024;
  o.limits.socket_send_buffer_bytes = 2 * 1024 * 1024;  // the kernel may hold 2-4 MiB
  o.limits.write_timeout = 30s;  // beyond the test: only the cap may trigger
  StartServer(o);
  engine_.SetScript(ManyTokens(1500, 1024, 1ms));  // 1.5 MB, less than the send buffer
  TestClient c(server_->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x","stream":true})")));
  ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 10s))
      << "the stream was never cut: the kernel's queue was not counted";
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(server_->Ledger().cancelled_by_reason.at("slow_reader"), 1u);
}

}  // namespace
}  // namespace lifeline::api::testing
