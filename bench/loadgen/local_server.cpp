#include "bench/loadgen/local_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

namespace lifeline::loadgen {

namespace {

using SteadyClock = std::chrono::steady_clock;

// fork + exec with stdout and stderr on one pipe; returns the read end.
Result<std::pair<pid_t, int>> Spawn(const std::string& binary, const std::vector<std::string>& argv_in) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> argv_s;
  argv_s.push_back(binary);
  argv_s.insert(argv_s.end(), argv_in.begin(), argv_in.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    // A fresh signal mask: the parent may block signals the child must receive.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // If the benchmark dies without stopping it, the server goes too (drains on SIGTERM).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::execv(binary.c_str(), argv.data());
    const char msg[] = "exec failed\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(fds[1]);
  return std::make_pair(pid, fds[0]);
}

std::string Tail(const std::deque<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

}  // namespace

std::string ParseListeningLine(const std::string& line) {
  constexpr std::string_view kPrefix = "lifeline serve: listening on ";
  const size_t at = line.find(kPrefix);
  if (at == std::string::npos) return {};
  std::string url = line.substr(at + kPrefix.size());
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r' || url.back() == ' ')) {
    url.pop_back();
  }
  if (!url.starts_with("http://")) return {};
  const size_t colon = url.rfind(':');
  if (colon == std::string::npos || colon + 1 >= url.size() || colon < 7) return {};
  for (size_t i = colon + 1; i < url.size(); ++i) {
    if (url[i] < '0' || url[i] > '9') return {};
  }
  return url;
}

Result<std::unique_ptr<LocalServer>> LocalServer::Start(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        double timeout_s) {
  std::vector<std::string> argv = {"serve", "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  LL_ASSIGN_OR_RETURN(auto spawned, Spawn(binary, argv));
  std::unique_ptr<LocalServer> s(new LocalServer());
  s->pid_ = spawned.first;
  s->out_fd_ = spawned.second;

  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(timeout_s));
  std::string pending;
  std::deque<std::string> last_lines;
  while (s->url_.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      return Internal(binary + " serve: no listening line within " + std::to_string(timeout_s) +
                      " s; last output:" + Tail(last_lines));
    }
    pollfd p{s->out_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(s->out_fd_, buf, sizeof buf);
    if (n <= 0) {
      s->Stop(1);
      return Internal(binary + " serve exited before listening (status " +
                      std::to_string(s->exit_status_) + "); last output:" + Tail(last_lines));
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (std::string url = ParseListeningLine(line); !url.empty()) s->url_ = url;
      last_lines.push_back(std::move(line));
      if (last_lines.size() > 8) last_lines.pop_front();
    }
  }
  // Keep reading so the child never blocks on a full pipe; the output is not needed.
  const int fd = s->out_fd_;
  s->drain_ = std::thread([fd] {
    char buf[4096];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  });
  return s;
}

int LocalServer::Stop(double grace_s) {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                   std::chrono::duration<double>(grace_s));
    int status = 0;
    while (true) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (r < 0 && errno != EINTR) break;
      if (SteadyClock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      ::usleep(10'000);
    }
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid_ = -1;
  }
  if (drain_.joinable()) drain_.join();
  if (out_fd_ >= 0) {
    ::close(out_fd_);
    out_fd_ = -1;
  }
  return exit_status_;
}

LocalServer::~LocalServer() { Stop(); }

Result<nlohmann::json> InspectModel(const std::string& binary, const std::string& model_path) {
  LL_ASSIGN_OR_RETURN(auto spawned, Spawn(binary, {"inspect", "--json", model_path}));
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(spawned.second, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(spawned.second);
  int status = 0;
  ::waitpid(spawned.first, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal(binary + " inspect --json " + model_path + " failed: " + out.substr(0, 300));
  }
  // stderr shares the pipe; the JSON object starts at the first '{' of a line.
  const size_t start = out.find('{');
  nlohmann::json j = nlohmann::json::parse(start == std::string::npos ? "" : out.substr(start),
                                           nullptr, false);
  if (j.is_discarded()) return DataLoss(binary + " inspect --json printed no JSON object");
  return j;
}

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace lifeline::loadgen
