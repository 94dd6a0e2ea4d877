// EngineShared: everything both halves of a ModelEngine touch, in one place. The front
// (ModelEngine: Prepare / EnqueuePrepared / Cancel / Load / Snapshot / Healthy, on any caller's
// thread) and the engine loop (EngineLoop, on its own thread) share nothing else: the front
// owns this struct, the loop holds a reference to it (and the front outlives the loop).
//
// Each field says who writes it and who reads it. The queue counters are raised by the front
// when it accepts a request and lowered by the loop when a choice is first scheduled or
// leaves (so they are never exact together, which is fine for the 429 bound and admission's
// estimate); the step's load goes the other way, built by the loop and published once per step
// as one value (LoadBoard, as the controller publishes its knobs: slo::KnobBoard).
//
// Thread-safety: as each field says (a mutex named beside it, an atomic, or a Board).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/board.h"
#include "scheduler/prefix_mirror.h"
#include "api/serving_api.h"
#include "serving/local_model.h"
#include "serving/live_request.h"

namespace lifeline::serving {

// The engine loop's load of one step, as admission reads it (ModelEngine::Load).
using LoadBoard = Board<StepLoad>;

// An inbox entry: an accepted request's first choices, or a cancel.
struct InboxMessage {
  api::RequestHandle handle = 0;
  std::shared_ptr<RequestGroup> group;            // null for a cancel
  std::vector<std::unique_ptr<LiveChoice>> lives; // the choices to schedule now
};

struct EngineShared {
  // The prefix cache's full blocks as other threads may read them: the loop's block manager
  // writes it, the front's Prepare estimates a prompt's cached tokens from it for admission.
  PrefixMirror prefix_mirror;

  // The inbox, under `mu`. Front: pushes requests (EnqueuePrepared) and cancels (Cancel),
  // then notifies `cv`. Loop: drains it at each step (and fails what is left when the model
  // failed or the loop ends); waits on `cv` while idle. `stop` is set by EngineLoop::Stop (the
  // front's Stop, any thread); the loop ends on it, EnqueuePrepared refuses once it is set.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<InboxMessage> inbox;
  bool stop = false;

  // Choices accepted and not yet scheduled (in the inbox or waiting), for the 429 bound and
  // Load(). Front: raises it (EnqueuePrepared; lowers it again when refusing). Loop: lowers it
  // when a choice is first scheduled or retired. Both read it.
  std::atomic<int64_t> accepted_not_started{0};
  // Prompt tokens and max_tokens of those choices. Front: raises them (EnqueuePrepared), reads
  // them (Load; the context-trim budget). Loop: lowers them with accepted_not_started.
  std::atomic<int64_t> queued_prompt_tokens{0};
  std::atomic<int64_t> queued_decode_tokens{0};
  // Accepted requests whose terminal event has not gone out. Front: raises it
  // (EnqueuePrepared), reads it (Load, OpenRequests). Loop: lowers it just before the
  // terminal event, so a client never sees its answer while admission still counts the
  // request.
  std::atomic<int64_t> open_requests{0};
  // Requests whose chat context was trimmed. Front: raises it (EnqueuePrepared). Loop: copies
  // it into the snapshot.
  std::atomic<int64_t> context_trims{0};

  // The step's load. Loop: publishes it once per step (and when it goes idle; at creation the
  // initial caps). Front: reads it (Load).
  LoadBoard load;

  // Steady-clock ns of the loop's last sign of life. Loop (and EngineLoop::Start): writes.
  // Front: reads (Healthy).
  std::atomic<int64_t> heartbeat_ns{0};

  // The model's file changed under it (EngineLoop::FailModel). Loop: sets `failed` once,
  // after `failure` (under failure_mu) says why. Front: refuses requests and turns unhealthy
  // on it; both read `failure` through Failure().
  std::atomic<bool> failed{false};
  mutable std::mutex failure_mu;
  std::string failure;

  // The engine's counters, under snapshot_mu. Loop: writes them after every step (and at
  // creation). Front: copies them out (Snapshot).
  mutable std::mutex snapshot_mu;
  EngineSnapshot snapshot;

  // Non-empty once the model failed: why.
  std::string Failure() const {
    if (!failed.load()) return {};
    std::lock_guard<std::mutex> lock(failure_mu);
    return failure;
  }
};

}  // namespace lifeline::serving
