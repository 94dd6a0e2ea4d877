// QueuePolicy: the order in which waiting (and preempted) requests are admitted. Pluggable so
// the SLO layer can swap it between steps; the scheduler sorts its waiting queue with it at
// every Schedule() and admits strictly in that order.
//
//   FCFS                  arrival time, then id. A preempted request keeps its arrival time,
//                         so it resumes ahead of everything that came after it.
//   EDF within priority   higher priority first; within a priority, earliest deadline first
//                         (no deadline = after every deadline); then arrival, then id.
//
// Preemption does not use this policy: the victim is always the running request with the
// lowest priority, latest arrival (see scheduler.h).
//
// Ownership: stateless value objects. Thread-safety: const methods only; safe to share.
// Failure: none.
#pragma once

#include <memory>

#include "scheduler/request.h"

namespace lifeline {

class QueuePolicy {
 public:
  virtual ~QueuePolicy() = default;
  virtual const char* name() const = 0;
  // Strict weak order: true when `a` is to be admitted before `b`.
  virtual bool Precedes(const Request& a, const Request& b) const = 0;
};

class FcfsPolicy final : public QueuePolicy {
 public:
  const char* name() const override { return "fcfs"; }
  bool Precedes(const Request& a, const Request& b) const override;
};

class EdfWithinPriorityPolicy final : public QueuePolicy {
 public:
  const char* name() const override { return "edf_within_priority"; }
  bool Precedes(const Request& a, const Request& b) const override;
};

enum class QueueOrder : uint8_t { kFcfs, kEdfWithinPriority };

std::unique_ptr<QueuePolicy> MakeQueuePolicy(QueueOrder order);

}  // namespace lifeline
