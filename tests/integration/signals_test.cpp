// Signals of the real `lifeline serve` process (docs/operations.md "Signals",
// docs/reliability.md): SIGHUP, SIGPIPE and SIGUSR1 never end the server. SIGHUP is logged
// and ignored, SIGPIPE ignored, SIGUSR1 writes one state line to stderr; afterwards /ready is
// 200, a request is served, and SIGTERM still drains and exits 0 (the fixture's TearDown).
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Polls the server's stderr until it holds `needle` (or `timeout` passes); returns the text.
std::string WaitForStderr(const ServerProcess& server, const std::string& needle,
                          std::chrono::milliseconds timeout = 20s) {
  const auto deadline = Clock::now() + timeout;
  std::string text = server.StderrText();
  while (text.find(needle) == std::string::npos && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    text = server.StderrText();
  }
  return text;
}

// The JSON of the last "lifeline serve: state {...}" line (discarded if none or unparsable).
json LastStateDump(const std::string& stderr_text) {
  const std::string prefix = "lifeline serve: state ";
  const size_t at = stderr_text.rfind(prefix);
  if (at == std::string::npos) return json::value_t::discarded;
  const size_t begin = at + prefix.size();
  const size_t end = stderr_text.find('\n', begin);
  if (end == std::string::npos) return json::value_t::discarded;
  return json::parse(stderr_text.substr(begin, end - begin), nullptr, false);
}

using SignalsTest = LiveServerTest;

// Before: SIGHUP and SIGUSR1 ended the process by their default action, without a log line
// or a drain.
TEST_F(SignalsTest, HupPipeAndUsr1LeaveTheServerServing) {
  ASSERT_TRUE(server().Signal(SIGHUP));
  std::string log = WaitForStderr(server(), "SIGHUP ignored");
  ASSERT_NE(log.find("SIGHUP ignored"), std::string::npos)
      << "no log line for SIGHUP (exit status: "
      << server().exit_status().value_or(-1) << "):\n" << log;

  ASSERT_TRUE(server().Signal(SIGPIPE));
  ASSERT_TRUE(server().Signal(SIGUSR1));
  log = WaitForStderr(server(), "lifeline serve: state ");
  const json state = LastStateDump(log);
  ASSERT_TRUE(state.is_object()) << "no state dump line after SIGUSR1:\n" << log;
  EXPECT_EQ(state.value("ready", false), true) << state;
  ASSERT_TRUE(state.contains("models") && state["models"].is_array() &&
              state["models"].size() == 1) << state;
  EXPECT_EQ(state["models"][0].value("name", ""), "stories") << state;
  EXPECT_EQ(state["models"][0].value("in_flight", -1), 0) << state;
  EXPECT_TRUE(state["models"][0].contains("queued")) << state;
  EXPECT_TRUE(state["models"][0].contains("running")) << state;
  EXPECT_TRUE(state.contains("ladder") && state["ladder"].is_array()) << state;
  EXPECT_EQ(state["requests"].value("in_flight", -1), 0) << state;

  auto ready = Get("/ready");
  ASSERT_TRUE(ready.has_value()) << "no answer after the signals:\n" << server().StderrText();
  EXPECT_EQ(ready->status, 200) << ready->body;
  auto served = Post("/v1/completions", GreedyCompletion("Once upon a time", 8));
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->status, 200) << served->body;

  // The dump reads the books: the request just served is counted.
  ASSERT_TRUE(server().Signal(SIGUSR1));
  const auto deadline = Clock::now() + 20s;
  json after;
  while (Clock::now() < deadline) {
    after = LastStateDump(server().StderrText());
    if (after.is_object() && after["requests"].value("accepted", 0) >= 1) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(after.is_object()) << server().StderrText();
  EXPECT_EQ(after["requests"].value("accepted", 0), 1) << after;
  EXPECT_EQ(after["requests"].value("completed", 0), 1) << after;
  // TearDown: the ledger reconciles, and SIGTERM still drains and exits 0.
}

// `serve --request-log FILE`: each request a JSON line with its class and outcome; SIGHUP
// reopens the file after an outside rotator moved it (before: SIGHUP was only logged).
class RequestLogSignalsTest : public LiveServerTest {
 protected:
  RequestLogSignalsTest() : log_path_(dir_.path() + "/requests.jsonl") {}
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--request-log", log_path_});
    return args;
  }
  // The file's lines once it holds `n` (the writer is a thread of its own).
  static std::vector<json> WaitForLines(const std::string& path, size_t n) {
    const auto deadline = Clock::now() + 20s;
    std::vector<json> lines;
    while (Clock::now() < deadline) {
      lines.clear();
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line, nullptr, false));
      if (lines.size() >= n) break;
      std::this_thread::sleep_for(20ms);
    }
    return lines;
  }
  TempDir dir_;
  std::string log_path_;
};

TEST_F(RequestLogSignalsTest, EachRequestIsALineAndHupReopensTheFile) {
  auto first = Post("/v1/completions", GreedyCompletion("Once upon a time", 4));
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->status, 200) << first->body;
  auto lines = WaitForLines(log_path_, 1);
  ASSERT_EQ(lines.size(), 1u) << server().StderrText();
  EXPECT_EQ(lines[0].value("outcome", ""), "completed") << lines[0];
  EXPECT_EQ(lines[0].value("served_model", ""), "stories") << lines[0];
  EXPECT_FALSE(lines[0].value("class", "").empty()) << lines[0];  // the server's default class
  EXPECT_EQ(lines[0].value("generated_tokens", 0), 4) << lines[0];
  EXPECT_GT(lines[0].value("ttft_ms", 0.0), 0) << lines[0];

  std::filesystem::rename(log_path_, log_path_ + ".1");
  ASSERT_TRUE(server().Signal(SIGHUP));
  const std::string log = WaitForStderr(server(), "reopening the request log");
  ASSERT_NE(log.find("reopening the request log"), std::string::npos) << log;
  auto second = Post("/v1/completions", GreedyCompletion("Once upon a time", 2));
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second->status, 200) << second->body;
  lines = WaitForLines(log_path_, 1);
  ASSERT_EQ(lines.size(), 1u) << "no line in the reopened file";
  EXPECT_EQ(lines[0].value("generated_tokens", 0), 2) << lines[0];
  EXPECT_EQ(WaitForLines(log_path_ + ".1", 1).size(), 1u);
}

}  // namespace
}  // namespace lifeline::integration
