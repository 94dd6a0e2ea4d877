#include "api/request_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <vector>

#include "api/recent_requests.h"
#include "base/prometheus.h"

namespace lifeline::api {

Result<std::unique_ptr<RequestLog>> RequestLog::Open(RequestLogOptions options) {
  if (options.path.empty()) return InvalidArgument("--request-log: empty path");
  if (options.max_file_bytes < 0) return InvalidArgument("--request-log-max-mib: negative");
  if (options.keep_files < 0 || options.keep_files > 1000) {
    return InvalidArgument("--request-log-keep: must be in [0, 1000]");
  }
  std::unique_ptr<RequestLog> log(new RequestLog(std::move(options)));
  if (!log->OpenFile()) {
    return InvalidArgument("--request-log: cannot open '" + log->options_.path +
                           "' for appending: " + std::strerror(errno));
  }
  log->writer_ = std::thread([l = log.get()] { l->Run(); });
  return log;
}

RequestLog::RequestLog(RequestLogOptions options) : options_(std::move(options)) {}

RequestLog::~RequestLog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  CloseFile();
}

bool RequestLog::OpenFile() {
  if (options_.path == "-") {
    file_ = stdout;
    regular_file_ = false;
    return true;
  }
  file_ = std::fopen(options_.path.c_str(), "a");
  if (file_ == nullptr) return false;
  struct stat st {};
  regular_file_ = ::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode);
  file_bytes_ = regular_file_ ? static_cast<int64_t>(st.st_size) : 0;
  return true;
}

void RequestLog::CloseFile() {
  if (file_ != nullptr && file_ != stdout) std::fclose(file_);
  if (file_ == stdout) std::fflush(stdout);
  file_ = nullptr;
}

void RequestLog::Rotate() {
  CloseFile();
  const std::string& p = options_.path;
  if (options_.keep_files == 0) {
    std::remove(p.c_str());
  } else {
    // FILE.(k-1) -> FILE.k from the oldest down; the rename onto FILE.keep drops the oldest.
    for (int k = options_.keep_files; k >= 2; --k) {
      std::rename((p + "." + std::to_string(k - 1)).c_str(), (p + "." + std::to_string(k)).c_str());
    }
    std::rename(p.c_str(), (p + ".1").c_str());
  }
  OpenFile();
}

bool RequestLog::Append(std::string line) {
  {
    std::lock_guard lock(mu_);
    const size_t bytes = line.size() + 1;
    if (stop_ || queued_bytes_ + bytes > options_.max_queued_bytes) {
      ++stats_.dropped;
      return false;
    }
    queued_bytes_ += bytes;
    queue_.push_back(std::move(line));
    ++appended_;
  }
  wake_.notify_one();
  return true;
}

void RequestLog::Reopen() {
  {
    std::lock_guard lock(mu_);
    reopen_ = true;
  }
  wake_.notify_one();
}

void RequestLog::Flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = appended_;
  wake_.notify_one();
  drained_.wait(lock, [&] { return settled_ >= target || !writer_.joinable(); });
}

RequestLogStats RequestLog::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string RequestLog::MetricsText() const {
  const RequestLogStats s = stats();
  std::string out;
  prom::Family(&out, "lifeline_request_log_lines_total", "counter",
               "Request log lines by result: written, dropped (the writer's queue was full), "
               "failed (a write or an open failed)");
  prom::Sample(&out, "lifeline_request_log_lines_total", prom::Labels({{"result", "written"}}),
               static_cast<double>(s.written));
  prom::Sample(&out, "lifeline_request_log_lines_total", prom::Labels({{"result", "dropped"}}),
               static_cast<double>(s.dropped));
  prom::Sample(&out, "lifeline_request_log_lines_total", prom::Labels({{"result", "failed"}}),
               static_cast<double>(s.failed));
  prom::Family(&out, "lifeline_request_log_rotations_total", "counter",
               "Request log files rotated (past --request-log-max-mib)");
  prom::Sample(&out, "lifeline_request_log_rotations_total", "", static_cast<double>(s.rotations));
  return out;
}

