// The three-layer split (network / service / compute, plus remote) of the most recent finished
// generation requests, for the dashboard's stacked bars. A fixed-size ring: recording never
// allocates past kCapacity entries, so no amount of traffic or dashboard polling grows it.
//
// Each entry is taken from the very `timings` object the client received (api/http_session
// records it when the terminal event is answered), so the dashboard's bars equal what the
// responses said:
//   network_ms = http_read_ms
//   service_ms = validate_ms + template_ms + tokenize_ms + queue_ms + kv_alloc_ms
//                + model_load_ms + handoff_ms (the engine -> I/O thread hand-off)
//   compute_ms = prefill_ms + decode_ms + sampling_ms
//   remote_ms  = remote_ms (a request a remote cascade member served)
//   total_ms   = server_total_ms (the sum of all of the above)
//
// Ownership: owns copies of what it keeps. Thread-safety: Record and Json may be called from
// any thread (one mutex, held for a copy). Failure: none; missing fields count as 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lifeline::api {

struct RequestSplit {
  std::string id;     // the X-Request-Id the response carried (<= 128 characters)
  std::string model;  // the model that served it (<= 256 bytes kept)
  int64_t end_unix_ms = 0;
  double network_ms = 0;
  double service_ms = 0;
  double compute_ms = 0;
  double remote_ms = 0;
  double total_ms = 0;
  double ttft_ms = -1;  // -1: no token
  double ttfa_ms = -1;  // -1: no answer token (or not measured)
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t generated_tokens = 0;
};

// The split of one response's `timings` object (see the header comment).
RequestSplit SplitOfTimings(const nlohmann::json& timings);

class RecentRequests {
 public:
  static constexpr size_t kCapacity = 128;

  // `split`: SplitOfTimings of the response's timings (the caller's, so it is read once).
  void Record(std::string_view id, std::string_view model, RequestSplit split,
              int64_t end_unix_ms);
  // The newest `max_entries` (at most kCapacity), oldest first, as a JSON array of objects
  // with the RequestSplit field names.
  nlohmann::json Json(size_t max_entries = 64) const;
  uint64_t recorded() const;

 private:
  mutable std::mutex mu_;
  std::array<RequestSplit, kCapacity> ring_{};
  uint64_t recorded_ = 0;  // entries ever recorded; the newest is at (recorded_ - 1) % kCapacity
};

}  // namespace lifeline::api
