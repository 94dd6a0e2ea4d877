// Signals of the real `lifeline serve` process (docs/operations.md "Signals",
// docs/reliability.md): SIGHUP, SIGPIPE and SIGUSR1 never end the server. SIGHUP is logged
// and ignored, SIGPIPE ignored, SIGUSR1 writes one state line to stderr; afterwards /ready is
// 200, a request is served, and SIGTERM still drains and exits 0 (the fixture's TearDown).
#include <signal.h>

#include <string>
#include <thread>

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

}  // namespace
}  // namespace lifeline::integration
