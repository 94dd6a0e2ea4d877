#include "scheduler/queue_policy.h"

#include <limits>
#include <tuple>

namespace lifeline {

bool FcfsPolicy::Precedes(const Request& a, const Request& b) const {
  return std::tie(a.arrival_us, a.id) < std::tie(b.arrival_us, b.id);
}

bool EdfWithinPriorityPolicy::Precedes(const Request& a, const Request& b) const {
  constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
  const int64_t da = a.deadline_us.value_or(kNoDeadline);
  const int64_t db = b.deadline_us.value_or(kNoDeadline);
  // Priority is negated so "higher priority" sorts first in one lexicographic compare.
  return std::make_tuple(-int64_t{a.priority}, da, a.arrival_us, a.id) <
         std::make_tuple(-int64_t{b.priority}, db, b.arrival_us, b.id);
}

std::unique_ptr<QueuePolicy> MakeQueuePolicy(QueueOrder order) {
  switch (order) {
    case QueueOrder::kFcfs: return std::make_unique<FcfsPolicy>();
    case QueueOrder::kEdfWithinPriority: return std::make_unique<EdfWithinPriorityPolicy>();
  }
  return std::make_unique<FcfsPolicy>();
}

}  // namespace lifeline
