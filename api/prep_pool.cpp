#include "api/prep_pool.h"

#include <utility>

#include "base/prometheus.h"

namespace lifeline::api {

PrepPool::PrepPool(int threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

PrepPool::~PrepPool() { Shutdown(); }

bool PrepPool::TryPost(Job job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_ + IdleThreads()) {
      ++rejected_;
      return false;
    }
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void PrepPool::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  std::deque<Job> abandoned;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    abandoned.swap(queue_);
  }
  cv_.notify_all();
  for (Job& job : abandoned) {
    try {
      job(false);
    } catch (...) {
    }
  }
  for (std::thread& t : threads_) t.join();
  std::lock_guard lock(mu_);
  threads_.clear();
}

PrepStats PrepPool::Stats() const {
  std::lock_guard lock(mu_);
  PrepStats s;
  s.threads = static_cast<int>(threads_.size());
  s.max_queued = max_queued_;
  s.queued = queue_.size();
  s.running = running_;
  s.rejected = rejected_;
  return s;
}

// Under mu_: threads not running a job (a job just queued for one of them does not wait).
size_t PrepPool::IdleThreads() const {
  return threads_.size() > running_ ? threads_.size() - running_ : 0;
}

void PrepPool::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to run
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    try {
      job(true);
    } catch (...) {
    }
    job = nullptr;  // what the job holds is released before it counts as done
    lock.lock();
    --running_;
  }
}

std::string PrepMetricsText(const PrepStats& stats) {
  using prom::Family;
  using prom::Sample;
  std::string out;
  Family(&out, "lifeline_prep_threads", "gauge",
         "Threads that parse, render, tokenize and compile requests off the I/O thread.");
  Sample(&out, "lifeline_prep_threads", "", stats.threads);
  Family(&out, "lifeline_prep_queued", "gauge", "Requests waiting for a prep thread.");
  Sample(&out, "lifeline_prep_queued", "", static_cast<double>(stats.queued));
  Family(&out, "lifeline_prep_running", "gauge", "Requests on a prep thread now.");
  Sample(&out, "lifeline_prep_running", "", static_cast<double>(stats.running));
  Family(&out, "lifeline_prep_rejected_total", "counter",
         "Requests refused with 503 prep_queue_full (the prep queue was full).");
  Sample(&out, "lifeline_prep_rejected_total", "", static_cast<double>(stats.rejected));
  return out;
}

}  // namespace lifeline::api
