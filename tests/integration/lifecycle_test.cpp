// Request life cycles through the real server process: a client vanishing mid-stream frees
// its KV blocks and is counted as cancelled, the /metrics ledger reconciles over completed,
// errored and cancelled requests, and SIGTERM with a stream open drains and exits 0.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A stream that runs long unless cut off: ignore_eos, many tokens.
json LongStream(int max_tokens) {
  json req = GreedyCompletion("Once upon a time", max_tokens, /*stream=*/true);
  req["ignore_eos"] = true;
  return req;
}

// Starts `body` as a stream on `client` and reads until `events` data events arrived.
void StartStream(HttpTestClient& client, const json& body, int events) {
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(PostRequest("/v1/completions", body.dump())));
  ASSERT_TRUE(client.ReadUntilCount("data: ", events, 20s)) << client.raw();
  ASSERT_EQ(client.raw().rfind("HTTP/1.1 200", 0), 0u) << client.raw();
}

using LifecycleTest = LiveServerTest;

TEST_F(LifecycleTest, DisconnectMidStreamCancelsAndFreesTheKvCache) {
  const std::string kUsed = R"(model="stories",state="used")";
  const std::string kDisconnect = R"(reason="client_disconnect")";
  ASSERT_EQ(MetricValue(Metrics(), "lifeline_kv_blocks", kUsed), 0.0);
  const double cancelled_before =
      MetricValue(Metrics(), "lifeline_requests_cancelled_total", kDisconnect).value_or(0);
  {
    HttpTestClient client(port());
    StartStream(client, LongStream(500), 2);
    client.Close();
  }
  const auto deadline = Clock::now() + 2s;
  std::string m;
  bool released = false;
  while (Clock::now() < deadline && !released) {
    m = Metrics();
    released = MetricValue(m, "lifeline_requests_cancelled_total", kDisconnect).value_or(0) ==
                   cancelled_before + 1 &&
               MetricValue(m, "lifeline_kv_blocks", kUsed) == 0.0 &&
               MetricValue(m, "lifeline_requests_in_flight") == 0.0;
    if (!released) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(released) << "within 2 s of the disconnect:\n" << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_completed_total"), 0.0) << m;

  // The server goes on serving, with the same greedy answer as before.
  const json ref = ReferenceJson("stories260K.p1");
  auto next = Post("/v1/completions", GreedyCompletion(ref["prompt"], 32));
  ASSERT_TRUE(next);
  ASSERT_EQ(next->status, 200) << next->body;
  EXPECT_EQ(next->Json()["choices"][0]["text"], ref["greedy_text"]);
}

// One sequence at a time, so a second request waits in the queue behind a long stream;
// the default (predictive) admission.
class OneSlotAdmissionTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--max-running", "1"});
    return args;
  }
};

// The same with predictive admission off: it would refuse a deadline that the wait for the
// one slot makes unreachable at once (the test below), and the ledger test needs such a
// request accepted to see its deadline pass in the queue.
class OneAtATimeTest : public OneSlotAdmissionTest {
 protected:
  OneAtATimeTest() : config_path_(dir_.Write("slo.toml", "[admission]\npredictive = false\n")) {}
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = OneSlotAdmissionTest::ServeArgs();
    args.insert(args.end(), {"--config", config_path_});
    return args;
  }
  TempDir dir_;
  std::string config_path_;
};

// A deadline behind a stream holding the only slot: admission counts the wait for that
// stream's tokens and answers at once with a retryable 429 naming the slots, instead of
// queueing the request until its deadline passes (the 503 of OneAtATimeTest's ledger test).
TEST_F(OneSlotAdmissionTest, ADeadlineBehindAFullRunningSetIsShedAtOnce) {
  HttpTestClient hog(port());
  StartStream(hog, LongStream(1500), 2);
  // 10 ms: any machine's wait for ~1500 decode steps is longer (a step is far over 7 us).
  json late = GreedyCompletion("Once upon a time", 8);
  late["deadline_ms"] = 10;
  auto r = Post("/v1/completions", late);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->Json()["error"]["code"], "slo_shed") << r->body;
  EXPECT_NE(r->body.find("1 of 1 running slots taken"), std::string::npos) << r->body;
  hog.Close();
  ASSERT_TRUE(WaitIdle()) << Metrics();
  EXPECT_EQ(ExpectLedgerReconciles(), 1.0);  // only the stream was accepted
}

