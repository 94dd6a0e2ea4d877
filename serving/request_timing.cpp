#include "serving/request_timing.h"

namespace lifeline::serving {

nlohmann::json RequestTiming::ToJson(int64_t prompt_tokens, int64_t cached_tokens,
                                     int64_t generated_tokens, int64_t preemptions) const {
  const double service_ms = template_ms + tokenize_ms + queue_ms + kv_alloc_ms;
  const double compute_ms = prefill_ms + decode_ms + sampling_ms;
  const double decode_per_token_ms =
      generated_tokens > 1 ? decode_ms / static_cast<double>(generated_tokens - 1) : 0.0;
  return {
      {"template_ms", template_ms},
      {"tokenize_ms", tokenize_ms},
      {"queue_ms", queue_ms},
      {"kv_alloc_ms", kv_alloc_ms},
      {"model_load_ms", 0.0},
      {"prefill_ms", prefill_ms},
      {"decode_ms", decode_ms},
      {"sampling_ms", sampling_ms},
      // Engine-side layer sums; the server adds http_read_ms / validate_ms at top level.
      {"engine", {{"service_ms", service_ms}, {"compute_ms", compute_ms}}},
      {"latency",
       {{"ttft_ms", ttft_ms}, {"ttfa_ms", ttfa_ms}, {"decode_per_token_ms", decode_per_token_ms}}},
      {"tokens",
       {{"prompt", prompt_tokens},
        {"cached", cached_tokens},
        {"generated", generated_tokens},
        {"prefix_hit_ratio",
         prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0.0}}},
      {"batch", {{"sizes", batch_sizes}, {"step_tokens", batch_tokens}}},
      {"preemptions", preemptions},
  };
}

}  // namespace lifeline::serving
