// The prep pool: a few threads that run the part of a request whose cost grows with the
// request, so the HTTP I/O threads never do. A generation request's body is parsed and
// validated here and ServingApi::Submit runs here (the chat template is rendered, the prompt
// tokenized, a grammar or JSON schema compiled, admission decided); so do /tokenize,
// /detokenize and /apply-template. The session posts a job and resumes on its own strand
// when the job posts its result back; meanwhile /health, /ready and every other connection
// are served (api/README.md, "Threads").
//
// The queue is bounded: TryPost refuses a job when `max_queued` jobs already wait for a
// thread (the session answers 503 prep_queue_full + Retry-After), so a burst of expensive
// requests costs a bounded amount of memory and waiting, never the I/O thread.
//
// Ownership: owns its threads (started by the constructor, joined by Shutdown or the
// destructor) and the queued jobs. Thread-safety: every method may be called from any thread
// except a job's own (Shutdown from a job would wait for itself); Shutdown from one
// controlling thread. Failure: a job must not throw (an exception escaping one is caught and
// dropped, and the thread carries on).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lifeline::api {

struct PrepStats {
  int threads = 0;
  size_t max_queued = 0;
  size_t queued = 0;    // posted, waiting for a thread
  size_t running = 0;   // on a thread now
  uint64_t rejected = 0;  // TryPost refusals (queue full or shut down)
  bool idle() const { return queued == 0 && running == 0; }
};

class PrepPool {
 public:
  // Called exactly once: with `run` true on a pool thread, or with `run` false (on the thread
  // calling Shutdown) when the pool shuts down before the job began. Either way the job must
  // report its outcome: a request whose job is abandoned still gets an answer.
  using Job = std::function<void(bool run)>;

  // `threads` >= 1 threads; at most `max_queued` jobs wait beyond the ones running.
  PrepPool(int threads, size_t max_queued);
  ~PrepPool();  // Shutdown()
  PrepPool(const PrepPool&) = delete;
  PrepPool& operator=(const PrepPool&) = delete;

  // Queues `job` unless `max_queued` jobs already wait or the pool has shut down (false: the
  // job is dropped uncalled and counted as rejected).
  bool TryPost(Job job);

  // Takes no more jobs, calls every job still queued with `run` false, waits for the running
  // ones to return and joins the threads. Idempotent.
  void Shutdown();

  PrepStats Stats() const;

 private:
  void Work();
  size_t IdleThreads() const;

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  size_t running_ = 0;
  uint64_t rejected_ = 0;
  bool stopping_ = false;
  bool shut_down_ = false;  // Shutdown began (only its caller's thread reads this)
  std::vector<std::thread> threads_;
};

// The pool's /metrics families (Prometheus text): lifeline_prep_threads,
// lifeline_prep_queued, lifeline_prep_running (gauges), lifeline_prep_rejected_total.
std::string PrepMetricsText(const PrepStats& stats);

}  // namespace lifeline::api
