#include "integration/live_server.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_paths.h"

namespace lifeline::integration {

using Clock = std::chrono::steady_clock;

std::string ModelPath(const std::string& file) { return testing::SharedPath("models/" + file); }

TempDir::TempDir() {
  char tmpl[] = "/tmp/lifeline-test-XXXXXX";
  if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  const std::string p = path_ + "/" + name;
  std::ofstream(p) << text;
  return p;
}

nlohmann::json ReferenceJson(const std::string& name) {
  std::ifstream in(testing::SharedPath("reference/logits/" + name + ".json"));
  std::ostringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str(), nullptr, /*allow_exceptions=*/false);
}

std::optional<HttpReply> PostJson(uint16_t port, const std::string& path,
                                  const nlohmann::json& body, std::chrono::milliseconds timeout) {
  return Roundtrip(port, PostRequest(path, body.dump()), timeout);
}

namespace {

// Splits `a="x",b="y"` into its pairs, kept as the literal `a="x"` strings (label values in
// our metrics never contain commas or quotes).
std::vector<std::string> LabelPairs(const std::string& labels) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < labels.size()) {
    size_t end = labels.find(',', pos);
    if (end == std::string::npos) end = labels.size();
    if (end > pos) out.push_back(labels.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::optional<double> MetricValue(const std::string& metrics_text, const std::string& name,
                                  const std::string& labels) {
  const std::vector<std::string> wanted = LabelPairs(labels);
  std::optional<double> sum;
  std::istringstream in(metrics_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || line.compare(0, name_end, name) != 0 ||
        name_end != name.size()) {
      continue;
    }
    std::string sample_labels;
    size_t value_at = name_end + 1;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string::npos) continue;
      sample_labels = line.substr(name_end + 1, close - name_end - 1);
      value_at = close + 2;
    }
    const std::vector<std::string> have = LabelPairs(sample_labels);
    bool match = true;
    for (const std::string& w : wanted) {
      match = match && std::find(have.begin(), have.end(), w) != have.end();
    }
    if (!match || value_at > line.size()) continue;
    sum = sum.value_or(0) + std::stod(line.substr(value_at));
  }
  return sum;
}

std::vector<std::pair<std::string, double>> ParseServerTiming(const std::string& header) {
  std::vector<std::pair<std::string, double>> out;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(',', pos);
    if (end == std::string::npos) end = header.size();
    std::string item = header.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    const size_t dur = item.find(";dur=");
    if (dur != std::string::npos) {
      out.emplace_back(item.substr(0, dur), std::stod(item.substr(dur + 5)));
    }
    pos = end + 1;
  }
  return out;
}

nlohmann::json GreedyCompletion(const std::string& prompt, int max_tokens, bool stream) {
  nlohmann::json body = {{"model", "stories"},
                         {"prompt", prompt},
                         {"temperature", 0},
                         {"max_tokens", max_tokens}};
  if (stream) body["stream"] = true;
  return body;
}

std::vector<std::string> LiveServerTest::ServeArgs() const {
  return {"--model", "stories=" + ModelPath("stories260K.gguf"), "--threads", "1",
          "--kv-memory", "16", "--drain-timeout", "5"};
}

void LiveServerTest::SetUp() {
  const std::string err = server_.Start(ServeArgs());
  ASSERT_EQ(err, "") << "could not start the server";
}

void LiveServerTest::TearDown() {
  if (!server_.running()) return;
  if (!skip_ledger_check_ && !HasFatalFailure()) {
    EXPECT_TRUE(WaitIdle()) << Metrics();
    ExpectLedgerReconciles();
  }
  const int status = server_.Stop();
  EXPECT_EQ(status, 0) << "exit status after SIGTERM; stderr:\n" << server_.StderrText();
  EXPECT_FALSE(server_.killed()) << "the server needed SIGKILL";
}

std::string LiveServerTest::Metrics() {
  auto r = Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

bool LiveServerTest::WaitIdle(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto in_flight = MetricValue(Metrics(), "lifeline_requests_in_flight");
    if (in_flight && *in_flight == 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

double LiveServerTest::ExpectLedgerReconciles() {
  const std::string m = Metrics();
  const auto accepted = MetricValue(m, "lifeline_requests_accepted_total");
  // The errored / cancelled families have no samples until the first one (labelled by code /
  // reason); absent means zero.
  const double completed = MetricValue(m, "lifeline_requests_completed_total").value_or(-1);
  const double errored = MetricValue(m, "lifeline_requests_errored_total").value_or(0);
  const double cancelled = MetricValue(m, "lifeline_requests_cancelled_total").value_or(0);
  EXPECT_TRUE(accepted.has_value()) << m;
  EXPECT_EQ(accepted.value_or(-1), completed + errored + cancelled)
      << "completed " << completed << " errored " << errored << " cancelled " << cancelled
      << "\n" << m;
  return accepted.value_or(-1);
}

}  // namespace lifeline::integration
