// The request log (api/request_log.h): lines written off the caller's thread, rotation, a
// full queue dropping lines instead of blocking, a failing disk counted, SIGHUP's reopen; and
// through a real HttpServer, one line per outcome with the fields analyze reads.
#include "api/request_log.h"

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/server_fixture.h"

namespace lifeline::api::testing {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ll_request_log_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::unique_ptr<RequestLog> OpenLog(RequestLogOptions o) {
  auto log = RequestLog::Open(std::move(o));
  EXPECT_TRUE(log.ok()) << log.status().ToString();
  return log.ok() ? std::move(log).value() : nullptr;
}

// A latch the writer thread waits on before each batch.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(RequestLogTest, WritesEveryLineInOrder) {
  TempDir dir;
  auto log = OpenLog({.path = dir.File("requests.jsonl")});
  ASSERT_TRUE(log);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(log->Append("{\"n\":" + std::to_string(i) + "}"));
  log->Flush();
  const auto lines = Lines(dir.File("requests.jsonl"));
  ASSERT_EQ(lines.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(lines[i], "{\"n\":" + std::to_string(i) + "}");
  EXPECT_EQ(log->stats().written, 100u);
  EXPECT_EQ(log->stats().dropped, 0u);
}

TEST(RequestLogTest, AppendsToAnExistingFile) {
  TempDir dir;
  const std::string path = dir.File("requests.jsonl");
  { std::ofstream(path) << "{\"old\":1}\n"; }
  auto log = OpenLog({.path = path});
  ASSERT_TRUE(log);
  log->Append("{\"new\":1}");
  log->Flush();
  EXPECT_EQ(Lines(path), (std::vector<std::string>{"{\"old\":1}", "{\"new\":1}"}));
}

TEST(RequestLogTest, RotatesPastTheSizeAndKeepsTheNewestFiles) {
  TempDir dir;
  const std::string path = dir.File("r.jsonl");
  // 10 bytes a line with its newline, 30 bytes a file: three lines each.
  auto log = OpenLog({.path = path, .max_file_bytes = 30, .keep_files = 2});
  ASSERT_TRUE(log);
  for (int i = 0; i < 12; ++i) {
    char line[16];
    std::snprintf(line, sizeof line, "line%05d", i);
    log->Append(line);
    log->Flush();  // one line per batch: rotation is decided per line either way
  }
  // 12 lines: files of lines 0-2, 3-5, 6-8, 9-11; the newest three are kept.
  EXPECT_EQ(Lines(path), (std::vector<std::string>{"line00009", "line00010", "line00011"}));
  EXPECT_EQ(Lines(path + ".1"), (std::vector<std::string>{"line00006", "line00007", "line00008"}));
  EXPECT_EQ(Lines(path + ".2"), (std::vector<std::string>{"line00003", "line00004", "line00005"}));
  EXPECT_FALSE(fs::exists(path + ".3"));
  EXPECT_EQ(log->stats().rotations, 3u);
  EXPECT_EQ(log->stats().written, 12u);
}

TEST(RequestLogTest, AFullQueueDropsLinesInsteadOfWaiting) {
  TempDir dir;
  Gate gate;
  RequestLogOptions o;
  o.path = dir.File("r.jsonl");
  o.max_queued_bytes = 100;  // ten 9-byte lines with their newlines
  o.before_batch_for_test = [&] { gate.Wait(); };
  auto log = OpenLog(std::move(o));
  ASSERT_TRUE(log);
  // The writer takes the first line and waits at the gate; the queue then holds ten more.
  ASSERT_TRUE(log->Append("12345678"));
  int accepted = 1, dropped = 0;
  for (int i = 0; i < 50; ++i) (log->Append("12345678") ? accepted : dropped)++;
  EXPECT_GT(dropped, 0);
  EXPECT_LE(accepted, 12);  // at most the one taken plus the queue's ten (give or take the one
                            // in hand when the writer took its batch)
  gate.Open();
  log->Flush();
  const RequestLogStats s = log->stats();
  EXPECT_EQ(s.dropped, static_cast<uint64_t>(dropped));
  EXPECT_EQ(s.written, static_cast<uint64_t>(accepted));
  EXPECT_EQ(Lines(dir.File("r.jsonl")).size(), static_cast<size_t>(accepted));
  EXPECT_NE(log->MetricsText().find("lifeline_request_log_lines_total{result=\"dropped\"} " +
                                    std::to_string(dropped)),
            std::string::npos)
      << log->MetricsText();
}

TEST(RequestLogTest, AFullDiskCountsLostLinesAndKeepsGoing) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  auto log = OpenLog({.path = "/dev/full"});
  ASSERT_TRUE(log);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(log->Append("{\"n\":1}"));
  log->Flush();
  const RequestLogStats s = log->stats();
  EXPECT_EQ(s.written, 0u);
  EXPECT_EQ(s.failed, 20u);
}

