// Child processes for the integration tests.
//
// ChildProcess: any program spawned with posix_spawn, default signal handling, stderr (and,
// unless piped, stdout) in a temporary file kept for failure messages, stopped with SIGTERM
// (SIGKILL after a grace period) at the latest by the destructor, so no test leaves a process
// behind whatever path it takes out.
//
// ServerProcess: the real `lifeline serve` binary: spawned with `--port 0`, its port read from
// the "listening on http://HOST:PORT" line it prints on stdout.
//
// Ownership: each owns its child, pipe and temporary file. Thread-safety: none; one
// controlling thread. Failure: Spawn / Start return a message (empty on success) that
// includes the child's stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lifeline::integration {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // Stop(), then removes the output file
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Runs argv[0] (a path) with `argv`. With `pipe_stdout` the child's stdout is a pipe read
  // through stdout_fd(); otherwise it goes to the same file as stderr. Returns "" on success.
  std::string Spawn(const std::vector<std::string>& argv, bool pipe_stdout);

  bool running() const { return pid_ > 0; }
  int stdout_fd() const { return stdout_fd_; }
  bool Signal(int sig) const;
  // Waits for the child to exit on its own. Returns its status (see Stop) or nullopt.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code, 128 + signal number if a
  // signal ended it, or -1 if nothing was running. killed() tells whether SIGKILL was needed.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(15));
  bool killed() const { return killed_; }
  // The status of the child's exit once it was reaped (see Stop), else nullopt.
  std::optional<int> exit_status() const { return exit_status_; }
  // The child's stderr so far (and its stdout when not piped).
  std::string StderrText() const;

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;  // read end of the child's stdout when piped
  std::string stderr_path_;
  bool killed_ = false;
  std::optional<int> exit_status_;
};

class ServerProcess {
 public:
  // Runs `<binary> serve --port 0 <serve_args...>` and waits up to `timeout` for the
  // listening line. Returns "" on success, else what went wrong (the child is then reaped:
  // exit_status() tells how it ended).
  std::string Start(const std::vector<std::string>& serve_args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));

  bool running() const { return child_.running(); }
  uint16_t port() const { return port_; }

  bool Signal(int sig) const { return child_.Signal(sig); }
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) { return child_.WaitExit(timeout); }
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(15)) { return child_.Stop(grace); }
  bool killed() const { return child_.killed(); }
  std::optional<int> exit_status() const { return child_.exit_status(); }
  // The child's stderr so far (model loading lines, drain messages, errors).
  std::string StderrText() const { return child_.StderrText(); }

 private:
  ChildProcess child_;
  uint16_t port_ = 0;
};

}  // namespace lifeline::integration
