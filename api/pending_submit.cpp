#include "api/pending_submit.h"

#include <utility>

namespace lifeline::api {

bool PendingSubmit::Deliver(PrepOutcome outcome) {
  std::unique_lock lock(mu_);
  if (gave_up_) {
    const CancelReason reason = *gave_up_;
    lock.unlock();
    AccountAbandoned(outcome, reason);
    return false;
  }
  outcome_ = std::move(outcome);
  return true;
}

std::optional<PrepOutcome> PendingSubmit::Take() {
  std::lock_guard lock(mu_);
  if (gave_up_ || taken_ || !outcome_) return std::nullopt;
  taken_ = true;
  std::optional<PrepOutcome> out = std::move(outcome_);
  outcome_.reset();
  return out;
}

void PendingSubmit::GiveUp(CancelReason reason) {
  std::unique_lock lock(mu_);
  if (gave_up_ || taken_) return;
  gave_up_ = reason;
  std::optional<PrepOutcome> arrived = std::move(outcome_);
  outcome_.reset();
  lock.unlock();
  if (arrived) AccountAbandoned(*arrived, reason);
}

bool PendingSubmit::GivenUp() const {
  std::lock_guard lock(mu_);
  return gave_up_.has_value();
}

void PendingSubmit::AccountAbandoned(const PrepOutcome& outcome, CancelReason reason) {
  if (!outcome.accepted()) return;  // never accepted: not in the ledger
  metrics_.CountAccepted();
  metrics_.CountCancelled(reason);
  metrics_.CountEngineCancel();
  engine_.Cancel(outcome.submitted.handle);
}

}  // namespace lifeline::api
