// Per-request latency attribution. Every interval of a request's life is charged to exactly
// one phase, by moving a single "mark" forward: each phase gets (now - mark) and the mark
// becomes now. So the phases add up, by construction, to the time from the first request
// byte to the terminal event:
//
//   network:  http_read_ms (server: first byte .. body read)
//   service:  validate_ms (server), template_ms, tokenize_ms, queue_ms (waiting for a step,
//             including steps the request sat out), kv_alloc_ms (scheduling: prefix lookup and
//             block allocation), model_load_ms (0: models are loaded at start-up)
//   compute:  prefill_ms, decode_ms (forward passes the request took part in), sampling_ms
//             (sampling, detokenization, stop matching, token-event delivery)
//   handoff:  handoff_ms (server: from the engine's last charged instant to the I/O thread
//             handling the terminal event)
//   remote:   remote_ms replaces template..sampling for a request a remote cascade member
//             serves (serving/remote_backend.h: validation to the upstream's last event)
//
// Thread-safety: owned by one request; touched by the HTTP thread until Submit and by the
// engine thread afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace lifeline::serving {

using Clock = std::chrono::steady_clock;

struct RequestTiming {
  Clock::time_point first_byte;  // from the server's timeline
  Clock::time_point mark;        // end of the last charged interval

  double template_ms = 0;
  double tokenize_ms = 0;
  double queue_ms = 0;
  double kv_alloc_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double sampling_ms = 0;

  double ttft_ms = -1;               // first byte .. first generated token (-1: none yet)
  // First byte .. first answer text released (-1: none yet). For a thinking model the
  // thinking comes first, so this -- not ttft_ms -- is when the user sees the answer begin.
  double ttfa_ms = -1;
  std::vector<int32_t> batch_sizes;  // sequences in each step the request ran in
  std::vector<int32_t> batch_tokens; // tokens in each such step
  Clock::time_point last_token;      // when the previous generated token was produced
  std::vector<double> itl_ms;        // [generated - 1] gaps between consecutive tokens

  // Notes a generated token at t: sets ttft_ms on the first, else appends the gap.
  void OnToken(Clock::time_point t) {
    if (ttft_ms < 0) {
      ttft_ms = std::chrono::duration<double, std::milli>(t - first_byte).count();
    } else {
      itl_ms.push_back(std::chrono::duration<double, std::milli>(t - last_token).count());
    }
    last_token = t;
  }

  void OnAnswer(Clock::time_point t) {
    if (ttfa_ms < 0) ttfa_ms = std::chrono::duration<double, std::milli>(t - first_byte).count();
  }

  // Charges (t - mark) to *phase and moves the mark to t (never backwards).
  void Charge(double* phase, Clock::time_point t) {
    if (t <= mark) return;
    *phase += std::chrono::duration<double, std::milli>(t - mark).count();
    mark = t;
  }

  // The `timings` object of a response: flat `*_ms` phases (they feed Server-Timing and sum
  // to the end-to-end time together with the server's own http_read_ms and validate_ms) and
  // nested summaries.
  nlohmann::json ToJson(int64_t prompt_tokens, int64_t cached_tokens, int64_t generated_tokens,
                        int64_t preemptions) const;
};

}  // namespace lifeline::serving