TEST_F(OneAtATimeTest, LedgerReconcilesOverCompletedErroredAndCancelled) {
  // Completed: two plain requests.
  for (int i = 0; i < 2; ++i) {
    auto r = Post("/v1/completions", GreedyCompletion("Once upon a time", 8));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  // Errored: a 50 ms deadline on a request queued behind a stream of 1500 tokens. Cancelled:
  // that stream, by disconnecting.
  {
    HttpTestClient hog(port());
    StartStream(hog, LongStream(1500), 2);
    json late = GreedyCompletion("Once upon a time", 8);
    late["deadline_ms"] = 50;
    auto r = Post("/v1/completions", late);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->Json()["error"]["code"], "deadline_exceeded") << r->body;
    hog.Close();
  }
  ASSERT_TRUE(WaitIdle()) << Metrics();
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "lifeline_requests_accepted_total"), 4.0) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_completed_total"), 2.0) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_errored_total", R"(code="deadline_exceeded")"), 1.0)
      << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_cancelled_total", R"(reason="client_disconnect")"),
            1.0)
      << m;
  EXPECT_EQ(ExpectLedgerReconciles(), 4.0);
  // Responses by status agree with the outcomes.
  EXPECT_EQ(MetricValue(m, "lifeline_http_responses_total",
                        R"(route="/v1/completions",status="503")"),
            1.0)
      << m;
}

// Opens a long stream, sends SIGTERM, and expects the connection to close and the process to
// exit 0. Returns the stream's SSE payloads.
std::vector<std::string> SigtermDuringStream(ServerProcess& server, uint16_t port,
                                             int max_tokens) {
  HttpTestClient client(port);
  std::vector<std::string> events;
  StartStream(client, LongStream(max_tokens), 2);
  if (::testing::Test::HasFatalFailure()) return events;
  EXPECT_TRUE(server.Signal(SIGTERM));
  EXPECT_TRUE(client.WaitForClose(20s)) << client.raw();
  const auto status = server.WaitExit(20s);
  EXPECT_TRUE(status.has_value()) << "still running 20 s after SIGTERM";
  EXPECT_EQ(status.value_or(-1), 0) << server.StderrText();
  const std::string& raw = client.raw();
  const size_t head_end = raw.find("\r\n\r\n");
  EXPECT_NE(head_end, std::string::npos) << raw;
  if (head_end == std::string::npos) return events;
  events = SseData(Dechunk(raw.substr(head_end + 4)));
  EXPECT_GE(events.size(), 2u) << raw;
  return events;
}

// A terminal error event: what a stream cut off by shutdown ends with.
void ExpectShutdownErrorEvent(const std::string& payload) {
  const json e = json::parse(payload, nullptr, false);
  ASSERT_TRUE(e.is_object() && e.contains("error")) << "last event: " << payload;
  EXPECT_EQ(e["error"]["code"], "shutting_down") << payload;
  EXPECT_TRUE(e["error"]["message"].is_string()) << payload;
}

TEST_F(LifecycleTest, SigtermWithAStreamOpenDrainsAndExitsZero) {
  skip_ledger_check_ = true;  // the process is gone afterwards
  const std::vector<std::string> events = SigtermDuringStream(server(), port(), 600);
  ASSERT_FALSE(events.empty());
  // Within the drain time (5 s) the stream either finishes or is cut off.
  if (events.back() == "[DONE]") {
    std::printf("the stream finished within the drain time\n");
  } else {
    ExpectShutdownErrorEvent(events.back());
  }
}

// No drain time: an open stream is cut off at once.
class NoDrainTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    auto flag = std::find(args.begin(), args.end(), "--drain-timeout");
    if (flag != args.end() && flag + 1 != args.end()) *(flag + 1) = "0";
    return args;
  }
};

TEST_F(NoDrainTest, SigtermCutsAnOpenStreamWithATerminalErrorEvent) {
  skip_ledger_check_ = true;
  const std::vector<std::string> events = SigtermDuringStream(server(), port(), 1900);
  ASSERT_FALSE(events.empty());
  for (const std::string& e : events) EXPECT_NE(e, "[DONE]");
  ExpectShutdownErrorEvent(events.back());
}

// serve --max-connections: two idle keep-alive connections fill a cap of 2; a third is
// answered 503 naming the limit and closed, and a slot freed serves again.
class TwoConnectionsTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--max-connections", "2"});
    return args;
  }
};

TEST_F(TwoConnectionsTest, AThirdConnectionIsRefusedWithTheLimitNamed) {
  auto c1 = std::make_unique<HttpTestClient>(port());
  HttpTestClient c2(port());
  for (HttpTestClient* c : {c1.get(), &c2}) {
    ASSERT_TRUE(c->Send(GetRequest("/health")));
    auto r = c->ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  HttpTestClient c3(port());
  auto refused = c3.ReadResponse(5s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_NE(refused->body.find("max_connections = 2"), std::string::npos) << refused->body;
  c1.reset();  // frees a slot
  std::optional<HttpReply> ok;
  for (int i = 0; i < 50 && !(ok && ok->status == 200); ++i) {
    std::this_thread::sleep_for(20ms);
    ok = Roundtrip(port(), GetRequest("/health"), 5s);
  }
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

}  // namespace
}  // namespace lifeline::integration
