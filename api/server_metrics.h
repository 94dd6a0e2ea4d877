// The server's own counters and the request ledger, rendered as Prometheus text.
//
// Ledger: every generation request the engine accepted ends in exactly one of completed,
// errored{code} or cancelled{reason}; `accepted == completed + errored + cancelled + in_flight`
// holds at every snapshot and in_flight is 0 when idle (tests check it).
//
// Ownership: owns its counters. Thread-safety: all methods may be called from any thread
// (one mutex; updates are a few per request). Failure: none.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace lifeline::api {

enum class CancelReason : uint8_t { kClientDisconnect, kSlowReader, kWriteTimeout, kShutdown };
std::string_view CancelReasonName(CancelReason reason);

struct LedgerSnapshot {
  uint64_t accepted = 0;
  uint64_t completed = 0;
  uint64_t errored = 0;    // sum over errored_by_code
  uint64_t cancelled = 0;  // sum over cancelled_by_reason
  std::map<std::string, uint64_t> errored_by_code;
  std::map<std::string, uint64_t> cancelled_by_reason;
  uint64_t in_flight() const { return accepted - completed - errored - cancelled; }
};

class ServerMetrics {
 public:
  // One finished HTTP exchange; `route` is a route path from the route table or "other".
  void CountResponse(std::string_view route, int status);
  void CountAccepted();
  void CountCompleted();
  void CountErrored(std::string_view code);
  void CountCancelled(CancelReason reason);
  void CountEngineCancel();  // ServingApi::Cancel calls issued
  void ConnectionOpened();
  void ConnectionClosed();
  void ConnectionRejected();  // over max_connections

  LedgerSnapshot Ledger() const;
  uint64_t ResponseCount(std::string_view route, int status) const;
  uint64_t EngineCancels() const;
  int64_t OpenConnections() const;
  // Prometheus text exposition format 0.0.4.
  std::string PrometheusText() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  LedgerSnapshot ledger_;
  uint64_t engine_cancels_ = 0;
  int64_t connections_open_ = 0;
  uint64_t connections_total_ = 0;
  uint64_t connections_rejected_ = 0;
};

}  // namespace lifeline::api
