// End to end through the real binary: `lifeline serve --port 0` on stories260K (port parsed
// from its listening line), then `lifeline bench` against it writing report.json / .md / .html;
// `--serve` with a sweep; flag errors and an unreachable target.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/loadgen/local_server.h"
#include "common/http_test_client.h"
#include "test_paths.h"

namespace lifeline::loadgen {
namespace {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

CliResult RunBench(const std::string& args) {
  const std::string cmd = lifeline::testing::LifelineBinary() + " bench " + args + " 2>&1";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

const std::string& Model() {
  static const std::string path = lifeline::testing::SharedPath("models/stories260K.gguf");
  return path;
}

TEST(EndToEnd, BenchAgainstLocalLifelineWritesThreeReports) {
  auto server = LocalServer::Start(lifeline::testing::LifelineBinary(),
                                   {"--model", "stories=" + Model(), "--threads", "1"}, 60);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  ASSERT_TRUE(url.starts_with("http://127.0.0.1:")) << url;

  const std::string out = ::testing::TempDir() + "/lbench_e2e_" + std::to_string(::getpid());
  const CliResult r = RunBench("--target " + url + ",model=stories,label=lifeline --rate 20 "
                               "--requests 8 --prompt-len 8 --output-len 8 --seed 3 "
                               "--slo-class interactive --progress never --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("## SLA verdict"), std::string::npos) << r.output;

  const nlohmann::json j = nlohmann::json::parse(Slurp(out + "/report.json"), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["schema"], "lifeline-bench/1");
  ASSERT_EQ(j["requests"].size(), 8u);
  for (const nlohmann::json& req : j["requests"]) {
    EXPECT_TRUE(req["error"].is_null()) << req.dump();
    EXPECT_EQ(req["status"], 200);
    EXPECT_EQ(req["served_model"], "stories");
    EXPECT_GT(req["output_tokens"].get<int64_t>(), 0);
    EXPECT_GT(req["prompt_tokens"].get<int64_t>(), 0);  // from usage
    const double e2e = req["e2e_ms"].get<double>();
    EXPECT_LE(req["ttft_ms"].get<double>(), e2e);
    EXPECT_LE(req["ttfb_ms"].get<double>(), req["ttft_ms"].get<double>());
    // Lifeline sends its phase timings, so all three layers are known; the network layer is
    // the client residual, so the layers add up to the client's end-to-end time.
    const nlohmann::json& l = req["layers"];
    ASSERT_FALSE(l["service_ms"].is_null()) << req.dump();
    const double sum = l["network_ms"].get<double>() + l["service_ms"].get<double>() +
                       l["compute_ms"].get<double>();
    EXPECT_GE(sum + 1e-6, e2e);
    EXPECT_GT(l["compute_ms"].get<double>(), 0);
  }
  EXPECT_EQ(j["summaries"][0]["ok"], 8);
  EXPECT_EQ(j["verdicts"][0]["model"], "stories");
  EXPECT_EQ(j["config"]["slo_class"], "interactive");
  EXPECT_FALSE(j["targets"][0]["slo_status"].get<std::string>().empty());

  const std::string md = Slurp(out + "/report.md");
  EXPECT_NE(md.find("| lifeline |"), std::string::npos);
  const std::string html = Slurp(out + "/report.html");
  EXPECT_EQ(Count(html, "<svg"), 6);
  EXPECT_GE(Count(html, "<polyline"), 4);  // two CDFs, P95 and goodput vs load
  EXPECT_EQ(Count(html, "class=\"threshold\""), 2);
  EXPECT_GE(Count(html, "<circle"), 8);    // the timeline's points
  EXPECT_GE(Count(html, "class=\"layer\""), 3);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::filesystem::remove_all(out);
  EXPECT_EQ((*server)->Stop(), 0);  // graceful drain on SIGTERM
}

// The verdict metric follows the requests unless --slo-metric names one: e2e for
// non-streamed requests (their TTFT is the whole response), TTFT when streamed.
TEST(EndToEnd, SloMetricDefaultsToE2eWithoutStreaming) {
  auto server = LocalServer::Start(lifeline::testing::LifelineBinary(),
                                   {"--model", "stories=" + Model(), "--threads", "1"}, 60);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string out = ::testing::TempDir() + "/lbench_metric_" + std::to_string(::getpid());
  const std::string common = "--target " + (*server)->url() + ",model=stories --rate 20 "
                             "--requests 2 --prompt-len 4 --output-len 4 --progress never --out " +
                             out;
  struct Case {
    std::string flags, metric, source;
  };
  const Case cases[] = {{"--no-stream", "e2e", "default"},
                        {"", "ttft", "default"},
                        {"--no-stream --slo-metric ttft", "ttft", "--slo-metric"}};
  for (const Case& c : cases) {
    const CliResult r = RunBench(common + " " + c.flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(Slurp(out + "/report.json"), nullptr, false);
    ASSERT_TRUE(j.is_object()) << c.flags;
    EXPECT_EQ(j["config"]["slo_metric"], c.metric) << c.flags;
    EXPECT_EQ(j["config"]["slo_metric_source"], c.source) << c.flags;
  }
  std::filesystem::remove_all(out);
  EXPECT_EQ((*server)->Stop(), 0);
}

// --api embeddings against the real server: every answer holds one vector per input, the
// server's prompt tokens are recorded, and a request's TTFT is its whole time.
TEST(EndToEnd, EmbeddingsAgainstLocalLifeline) {
  auto server = LocalServer::Start(lifeline::testing::LifelineBinary(),
                                   {"--model", "stories=" + Model(), "--threads", "1"}, 60);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string out = ::testing::TempDir() + "/lbench_embd_" + std::to_string(::getpid());
  const CliResult r = RunBench("--target " + (*server)->url() + ",model=stories --api embeddings "
                               "--batch-inputs 3 --encoding-format base64 --prompt-len 6 "
                               "--concurrency 2 --requests 4 --progress never --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| req/s | inputs/s |"), std::string::npos) << r.output;
  const nlohmann::json j = nlohmann::json::parse(Slurp(out + "/report.json"), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["config"]["api"], "embeddings");
  ASSERT_EQ(j["requests"].size(), 4u);
  for (const nlohmann::json& req : j["requests"]) {
    EXPECT_TRUE(req["error"].is_null()) << req.dump();
    EXPECT_EQ(req["inputs"], 3);
    EXPECT_GT(req["prompt_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(req["ttft_ms"], req["e2e_ms"]);
  }
  EXPECT_EQ(j["summaries"][0]["ok"], 4);
  std::filesystem::remove_all(out);
  EXPECT_EQ((*server)->Stop(), 0);
}

TEST(EndToEnd, ServeFlagWithSweep) {
  const CliResult r = RunBench("--serve " + Model() + " --serve-arg=--threads --serve-arg=1 "
                               "--sweep 20,40 --requests 6 --prompt-len 8 --output-len 4 "
                               "--cooldown 0.1 --progress never");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("## Knee"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| lifeline | stories260K |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("F32"), std::string::npos);  // quantization from the GGUF
}

TEST(EndToEnd, FlagErrorsAndUnreachableTarget) {
  struct Case {
    std::string args;
    std::string needle;
  };
  const Case cases[] = {
      {"--rate 1", "--target"},
      {"--target http://127.0.0.1:9 --rate 1 --concurrency 2", "exclude each other"},
      {"--target http://127.0.0.1:9", "give a load"},
      {"--target https://127.0.0.1:9 --rate 1", "https"},
      {"--target http://127.0.0.1:9 --rate 1 --prompt-len zipf:3", "--prompt-len"},
      {"--target http://127.0.0.1:9 --rate 1 --slo-metric p99", "--slo-metric"},
      {"--target http://127.0.0.1:9 --concurrency 2 --burstiness 0.5", "--burstiness"},
      {"--target http://127.0.0.1:9 --rate 1 --api embedding", "--api 'embedding'"},
      {"--target http://127.0.0.1:9 --rate 1 --api embeddings --output-len 8", "--output-len"},
      {"--target http://127.0.0.1:9 --rate 1 --documents 4",
       "--documents: applies to --api rerank"},
      {"--target http://127.0.0.1:9 --rate 1 --api embeddings --batch-inputs 4096",
       "--batch-inputs: 4096 outside [1, 2048]"},
      {"--target http://127.0.0.1:9 --rate 1 --api rerank --batch-inputs 2", "--batch-inputs"},
  };
  for (const Case& c : cases) {
    const CliResult r = RunBench(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
  }
  // A port that was just free: a connect error before any load.
  const uint16_t down_port = lifeline::testing::FreeLoopbackPort().value();
  const CliResult down = RunBench("--target http://127.0.0.1:" + std::to_string(down_port) +
                                  ",label=down --rate 1 --requests 1");
  EXPECT_EQ(down.exit_code, 1) << down.output;
  EXPECT_NE(down.output.find("'down'"), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("not reachable"), std::string::npos) << down.output;
}

}  // namespace
}  // namespace lifeline::loadgen
