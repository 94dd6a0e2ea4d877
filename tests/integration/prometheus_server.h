// A real Prometheus server (the Debian package `prometheus`) for the metrics integration
// test: it scrapes one Lifeline port every second, listens on a free loopback port, keeps its
// TSDB in a temporary directory, and answers PromQL through /api/v1/query.
//
// Ownership: owns the child process and the temporary directory; the destructor stops the
// process (SIGTERM, then SIGKILL) and removes the directory on every path out of a test.
// Thread-safety: none; one controlling thread. Failure: Start returns a message (empty on
// success) that includes Prometheus' own log.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "integration/server_process.h"

namespace lifeline::integration {

class PrometheusServer {
 public:
  PrometheusServer() = default;
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // The prometheus executable: $LIFELINE_PROMETHEUS_BIN if set, else `prometheus` on $PATH;
  // nullopt if there is none.
  static std::optional<std::string> FindBinary();

  // Writes prometheus.yml (job "lifeline", target 127.0.0.1:scrape_port, scrape_interval 1 s)
  // and starts `binary` on a free port (picked by binding port 0, retried when another process
  // takes it first), then waits for /-/ready.
  std::string Start(const std::string& binary, uint16_t scrape_port,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

  uint16_t port() const { return port_; }
  // GET /api/v1/query?query=<promql>: the "data" member of a "success" answer, else nullopt
  // (with the reason in *error when given).
  std::optional<nlohmann::json> Query(const std::string& promql, std::string* error = nullptr);
  // The single value of an instant-vector or scalar answer with exactly one sample.
  std::optional<double> QueryScalar(const std::string& promql, std::string* error = nullptr);
  std::string LogText() const { return child_.StderrText(); }

 private:
  ChildProcess child_;
  std::string dir_;  // temporary: prometheus.yml and the TSDB
  uint16_t port_ = 0;
};

}  // namespace lifeline::integration
