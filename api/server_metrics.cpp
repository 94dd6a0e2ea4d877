#include "api/server_metrics.h"

#include "base/prometheus.h"

namespace lifeline::api {

std::string_view CancelReasonName(CancelReason reason) {
  switch (reason) {
    case CancelReason::kClientDisconnect: return "client_disconnect";
    case CancelReason::kSlowReader: return "slow_reader";
    case CancelReason::kWriteTimeout: return "write_timeout";
    case CancelReason::kShutdown: return "shutdown";
  }
  return "unknown";
}

void ServerMetrics::CountResponse(std::string_view route, int status) {
  std::lock_guard lock(mu_);
  ++responses_[{std::string(route), status}];
}

void ServerMetrics::CountAccepted() {
  std::lock_guard lock(mu_);
  ++ledger_.accepted;
}

void ServerMetrics::CountCompleted() {
  std::lock_guard lock(mu_);
  ++ledger_.completed;
}

void ServerMetrics::CountErrored(std::string_view code) {
  std::lock_guard lock(mu_);
  ++ledger_.errored;
  ++ledger_.errored_by_code[code.empty() ? "unknown" : std::string(code)];
}

void ServerMetrics::CountCancelled(CancelReason reason) {
  std::lock_guard lock(mu_);
  ++ledger_.cancelled;
  ++ledger_.cancelled_by_reason[std::string(CancelReasonName(reason))];
}

void ServerMetrics::CountEngineCancel() {
  std::lock_guard lock(mu_);
  ++engine_cancels_;
}

void ServerMetrics::ConnectionOpened() {
  std::lock_guard lock(mu_);
  ++connections_open_;
  ++connections_total_;
}

void ServerMetrics::ConnectionClosed() {
  std::lock_guard lock(mu_);
  --connections_open_;
}

void ServerMetrics::ConnectionRejected() {
  std::lock_guard lock(mu_);
  ++connections_rejected_;
}

LedgerSnapshot ServerMetrics::Ledger() const {
  std::lock_guard lock(mu_);
  return ledger_;
}

uint64_t ServerMetrics::ResponseCount(std::string_view route, int status) const {
  std::lock_guard lock(mu_);
  auto it = responses_.find({std::string(route), status});
  return it == responses_.end() ? 0 : it->second;
}

uint64_t ServerMetrics::EngineCancels() const {
  std::lock_guard lock(mu_);
  return engine_cancels_;
}

int64_t ServerMetrics::OpenConnections() const {
  std::lock_guard lock(mu_);
  return connections_open_;
}


std::string ServerMetrics::PrometheusText() const {
  using prom::Family;
  using prom::Labels;
  using prom::Sample;
  std::lock_guard lock(mu_);
  std::string out;
  Family(&out, "lifeline_http_responses_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, count] : responses_) {
    Sample(&out, "lifeline_http_responses_total",
           Labels({{"route", key.first}, {"status", std::to_string(key.second)}}), count);
  }
  Family(&out, "lifeline_requests_accepted_total", "counter",
         "Generation requests accepted by the engine.");
  Sample(&out, "lifeline_requests_accepted_total", "", ledger_.accepted);
  Family(&out, "lifeline_requests_completed_total", "counter",
         "Accepted requests that finished normally.");
  Sample(&out, "lifeline_requests_completed_total", "", ledger_.completed);
  Family(&out, "lifeline_requests_errored_total", "counter",
         "Accepted requests that ended with an error, by code.");
  for (const auto& [code, count] : ledger_.errored_by_code) {
    Sample(&out, "lifeline_requests_errored_total", Labels({{"code", code}}), count);
  }
  Family(&out, "lifeline_requests_cancelled_total", "counter",
         "Accepted requests cancelled by the server, by reason.");
  for (const auto& [reason, count] : ledger_.cancelled_by_reason) {
    Sample(&out, "lifeline_requests_cancelled_total", Labels({{"reason", reason}}), count);
  }
  Family(&out, "lifeline_requests_in_flight", "gauge", "Accepted requests not yet ended.");
  Sample(&out, "lifeline_requests_in_flight", "", ledger_.in_flight());
  Family(&out, "lifeline_http_connections_open", "gauge", "Open client connections.");
  Sample(&out, "lifeline_http_connections_open", "",
         static_cast<double>(connections_open_ < 0 ? 0 : connections_open_));
  Family(&out, "lifeline_http_connections_total", "counter", "Accepted client connections.");
  Sample(&out, "lifeline_http_connections_total", "", connections_total_);
  Family(&out, "lifeline_http_connections_rejected_total", "counter",
         "Connections refused with 503 over max_connections.");
  Sample(&out, "lifeline_http_connections_rejected_total", "", connections_rejected_);
  return out;
}

}  // namespace lifeline::api
