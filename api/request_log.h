// The request log (`serve --request-log FILE|-`): one JSON line per finished generation
// request -- completed, failed, cancelled (the client hung up, a slow reader, shutdown) or
// refused before acceptance (shed 429, 400, 503) -- with its class, role, models, tokens,
// TTFT / TTFA / e2e, the three-layer split, finish reason, and whether and when the client
// disconnected. It is the input `lifeline analyze` reads to find a class's cliff from the
// server's own traffic (client disconnect as the outcome; docs/analysis.md).
//
// Never on the request path: the connection formats its line and hands it to Append, which
// queues it and returns; one writer thread writes the queue in batches. A full queue
// (max_queued_bytes) drops the line and counts it; a failed write (a full disk) counts the
// lines it lost and the next batch tries again; a file that cannot be opened again is retried
// at the next batch. So a stuck or full disk costs log lines, never a request.
//
// Rotation: past max_file_bytes, FILE becomes FILE.1 (FILE.1 -> FILE.2, ..., the oldest past
// keep_files deleted) and a new FILE is opened. Reopen() (SIGHUP) closes and reopens FILE at
// the next batch, for an outside rotator that moved it away. "-" writes to stdout (no
// rotation).
//
// Ownership: owns its file and writer thread (joined by the destructor after the queue is
// written). Thread-safety: Append, Reopen, Flush and stats from any thread. Failure: Open
// fails when the file cannot be opened at start (a bad path is a start-up error, not a
// silent loss); after that nothing fails, it counts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/recent_requests.h"
#include "base/status.h"

namespace lifeline::api {

struct RequestLogOptions {
  std::string path;                           // "-" = stdout
  int64_t max_file_bytes = 100LL << 20;       // rotate when the next batch would pass it; 0 = never
  int keep_files = 5;                         // rotated files kept: FILE.1 .. FILE.keep_files
  size_t max_queued_bytes = 8 << 20;          // lines waiting for the writer; past it, dropped
  // Tests only: runs on the writer thread before each batch (a latch holds the writer).
  std::function<void()> before_batch_for_test;
};

struct RequestLogStats {
  uint64_t written = 0;    // lines written
  uint64_t dropped = 0;    // lines refused because the queue was full
  uint64_t failed = 0;     // lines lost to a failed write or a file that would not open
  uint64_t rotations = 0;  // files rotated
  uint64_t reopens = 0;    // Reopen() calls served
};

class RequestLog {
 public:
  static Result<std::unique_ptr<RequestLog>> Open(RequestLogOptions options);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  // Queues one line (without its newline). False: the queue was full and the line dropped.
  bool Append(std::string line);
  // Close and reopen the file before the next batch (SIGHUP).
  void Reopen();
  // Waits until every line queued before the call has been written or counted lost.
  void Flush();
  RequestLogStats stats() const;
  // lifeline_request_log_lines_total{result="written|dropped|failed"},
  // lifeline_request_log_rotations_total.
  std::string MetricsText() const;
  const std::string& path() const { return options_.path; }

 private:
  explicit RequestLog(RequestLogOptions options);
  bool OpenFile();  // writer thread (or Open): file_ and file_bytes_
  void CloseFile();
  void Rotate();
  void Run();

  const RequestLogOptions options_;
  std::FILE* file_ = nullptr;
  bool regular_file_ = false;
  int64_t file_bytes_ = 0;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  uint64_t appended_ = 0;  // lines accepted into the queue, ever
  uint64_t settled_ = 0;   // of those, written or counted failed
  bool reopen_ = false;
  bool stop_ = false;
  RequestLogStats stats_;
  std::thread writer_;
};

// What the connection knows when a generation request ends.
struct RequestLogEntry {
  std::string id;             // X-Request-Id
  std::string endpoint;       // the route: /v1/completions, /v1/chat/completions, /v1/responses, ...
  std::string model;          // the model asked for ("" = the default)
  std::string served_model;   // the model that served it ("" when none did)
  std::string slo_class;      // the class it was judged under (requested, when refused before)
  std::string user_role;
  std::string session_id;     // the request's X-Session-Id ("" = none)
  int64_t arrival_unix_ms = 0;
  std::string outcome;        // completed | error | cancelled | refused
  int answered_status = 0;    // the HTTP status sent; 0 when the client left before one was
  std::string error_code;     // error / refusal code (slo_shed, invalid_request_error, ...)
  std::string finish_reason;  // completed: stop | length | tool_calls ...
  std::string cancel_reason;  // cancelled: client_disconnect | slow_reader | write_timeout | shutdown
  bool stream = false;
  double e2e_ms = 0;                    // arrival (first byte) -> the outcome
  std::optional<double> ttft_ms;        // first token, when one came
  std::optional<double> ttfa_ms;        // first answer token (after any thinking)
  std::optional<double> disconnect_ms;  // arrival -> the client hung up (client_disconnect)
  nlohmann::json timings;               // the response's `timings` (completed), else null
  RequestSplit split;                   // SplitOfTimings(timings): the split and token counts
};

// The entry as one JSON line (no newline): flat keys, `_ms` in milliseconds, absent values
// null, so every line has the same columns (docs/operations.md "Request log").
std::string RequestLogLine(const RequestLogEntry& entry);

}  // namespace lifeline::api