TEST(RequestLogTest, ReopenStartsAFileMovedAway) {
  TempDir dir;
  const std::string path = dir.File("r.jsonl");
  auto log = OpenLog({.path = path});
  ASSERT_TRUE(log);
  log->Append("{\"before\":1}");
  log->Flush();
  fs::rename(path, path + ".moved");  // an outside rotator
  log->Reopen();
  log->Append("{\"after\":1}");
  log->Flush();
  EXPECT_EQ(Lines(path + ".moved"), std::vector<std::string>{"{\"before\":1}"});
  EXPECT_EQ(Lines(path), std::vector<std::string>{"{\"after\":1}"});
  EXPECT_EQ(log->stats().reopens, 1u);
}

TEST(RequestLogTest, AnUnopenablePathIsAStartUpErrorNamingTheFlag) {
  auto log = RequestLog::Open({.path = "/nonexistent-dir/requests.jsonl"});
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("--request-log"), std::string::npos);
  EXPECT_NE(log.status().message().find("/nonexistent-dir/requests.jsonl"), std::string::npos);
}

TEST(RequestLogTest, LineCarriesTheTimingsSplitAndTokens) {
  RequestLogEntry e;
  e.id = "req-1";
  e.endpoint = "chat";
  e.model = "big";
  e.served_model = "small";
  e.slo_class = "interactive";
  e.user_role = "free";
  e.arrival_unix_ms = 1'700'000'000'123;
  e.outcome = "completed";
  e.answered_status = 200;
  e.finish_reason = "stop";
  e.e2e_ms = 120.5;
  e.ttft_ms = 40.25;
  e.timings = {{"http_read_ms", 1.0},   {"validate_ms", 2.0},  {"queue_ms", 3.0},
               {"prefill_ms", 30.0},    {"decode_ms", 80.0},   {"sampling_ms", 1.0},
               {"server_total_ms", 117.0},
               {"tokens", {{"prompt", 12}, {"cached", 8}, {"restored", 4}, {"generated", 9}}},
               {"lifeline", {{"truncated", true}, {"reasoning", {{"tokens", 5}}}}}};
  e.split = SplitOfTimings(e.timings);
  const nlohmann::json j = nlohmann::json::parse(RequestLogLine(e));
  EXPECT_EQ(j["time"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(j["routed"], true);
  EXPECT_EQ(j["class"], "interactive");
  EXPECT_EQ(j["role"], "free");
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_EQ(j["cached_tokens"], 8);
  EXPECT_EQ(j["restored_tokens"], 4);
  EXPECT_EQ(j["generated_tokens"], 9);
  EXPECT_EQ(j["reasoning_tokens"], 5);
  EXPECT_EQ(j["truncated"], true);
  EXPECT_EQ(j["shed"], false);
  EXPECT_DOUBLE_EQ(j["network_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["service_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["compute_ms"].get<double>(), 111.0);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 40.25);
  EXPECT_TRUE(j["ttfa_ms"].is_null());
  EXPECT_EQ(j["client_disconnected"], false);
  EXPECT_TRUE(j["disconnect_ms"].is_null());
}

TEST(RequestLogTest, HostileIdsStayOneValidLine) {
  RequestLogEntry e;
  e.id = std::string("a\nb\"c\xff", 6);
  e.outcome = "refused";
  const std::string line = RequestLogLine(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["id"].get<std::string>().substr(0, 5), "a\nb\"c");
}

// ---- Through the server ------------------------------------------------------------------

class RequestLogServerTest : public ServerTest {
 protected:
  void SetUp() override {
    auto log = RequestLog::Open({.path = dir_.File("requests.jsonl")});
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(log).value();
    ServerOptions o = TestOptions();
    o.request_log = log_;
    StartServer(std::move(o));
  }

  std::vector<nlohmann::json> Logged() {
    log_->Flush();
    std::vector<nlohmann::json> out;
    for (const std::string& line : Lines(dir_.File("requests.jsonl"))) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  TempDir dir_;
  std::shared_ptr<RequestLog> log_;
};

TEST_F(RequestLogServerTest, ACompletedRequestIsOneLine) {
  auto r = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x","max_tokens":3})",
                                 "X-SLO-Class: bulk\r\nX-User-Role: free\r\n"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto lines = Logged();
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json& j = lines[0];
  EXPECT_EQ(j["outcome"], "completed");
  EXPECT_EQ(j["endpoint"], "/v1/completions");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_EQ(j["class"], "bulk");  // the fake engine resolves nothing: the class asked for
  EXPECT_EQ(j["role"], "free");
  EXPECT_EQ(j["id"], r->Header("x-request-id"));
  EXPECT_EQ(j["client_disconnected"], false);
  EXPECT_GT(j["e2e_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["compute_ms"].get<double>(), 12.25 + 30.0);  // the fake's timings
}

TEST_F(RequestLogServerTest, AClientThatHangsUpIsLoggedAsDisconnected) {
  ASSERT_NO_FATAL_FAILURE(HangUpBeforeTheFirstToken());
  const auto lines = Logged();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "cancelled");
  EXPECT_EQ(lines[0]["cancel_reason"], "client_disconnect");
  EXPECT_EQ(lines[0]["client_disconnected"], true);
  EXPECT_TRUE(lines[0]["ttft_ms"].is_null());
  EXPECT_TRUE(lines[0]["status"].is_null());
  EXPECT_DOUBLE_EQ(lines[0]["disconnect_ms"].get<double>(), lines[0]["e2e_ms"].get<double>());
}

TEST_F(RequestLogServerTest, RefusalsAndErrorsAreLoggedWithTheirCodes) {
  FakeScript shed;
  shed.reject = MakeError(ErrorKind::kOverloaded, "slo_shed", "shed by the SLO ladder");
  engine_.SetScript(shed);
  auto r1 = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x"})"));
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->status, 429);
  auto r2 = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x","temperature":"hot"})"));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 400);
  FakeScript failing;
  failing.error_at_end = InternalError("engine failed");
  engine_.SetScript(failing);
  auto r3 = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x"})"));
  ASSERT_TRUE(r3);
  const auto lines = Logged();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["outcome"], "refused");
  EXPECT_EQ(lines[0]["status"], 429);
  EXPECT_EQ(lines[0]["error_code"], "slo_shed");
  EXPECT_EQ(lines[0]["shed"], true);
  EXPECT_EQ(lines[1]["outcome"], "refused");
  EXPECT_EQ(lines[1]["status"], 400);
  EXPECT_EQ(lines[2]["outcome"], "error");
  EXPECT_EQ(lines[2]["served_model"], lines[2]["model"]);
  // Every line has the same keys: analyze reads them as one table.
  for (const auto& j : lines) EXPECT_EQ(j.size(), lines[0].size()) << j.dump();
}

