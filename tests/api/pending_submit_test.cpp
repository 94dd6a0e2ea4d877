// PendingSubmit (api/pending_submit.h): a generation request whose Submit runs on a prep
// thread is counted exactly once, whichever of the prep thread (Deliver) and the connection
// (Take / GiveUp) comes first.
#include <gtest/gtest.h>

#include "api/fake_engine.h"
#include "api/pending_submit.h"
#include "api/server_metrics.h"

namespace lifeline::api::testing {
namespace {

PrepOutcome Accepted(RequestHandle handle) {
  PrepOutcome o;
  o.submitted = SubmitResult::Accept(handle);
  return o;
}

PrepOutcome Refused() {
  PrepOutcome o;
  o.error = MakeError(ErrorKind::kOverloaded, "queue_full", "full", "", 1);
  o.submitted = SubmitResult::Reject(*o.error);
  return o;
}

class PendingSubmitTest : public ::testing::Test {
 protected:
  ServerMetrics metrics_;
  FakeEngine engine_;
};

TEST_F(PendingSubmitTest, DeliveredThenTakenIsLeftToTheConnection) {
  PendingSubmit p(metrics_, engine_);
  EXPECT_FALSE(p.Take());  // nothing yet
  EXPECT_TRUE(p.Deliver(Accepted(7)));
  auto outcome = p.Take();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->submitted.handle, 7u);
  EXPECT_FALSE(p.Take());  // taken once
  p.GiveUp(CancelReason::kClientDisconnect);  // the connection owns it now: no-op here
  EXPECT_EQ(metrics_.Ledger().accepted, 0u);
  EXPECT_EQ(engine_.total_cancels(), 0);
}

TEST_F(PendingSubmitTest, GivenUpThenAcceptedIsCountedCancelledAndCancelledOnce) {
  PendingSubmit p(metrics_, engine_);
  EXPECT_FALSE(p.GivenUp());
  p.GiveUp(CancelReason::kClientDisconnect);
  EXPECT_TRUE(p.GivenUp());  // a job not started yet may skip its work
  p.GiveUp(CancelReason::kShutdown);  // the first reason counts
  EXPECT_FALSE(p.Deliver(Accepted(3)));
  EXPECT_FALSE(p.Take());
  const LedgerSnapshot l = metrics_.Ledger();
  EXPECT_EQ(l.accepted, 1u);
  EXPECT_EQ(l.cancelled, 1u);
  EXPECT_EQ(l.cancelled_by_reason.at("client_disconnect"), 1u);
  EXPECT_EQ(l.in_flight(), 0u);
  EXPECT_EQ(metrics_.EngineCancels(), 1u);
  EXPECT_EQ(engine_.cancels_for(3), 1);
}

TEST_F(PendingSubmitTest, AcceptedThenGivenUpBeforeTheConnectionTookIt) {
  PendingSubmit p(metrics_, engine_);
  EXPECT_TRUE(p.Deliver(Accepted(4)));
  p.GiveUp(CancelReason::kShutdown);
  p.GiveUp(CancelReason::kShutdown);
  EXPECT_FALSE(p.Take());  // the session's posted OnSubmitted finds nothing
  const LedgerSnapshot l = metrics_.Ledger();
  EXPECT_EQ(l.accepted, 1u);
  EXPECT_EQ(l.cancelled_by_reason.at("shutdown"), 1u);
  EXPECT_EQ(engine_.cancels_for(4), 1);
}

TEST_F(PendingSubmitTest, ARefusedRequestIsNeverInTheLedger) {
  {
    PendingSubmit p(metrics_, engine_);
    p.GiveUp(CancelReason::kClientDisconnect);
    EXPECT_FALSE(p.Deliver(Refused()));
  }
  {
    PendingSubmit p(metrics_, engine_);
    EXPECT_TRUE(p.Deliver(Refused()));
    p.GiveUp(CancelReason::kClientDisconnect);
  }
  EXPECT_EQ(metrics_.Ledger().accepted, 0u);
  EXPECT_EQ(metrics_.Ledger().cancelled, 0u);
  EXPECT_EQ(engine_.total_cancels(), 0);
}

}  // namespace
}  // namespace lifeline::api::testing
