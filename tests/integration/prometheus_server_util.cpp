#include "integration/prometheus_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/http_test_client.h"

namespace lifeline::integration {

using Clock = std::chrono::steady_clock;
using lifeline::testing::GetRequest;
using lifeline::testing::Roundtrip;

namespace {

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

std::optional<std::string> PrometheusServer::FindBinary() {
  if (const char* env = std::getenv("LIFELINE_PROMETHEUS_BIN"); env && *env) {
    return Executable(env) ? std::optional<std::string>(env) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(pos, end - pos);
    if (!dir.empty() && Executable(dir + "/prometheus")) return dir + "/prometheus";
    pos = end + 1;
  }
  return std::nullopt;
}

PrometheusServer::~PrometheusServer() {
  child_.Stop(std::chrono::seconds(10));
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string PrometheusServer::Start(const std::string& binary, uint16_t scrape_port,
                                    std::chrono::milliseconds timeout) {
  if (child_.running()) return "already running";
  if (dir_.empty()) {
    char tmpl[] = "/tmp/lifeline-prometheus-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
    dir_ = tmpl;
  }
  const std::string config_path = dir_ + "/prometheus.yml";
  {
    // scrape_timeout may not exceed scrape_interval (Prometheus rejects the file otherwise).
    std::ofstream config(config_path);
    config << "global:\n"
              "  scrape_interval: 1s\n"
              "  scrape_timeout: 1s\n"
              "  evaluation_interval: 1s\n"
              "scrape_configs:\n"
              "  - job_name: lifeline\n"
              "    static_configs:\n"
              "      - targets: ['127.0.0.1:"
           << scrape_port << "']\n";
    if (!config) return "cannot write " + config_path;
  }
  std::string last_error;
  const auto deadline = Clock::now() + timeout;
  for (int attempt = 0; attempt < 5 && Clock::now() < deadline; ++attempt) {
    const auto port = testing::FreeLoopbackPort();
    if (!port) return "no free loopback port";
    const std::string listen = "127.0.0.1:" + std::to_string(*port);
    std::string err = child_.Spawn(
        {binary, "--config.file=" + config_path, "--storage.tsdb.path=" + dir_ + "/data",
         "--web.listen-address=" + listen, "--log.level=warn"},
        /*pipe_stdout=*/false);
    if (!err.empty()) return err;
    // Ready, exited (the port was taken meanwhile: try another), or out of time.
    for (;;) {
      if (const auto status = child_.WaitExit(std::chrono::milliseconds(0))) {
        last_error = "prometheus on " + listen + " exited with status " +
                     std::to_string(*status) + ": " + child_.StderrText();
        break;
      }
      auto ready = Roundtrip(*port, GetRequest("/-/ready"), std::chrono::seconds(2));
      if (ready && ready->status == 200) {
        port_ = *port;
        return "";
      }
      if (Clock::now() >= deadline) {
        child_.Stop(std::chrono::seconds(5));
        return "prometheus on " + listen + " not ready within " +
               std::to_string(timeout.count()) + " ms: " + child_.StderrText();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return last_error.empty() ? "prometheus did not start" : last_error;
}

std::optional<nlohmann::json> PrometheusServer::Query(const std::string& promql,
                                                      std::string* error) {
  auto reply = Roundtrip(port_, GetRequest("/api/v1/query?query=" + testing::UrlEncode(promql)),
                         std::chrono::seconds(10));
  if (!reply) {
    if (error) *error = "no answer from prometheus to " + promql;
    return std::nullopt;
  }
  nlohmann::json j = reply->Json();
  if (reply->status != 200 || !j.is_object() || j.value("status", "") != "success" ||
      !j.contains("data")) {
    if (error) *error = "HTTP " + std::to_string(reply->status) + " for " + promql + ": " + reply->body;
    return std::nullopt;
  }
  return j["data"];
}

std::optional<double> PrometheusServer::QueryScalar(const std::string& promql,
                                                    std::string* error) {
  auto data = Query(promql, error);
  if (!data) return std::nullopt;
  // Instant vector: result = [{metric, value: [t, "v"]}]; scalar: result = [t, "v"].
  const nlohmann::json& result = (*data)["result"];
  const nlohmann::json* value = nullptr;
  if ((*data)["resultType"] == "vector" && result.is_array() && result.size() == 1) {
    value = &result[0]["value"];
  } else if ((*data)["resultType"] == "scalar") {
    value = &result;
  }
  if (value == nullptr || !value->is_array() || value->size() != 2 || !(*value)[1].is_string()) {
    if (error) *error = "not one sample for " + promql + ": " + data->dump();
    return std::nullopt;
  }
  return std::stod((*value)[1].get<std::string>());
}

}  // namespace lifeline::integration
