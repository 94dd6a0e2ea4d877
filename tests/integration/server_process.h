// The real `lifeline serve` binary as a child process: spawned with `--port 0`, its port read
// from the "listening on http://HOST:PORT" line it prints on stdout, its stderr kept in a
// temporary file for failure messages, and stopped with SIGTERM (SIGKILL after a grace
// period) at the latest by the destructor, so no test leaves a server behind.
//
// Ownership: owns the child, the stdout pipe and the stderr file. Thread-safety: none; one
// controlling thread. Failure: Start returns a message (empty on success) that includes the
// child's stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lifeline::integration {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // Stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Runs `<binary> serve --port 0 <serve_args...>` and waits up to `timeout` for the
  // listening line. Returns "" on success, else what went wrong.
  std::string Start(const std::vector<std::string>& serve_args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));

  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }

  bool Signal(int sig) const;
  // Waits for the child to exit on its own. Returns its status (see Stop) or nullopt.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code, 128 + signal number if a
  // signal ended it, or -1 if nothing was running. killed() tells whether SIGKILL was needed.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(15));
  bool killed() const { return killed_; }

  // The child's stderr so far (model loading lines, drain messages, errors).
  std::string StderrText() const;

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int stdout_fd_ = -1;  // read end of the child's stdout
  std::string stderr_path_;
  bool killed_ = false;
};

}  // namespace lifeline::integration
