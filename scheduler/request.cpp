#include "scheduler/request.h"

namespace lifeline {

const char* RequestStateName(RequestState state) {
  switch (state) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kPrefilling: return "prefilling";
    case RequestState::kDecoding: return "decoding";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinished: return "finished";
  }
  return "unknown";
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kError: return "error";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

FinishKind KindOf(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return FinishKind::kNotFinished;
    case FinishReason::kLength:
    case FinishReason::kStop: return FinishKind::kCompleted;
    case FinishReason::kError:
    case FinishReason::kDeadline: return FinishKind::kError;
    case FinishReason::kCancelled: return FinishKind::kCancelled;
  }
  return FinishKind::kError;
}

}  // namespace lifeline
