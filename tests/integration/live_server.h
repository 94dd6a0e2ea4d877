// Fixture for the integration tests: a real `lifeline serve` child process on an ephemeral
// port, started in SetUp with the arguments ServeArgs() returns and stopped in TearDown.
// Before stopping, TearDown waits for the server to go idle and checks the request ledger
// on /metrics (accepted == completed + errored + cancelled), so every test doubles as a
// ledger check; then it checks that SIGTERM ends the process with status 0.
//
// Also: helpers to send completions, read /metrics samples, and load reference outputs from
// ../shared. Thread-safety: the helpers that only take a port (Roundtrip, PostJson) may be
// used from several threads; the fixture itself from the test thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_test_client.h"
#include "integration/server_process.h"

namespace lifeline::integration {

using namespace std::chrono_literals;

// The shared raw-socket client (tests/common).
using lifeline::testing::Dechunk;
using lifeline::testing::GetRequest;
using lifeline::testing::HttpReply;
using lifeline::testing::HttpTestClient;
using lifeline::testing::PostRequest;
using lifeline::testing::Roundtrip;
using lifeline::testing::SseData;
using lifeline::testing::UrlEncode;

// Path of a file under ../shared/models.
std::string ModelPath(const std::string& file);

// A temporary directory (config files, model copies), removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `text` to <dir>/<name> and returns the path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};
// ../shared/reference/logits/<name>.json, parsed (a discarded value if unreadable).
nlohmann::json ReferenceJson(const std::string& name);

// POST `body` as JSON to `path` on a fresh connection.
std::optional<HttpReply> PostJson(uint16_t port, const std::string& path,
                                  const nlohmann::json& body,
                                  std::chrono::milliseconds timeout = 30s);

// Sum of all samples of metric family `name` whose label set contains every `name="value"`
// pair of `labels` ("" = all samples); nullopt if no sample matches.
std::optional<double> MetricValue(const std::string& metrics_text, const std::string& name,
                                  const std::string& labels = "");

// Parses a Server-Timing header ("a;dur=1.5, b;dur=2") into name -> milliseconds.
std::vector<std::pair<std::string, double>> ParseServerTiming(const std::string& header);

class LiveServerTest : public ::testing::Test {
 protected:
  // Arguments after `serve --port 0`. Default: stories260K as model "stories", one compute
  // thread (the test machine is small and shared), a small KV budget.
  virtual std::vector<std::string> ServeArgs() const;

  void SetUp() override;
  void TearDown() override;

  uint16_t port() const { return server_.port(); }
  ServerProcess& server() { return server_; }

  std::optional<HttpReply> Post(const std::string& path, const nlohmann::json& body,
                                std::chrono::milliseconds timeout = 30s) {
    return PostJson(port(), path, body, timeout);
  }
  std::optional<HttpReply> Get(const std::string& path) {
    return Roundtrip(port(), GetRequest(path), 10s);
  }
  // GET /metrics body ("" on failure).
  std::string Metrics();
  // Polls /metrics until no accepted request is in flight.
  bool WaitIdle(std::chrono::milliseconds timeout = 5s);
  // Expects the ledger identity on /metrics; returns the accepted count.
  double ExpectLedgerReconciles();

  ServerProcess server_;
  bool skip_ledger_check_ = false;  // tests that stop the server themselves
};

// A greedy completion request on model "stories" (temperature 0, no penalties).
nlohmann::json GreedyCompletion(const std::string& prompt, int max_tokens, bool stream = false);

}  // namespace lifeline::integration
