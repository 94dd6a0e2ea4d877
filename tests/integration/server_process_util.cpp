#include "integration/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "test_paths.h"

extern char** environ;

namespace lifeline::integration {

using Clock = std::chrono::steady_clock;

namespace {

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Parses the port out of "lifeline serve: listening on http://127.0.0.1:PORT".
std::optional<uint16_t> PortFromLine(const std::string& line) {
  constexpr std::string_view kMarker = "listening on http://";
  const size_t at = line.find(kMarker);
  if (at == std::string::npos) return std::nullopt;
  const size_t colon = line.rfind(':');
  if (colon == std::string::npos || colon < at + kMarker.size()) return std::nullopt;
  const long port = std::strtol(line.c_str() + colon + 1, nullptr, 10);
  if (port <= 0 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

}  // namespace

ChildProcess::~ChildProcess() {
  Stop();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (!stderr_path_.empty()) ::unlink(stderr_path_.c_str());
}

std::string ChildProcess::Spawn(const std::vector<std::string>& argv_in, bool pipe_stdout) {
  if (pid_ > 0) return "already running";
  if (argv_in.empty()) return "no program";
  if (stderr_path_.empty()) {
    char path_template[] = "/tmp/lifeline-integ-stderr-XXXXXX";
    const int fd = ::mkostemp(path_template, O_CLOEXEC);
    if (fd < 0) return std::string("mkostemp: ") + std::strerror(errno);
    ::close(fd);
    stderr_path_ = path_template;
  }
  const int err_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (err_fd < 0) return "open " + stderr_path_ + ": " + std::strerror(errno);
  int out_pipe[2] = {-1, -1};
  if (pipe_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(err_fd);
    return std::string("pipe2: ") + std::strerror(errno);
  }

  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_stdout ? out_pipe[1] : err_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  // The child starts with default signal handling and an empty mask whatever this process
  // blocks, so SIGTERM reaches it (lifeline serve's sigwait, Prometheus' handler).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (pipe_stdout) ::close(out_pipe[1]);
  ::close(err_fd);
  if (rc != 0) {
    if (pipe_stdout) ::close(out_pipe[0]);
    return "posix_spawn " + args[0] + ": " + std::strerror(rc);
  }
  pid_ = pid;
  killed_ = false;
  exit_status_.reset();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = pipe_stdout ? out_pipe[0] : -1;
  return "";
}

bool ChildProcess::Signal(int sig) const { return pid_ > 0 && ::kill(pid_, sig) == 0; }

std::optional<int> ChildProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_status_ = DecodeStatus(status);
      return exit_status_;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return std::nullopt;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  Signal(SIGTERM);
  if (auto status = WaitExit(grace)) return *status;
  if (pid_ <= 0) return -1;
  killed_ = true;
  Signal(SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  exit_status_ = DecodeStatus(status);
  return *exit_status_;
}

std::string ChildProcess::StderrText() const {
  std::ifstream in(stderr_path_);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ServerProcess::Start(const std::vector<std::string>& serve_args,
                                 std::chrono::milliseconds timeout) {
  if (child_.running()) return "already running";
  std::vector<std::string> args = {testing::LifelineBinary(), "serve", "--port", "0"};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  if (std::string err = child_.Spawn(args, /*pipe_stdout=*/true); !err.empty()) return err;

  // Read stdout until the listening line, the child's exit (EOF) or the timeout.
  const int fd = child_.stdout_fd();
  std::string out;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto nl = out.find('\n'); nl != std::string::npos) {
      if (auto port = PortFromLine(out.substr(0, nl))) {
        port_ = *port;
        return "";
      }
      out.erase(0, nl + 1);
      continue;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    const int r = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (r < 0 && errno == EINTR) continue;
    std::string why;
    int status = -1;
    if (r == 0) {
      why = "no listening line within " + std::to_string(timeout.count()) + " ms";
      status = child_.Stop(std::chrono::seconds(2));
    } else {
      char buf[512];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      why = "the server closed stdout before listening";
      // It is exiting on its own (a bad flag or config): collect its own status.
      const auto exited = child_.WaitExit(std::chrono::seconds(5));
      status = exited ? *exited : child_.Stop(std::chrono::seconds(2));
    }
    return why + " (exit status " + std::to_string(status) + "); stdout: '" + out +
           "'; stderr: " + StderrText();
  }
}

}  // namespace lifeline::integration