void RequestLog::Run() {
  std::vector<std::string> batch;
  for (;;) {
    bool reopen = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || reopen_ || !queue_.empty(); });
      if (queue_.empty() && !reopen_ && stop_) return;
      reopen = std::exchange(reopen_, false);
      while (!queue_.empty()) {
        queued_bytes_ -= queue_.front().size() + 1;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (options_.before_batch_for_test) options_.before_batch_for_test();
    uint64_t rotations = 0, reopens = 0, written = 0, failed = 0;
    if (reopen) {
      CloseFile();
      OpenFile();
      ++reopens;
    }
    if (file_ == nullptr) OpenFile();  // an earlier open failed: try again
    for (const std::string& line : batch) {
      if (file_ == nullptr) {
        ++failed;
        continue;
      }
      const int64_t bytes = static_cast<int64_t>(line.size()) + 1;
      if (regular_file_ && options_.max_file_bytes > 0 && file_bytes_ > 0 &&
          file_bytes_ + bytes > options_.max_file_bytes) {
        Rotate();
        ++rotations;
        if (file_ == nullptr) {
          ++failed;
          continue;
        }
      }
      const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
                      std::fputc('\n', file_) != EOF;
      if (ok) {
        ++written;
        file_bytes_ += bytes;
      } else {
        ++failed;
        std::clearerr(file_);
      }
    }
    if (file_ != nullptr && std::fflush(file_) != 0) {
      // Buffered lines that did not reach the file (a full disk): lost, counted.
      failed += written;
      written = 0;
      std::clearerr(file_);
    }
    {
      std::lock_guard lock(mu_);
      stats_.written += written;
      stats_.failed += failed;
      stats_.rotations += rotations;
      stats_.reopens += reopens;
      settled_ += batch.size();
    }
    drained_.notify_all();
    batch.clear();
  }
}

namespace {

nlohmann::json OptionalMs(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return std::round(*v * 1000.0) / 1000.0;
}

double Rounded(double v) { return std::isfinite(v) ? std::round(v * 1000.0) / 1000.0 : 0.0; }

std::string IsoTime(int64_t unix_ms) {
  const std::time_t s = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

const nlohmann::json& At(const nlohmann::json& j, std::initializer_list<const char*> path) {
  static const nlohmann::json kNull;
  const nlohmann::json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(key);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

int64_t CountAt(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json& v = At(j, path);
  return v.is_number_integer() ? std::max<int64_t>(0, v.get<int64_t>()) : 0;
}

nlohmann::json NonEmpty(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

}  // namespace

std::string RequestLogLine(const RequestLogEntry& e) {
  const RequestSplit& split = e.split;
  const nlohmann::json& t = e.timings;
  nlohmann::json j = nlohmann::json::object();
  j["id"] = e.id;
  j["time"] = IsoTime(e.arrival_unix_ms);
  j["time_unix_ms"] = e.arrival_unix_ms;
  j["endpoint"] = e.endpoint;
  j["model"] = NonEmpty(e.model);
  j["served_model"] = NonEmpty(e.served_model);
  j["routed"] = !e.served_model.empty() && !e.model.empty() && e.served_model != e.model;
  j["class"] = NonEmpty(e.slo_class);
  j["role"] = NonEmpty(e.user_role);
  j["session_id"] = NonEmpty(e.session_id);
  j["outcome"] = e.outcome;
  j["status"] = e.answered_status == 0 ? nlohmann::json() : nlohmann::json(e.answered_status);
  j["error_code"] = NonEmpty(e.error_code);
  j["shed"] = e.error_code == "slo_shed";
  j["truncated"] = At(t, {"lifeline", "truncated"}) == true;
  j["finish_reason"] = NonEmpty(e.finish_reason);
  j["stream"] = e.stream;
  j["prompt_tokens"] = split.prompt_tokens;
  j["cached_tokens"] = split.cached_tokens;
  j["restored_tokens"] = CountAt(t, {"tokens", "restored"});
  j["generated_tokens"] = split.generated_tokens;
  j["reasoning_tokens"] = CountAt(t, {"lifeline", "reasoning", "tokens"});
  j["ttft_ms"] = OptionalMs(e.ttft_ms);
  j["ttfa_ms"] = OptionalMs(e.ttfa_ms);
  j["e2e_ms"] = Rounded(e.e2e_ms);
  j["network_ms"] = Rounded(split.network_ms);
  j["service_ms"] = Rounded(split.service_ms);
  j["compute_ms"] = Rounded(split.compute_ms);
  j["remote_ms"] = Rounded(split.remote_ms);
  j["client_disconnected"] = e.disconnect_ms.has_value();
  j["disconnect_ms"] = OptionalMs(e.disconnect_ms);
  j["cancel_reason"] = NonEmpty(e.cancel_reason);
  // Ids and names come from clients: dump replaces invalid UTF-8 rather than throwing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lifeline::api
