// A local `lifeline serve` child process for `lifeline bench --serve MODEL.gguf` (and tests):
// started with --port 0, ready once it prints "lifeline serve: listening on http://HOST:PORT",
// stopped with SIGTERM (then SIGKILL after a grace period). The load generator still talks to
// it over HTTP only. Also runs `lifeline inspect --json` for the model facts.
//
// Ownership: LocalServer owns the child process and the thread draining its output; the
// destructor stops both. Thread-safety: one owner. Failure: Start returns Io / Internal with
// the child's last output lines when it exits or stays silent past the timeout.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::loadgen {

// "lifeline serve: listening on http://127.0.0.1:41234" -> "http://127.0.0.1:41234"; "" when
// the line is something else.
std::string ParseListeningLine(const std::string& line);

class LocalServer {
 public:
  // Runs `binary serve --port 0 ARGS...` and waits up to `timeout_s` for the listening line.
  static Result<std::unique_ptr<LocalServer>> Start(const std::string& binary,
                                                    const std::vector<std::string>& args,
                                                    double timeout_s);
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, wait up to `grace_s`, then SIGKILL. Returns the exit status (or -1). Idempotent.
  int Stop(double grace_s = 10);

 private:
  LocalServer() = default;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string url_;
  std::thread drain_;
  int exit_status_ = -1;
};

// Runs `binary inspect --json model_path` and parses its stdout; errors carry the exit status.
Result<nlohmann::json> InspectModel(const std::string& binary, const std::string& model_path);

// This process's executable (/proc/self/exe), "" when unknown.
std::string SelfExecutable();

}  // namespace lifeline::loadgen
