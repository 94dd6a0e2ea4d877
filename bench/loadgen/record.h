// One measured request of a benchmark run and its derived values: output tokens, TPOT, the SLO
// metric and the three-layer split of its end-to-end latency.
//
// Three layers (from the server's `timings` when present, see serving/request_timing.h):
//   service  = validate + template + tokenize + queue + kv_alloc + model_load   (Lifeline)
//   compute  = prefill + decode + sampling                                       (Lifeline)
//              or prompt_ms + predicted_ms with service 0                        (llama.cpp)
//   network  = client end-to-end - service - compute: the client-side residual (DNS, connect,
//              transfer, the server's own HTTP read and write), never below 0.
// Without server timings all three are -1 (unknown).
//
// Ownership: values. Thread-safety: none needed. Failure: none (unknown values are -1).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/loadgen/http_client.h"

namespace lifeline::loadgen {

// What a verdict judges: time to the first token (thinking included), end-to-end latency, or
// time to the first answer token (after any thinking; equal to TTFT without thinking).
enum class SloMetric { kTtft, kE2e, kTtfa };

struct RequestRecord {
  int step = 0;        // index into RunData::steps
  int target = 0;      // index into the target list
  int64_t index = 0;   // request index within the step (same request for every target)
  double scheduled_ms = 0;  // planned send time from the step start (closed loop: actual)
  double start_ms = 0;      // actual send time from the run start (timeline axis)
  double send_lag_ms = 0;   // actual - planned send time (client lateness)
  int64_t prompt_words = 0;
  int64_t max_tokens = 0;
  int64_t inputs = 0;          // embeddings inputs / rerank documents sent (0: generation)
  int64_t output_tokens = -1;  // usage, else timings.tokens.generated, else output events
  int64_t prompt_tokens = -1;  // usage, else timings.tokens.prompt
  double tpot_ms = -1;         // (e2e - ttft) / (output_tokens - 1); streamed, > 1 token
  double network_ms = -1;
  double service_ms = -1;
  double compute_ms = -1;
  HttpExchange x;              // client measurements (body dropped on success)

  bool ok() const { return x.error.empty(); }
  // The SLO metric in ms; +inf for a failed request. A successful response without any
  // output event uses its end-to-end time as TTFT, and one without an answer event (e.g. its
  // thinking ran to max_tokens) its end-to-end time as TTFA.
  double SloValue(SloMetric metric) const;
};

// Fills the derived fields from rec->x.
void DeriveRecord(RequestRecord* rec);

// Three-layer split from a timings object and the client's end-to-end time; false when the
// object has no recognised phases.
bool SplitLayers(const nlohmann::json& timings, double e2e_ms, double* network_ms,
                 double* service_ms, double* compute_ms);

nlohmann::json RecordJson(const RequestRecord& r);

const char* SloMetricName(SloMetric m);  // "ttft", "e2e", "ttfa"

// TTFT and TTFA of a successful request as the reports count them: the measured time, else
// (no output event; or thinking but no answer event) its end-to-end time. A request without
// thinking has TTFA = TTFT.
double TtftOrE2e(const RequestRecord& r);
double TtfaOrE2e(const RequestRecord& r);

}  // namespace lifeline::loadgen