// With the economics plane too, each posted outcome is a line naming the request it joined,
// so `lifeline analyze` can join them offline.
class RequestLogOutcomesTest : public RequestLogServerTest {
 protected:
  void SetUp() override {
    auto log = RequestLog::Open({.path = dir_.File("requests.jsonl")});
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(log).value();
    economics_ = std::make_shared<RecordingEconomics>();
    ServerOptions o = TestOptions();
    o.request_log = log_;
    o.economics = economics_;
    StartServer(std::move(o));
  }
  std::shared_ptr<RecordingEconomics> economics_;
};

TEST_F(RequestLogOutcomesTest, PostedOutcomesAreLinesNamingTheirRequest) {
  economics_->joined_id = "cmpl-joined";
  auto r = Roundtrip(PostRequest("/v1/outcomes",
                                 R"({"events":[{"session_id":"s-1","type":"clicked","time":1765000000123}]})"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto lines = Logged();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["event"], "outcome");
  EXPECT_EQ(lines[0]["id"], "cmpl-joined");
  EXPECT_EQ(lines[0]["session_id"], "s-1");
  EXPECT_TRUE(lines[0]["request_id"].is_null());
  EXPECT_EQ(lines[0]["type"], "clicked");
  EXPECT_EQ(lines[0]["time_unix_ms"], 1765000000123);
}

TEST_F(RequestLogServerTest, TheMetricsCountTheLines) {
  auto r = Roundtrip(PostRequest("/v1/completions", R"({"prompt":"x"})"));
  ASSERT_TRUE(r);
  log_->Flush();
  auto m = Roundtrip(GetRequest("/metrics"));
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("lifeline_request_log_lines_total{result=\"written\"} 1"),
            std::string::npos)
      << m->body;
}

}  // namespace
}  // namespace lifeline::api::testing
