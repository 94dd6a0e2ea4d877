// Request: one generation request as the scheduler keeps it, and its state machine.
//
//   WAITING --admit--> PREFILLING --(last known token computed)--> DECODING --> FINISHED
//      ^                   |                                          |
//      +---- PREEMPTED <---+------------------------------------------+
//   (any live state) --Cancel--> FINISHED(cancelled); WAITING/PREEMPTED --deadline--> FINISHED
//
// A request's known tokens are prompt ++ generated. The engine must hold K/V for positions
// [0, n_tokens - 1) and compute the last known token to sample the next one, so PREFILLING
// means "more than one position left to compute" (done in chunks) and DECODING means
// "exactly one" (the last sampled token). A PREEMPTED request lost its blocks and waits to
// recompute all of its known tokens, reusing whatever the prefix cache still holds.
//
// Ownership: a value type; the scheduler owns the live ones and hands finished ones out.
// Thread-safety: none (plain data).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lifeline {

using RequestId = int64_t;

enum class RequestState : uint8_t { kWaiting, kPrefilling, kDecoding, kPreempted, kFinished };

// Why a request finished. kLength/kStop count as completed, kError/kDeadline as errors.
enum class FinishReason : uint8_t {
  kNone,       // not finished
  kLength,     // generated max_tokens tokens
  kStop,       // the caller's stop rule (EOS, stop string) ended it
  kError,      // engine failure for this request (message in error_message)
  kDeadline,   // its deadline passed while it was waiting; never run (or not resumed)
  kCancelled,  // Cancel() (client disconnect, shutdown)
};

enum class FinishKind : uint8_t { kNotFinished, kCompleted, kError, kCancelled };

const char* RequestStateName(RequestState state);
const char* FinishReasonName(FinishReason reason);
FinishKind KindOf(FinishReason reason);

// One step a request took part in (for latency attribution: which batch sizes it ran in).
struct BatchRecord {
  int64_t step_index = 0;
  int64_t scheduled_us = 0;  // the `now` of that Schedule()
  int32_t step_tokens = 0;   // tokens in the whole step
  int32_t step_seqs = 0;     // sequences in the whole step
  int32_t own_tokens = 0;    // this request's tokens in it
};

struct Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // [n_prompt_tokens + n_generated] prompt, then generated
  int64_t n_prompt_tokens = 0;
  int64_t max_tokens = 0;       // generated tokens allowed
  int64_t arrival_us = 0;
  std::optional<int64_t> deadline_us;  // absolute, same clock as arrival_us
  int32_t priority = 0;                // higher runs first (policy permitting)
  bool reuse_prefix = true;            // NewRequest::reuse_prefix

  RequestState state = RequestState::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error_message;    // set for kError / kDeadline

  int64_t n_computed = 0;       // positions [0, n_computed) hold K/V
  int64_t n_cached_tokens = 0;  // positions served by the prefix cache at the last admission
  int64_t n_cached_tokens_total = 0;  // summed over admissions (recomputes included)
  int64_t n_restored_tokens = 0;  // of n_cached_tokens, restored from the tier below the pool
  int64_t n_restored_tokens_total = 0;
  int64_t n_preemptions = 0;
  int64_t spec_drafted = 0;     // speculation: tokens drafted for this request ...
  int64_t spec_accepted = 0;    // ... and accepted (generated without a step of their own)
  std::vector<BatchRecord> batches;

  std::optional<int64_t> first_scheduled_us;
  std::optional<int64_t> first_token_us;
  std::optional<int64_t> finished_us;

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_generated() const { return n_tokens() - n_prompt_tokens; }
  std::span<const int32_t> prompt() const {
    return std::span<const int32_t>(tokens).first(static_cast<size_t>(n_prompt_tokens));
  }
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(n_prompt_tokens));
  }
  bool finished() const { return state == RequestState::kFinished; }
  bool running() const {
    return state == RequestState::kPrefilling || state == RequestState::kDecoding;
  }
};

}  // namespace lifeline
