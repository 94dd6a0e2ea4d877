// Shared fixture for the socket-level tests: a real HttpServer on an ephemeral port over a
// FakeEngine, with test-sized limits. TearDown stops the server and checks the ledger:
// every request the engine accepted ended exactly once (T25).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/http_test_client.h"
#include "api/fake_engine.h"
#include "api/http_server.h"

namespace lifeline::api::testing {

using namespace std::chrono_literals;

// The shared raw-socket client (tests/common), under the names these tests use.
using TestClient = lifeline::testing::HttpTestClient;
using lifeline::testing::GetRequest;
using lifeline::testing::HttpReply;
using lifeline::testing::PostRequest;
using lifeline::testing::SseEvents;

class ServerTest : public ::testing::Test {
 protected:
  static ServerOptions TestOptions() {
    ServerOptions o;
    o.port = 0;
    o.limits.drain_timeout = 300ms;
    o.limits.header_read_timeout = 3s;
    o.limits.body_read_timeout = 3s;
    o.limits.idle_timeout = 5s;
    o.limits.write_timeout = 3s;
    return o;
  }

  void StartServer(ServerOptions options = TestOptions()) {
    server_ = std::make_unique<HttpServer>(std::move(options), &engine_);
    const Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_NE(server_->port(), 0);
  }

  void SetUp() override { StartServer(); }

  void TearDown() override {
    if (!server_) return;
    server_->Stop();
    ExpectLedgerReconciles();
  }

  void ExpectLedgerReconciles() {
    const LedgerSnapshot l = server_->Ledger();
    EXPECT_EQ(l.accepted, l.completed + l.errored + l.cancelled)
        << "completed " << l.completed << " errored " << l.errored << " cancelled " << l.cancelled;
    EXPECT_EQ(l.accepted, static_cast<uint64_t>(engine_.accepted()));
    // Cancel went to the engine exactly once per cancelled request.
    EXPECT_EQ(static_cast<uint64_t>(engine_.total_cancels()), l.cancelled);
  }

  // Waits until nothing is being prepared (no prep job queued or running), every request
  // the engine accepted is in the ledger, and none of them is in flight.
  bool WaitIdle(std::chrono::milliseconds timeout = 3s) {
    return engine_.WaitFor(
        [&] {
          const LedgerSnapshot l = server_->Ledger();
          return server_->PrepPoolStats().idle() && l.in_flight() == 0 &&
                 l.accepted == static_cast<uint64_t>(engine_.accepted());
        },
        timeout);
  }

  // A client sends a completion whose first token is 5 s away, then closes its connection as
  // soon as the engine accepted it: the server must cancel it (exactly once) and go idle.
  // Call through ASSERT_NO_FATAL_FAILURE.
  void HangUpBeforeTheFirstToken() {
    FakeScript slow;
    slow.first_token_delay = 5s;
    engine_.SetScript(slow);
    {
      TestClient c(server_->port());
      ASSERT_TRUE(c.Send(PostRequest("/v1/completions", R"({"prompt":"x"})")));
      ASSERT_TRUE(engine_.WaitFor([&] { return engine_.accepted() == 1; }));
    }
    ASSERT_TRUE(engine_.WaitFor([&] { return engine_.cancels_for(1) == 1; }, 2s));
    ASSERT_TRUE(WaitIdle());
  }

  // One request on a fresh connection.
  std::optional<HttpReply> Roundtrip(const std::string& request,
                                     std::chrono::milliseconds timeout = 5s) {
    TestClient c(server_->port());
    EXPECT_TRUE(c.connected());
    EXPECT_TRUE(c.Send(request));
    return c.ReadResponse(timeout);
  }

  FakeEngine engine_;  // declared first: outlives the server
  std::unique_ptr<HttpServer> server_;
};

// Checks the OpenAI error body shape and returns the inner object.
inline nlohmann::json ExpectErrorBody(const HttpReply& reply, int status) {
  EXPECT_EQ(reply.status, status) << reply.body;
  nlohmann::json body = reply.Json();
  EXPECT_TRUE(body.is_object() && body.contains("error")) << reply.body;
  if (!body.is_object() || !body.contains("error")) return nlohmann::json::object();
  const nlohmann::json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  return e;
}

}  // namespace lifeline::api::testing
