// Board<T>: one immutable value published by one thread and read by any number of others, as a
// shared_ptr<const T> swapped under a lock held only for the pointer copy. A reader gets a
// consistent snapshot (every field from the same publication) and never waits for the
// writer's work, only for another pointer copy. The SLO controller publishes its knobs this
// way (slo::KnobBoard), and each engine loop the load of its step (serving::StepLoad).
//
// (Not std::atomic<std::shared_ptr>: libstdc++ 12 releases its internal lock with relaxed
// order in load(), a data race ThreadSanitizer reports.)
//
// Thread-safety: Load and Publish from any thread. Failure: none.
#pragma once

#include <memory>
#include <mutex>

namespace lifeline {

template <typename T>
class Board {
 public:
  std::shared_ptr<const T> Load() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  void Publish(std::shared_ptr<const T> value) {
    {
      std::lock_guard lock(mu_);
      current_.swap(value);
    }
    // The previous value (now in `value`) is released here, outside the lock.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> current_;
};

}  // namespace lifeline
