// Queue policies as pure comparators over hand-built requests.
#include "scheduler/queue_policy.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

Request Make(RequestId id, int64_t arrival_us, int32_t priority,
             std::optional<int64_t> deadline_us) {
  Request r;
  r.id = id;
  r.arrival_us = arrival_us;
  r.priority = priority;
  r.deadline_us = deadline_us;
  return r;
}

std::vector<RequestId> Sorted(const QueuePolicy& p, std::vector<Request> rs) {
  std::sort(rs.begin(), rs.end(),
            [&](const Request& a, const Request& b) { return p.Precedes(a, b); });
  std::vector<RequestId> ids;
  for (const Request& r : rs) ids.push_back(r.id);
  return ids;
}

const std::vector<Request> kRequests = {
    Make(1, 30, 0, 500),           // late arrival, early deadline
    Make(2, 10, 0, std::nullopt),  // earliest arrival, no deadline
    Make(3, 20, 2, 900),           // high priority, late deadline
    Make(4, 40, 2, 100),           // high priority, earliest deadline
    Make(5, 10, 0, 500),           // same deadline as 1, earlier arrival
    Make(6, 10, 0, std::nullopt),  // ties 2 on everything but id
};

TEST(QueuePolicyTest, FcfsIsArrivalThenId) {
  FcfsPolicy p;
  EXPECT_EQ(Sorted(p, kRequests), (std::vector<RequestId>{2, 5, 6, 3, 1, 4}));
}

TEST(QueuePolicyTest, EdfWithinPriority) {
  EdfWithinPriorityPolicy p;
  // Priority 2: deadline 100 (4) before 900 (3). Priority 0: deadline 500 twice (5 arrived
  // before 1), then the two without a deadline by arrival, then id.
  EXPECT_EQ(Sorted(p, kRequests), (std::vector<RequestId>{4, 3, 5, 1, 2, 6}));
}

TEST(QueuePolicyTest, IsAStrictOrder) {
  for (QueueOrder order : {QueueOrder::kFcfs, QueueOrder::kEdfWithinPriority}) {
    auto p = MakeQueuePolicy(order);
    for (const Request& a : kRequests) {
      EXPECT_FALSE(p->Precedes(a, a));
      for (const Request& b : kRequests) {
        if (a.id != b.id) {
          EXPECT_NE(p->Precedes(a, b), p->Precedes(b, a));
        }
      }
    }
  }
}

TEST(QueuePolicyTest, NamesAndReasons) {
  EXPECT_STREQ(MakeQueuePolicy(QueueOrder::kFcfs)->name(), "fcfs");
  EXPECT_STREQ(MakeQueuePolicy(QueueOrder::kEdfWithinPriority)->name(), "edf_within_priority");
  EXPECT_EQ(KindOf(FinishReason::kStop), FinishKind::kCompleted);
  EXPECT_EQ(KindOf(FinishReason::kDeadline), FinishKind::kError);
  EXPECT_EQ(KindOf(FinishReason::kCancelled), FinishKind::kCancelled);
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(RequestStateName(RequestState::kPreempted), "preempted");
}

}  // namespace
}  // namespace lifeline
