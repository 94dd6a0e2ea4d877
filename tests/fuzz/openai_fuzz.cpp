// libFuzzer harness for the OpenAI request validation (api/openai.h, the field table of
// request_fields.cpp): a JSON body for /v1/completions, /v1/chat/completions or /infill
// (byte 0 picks the endpoint, the rest is the body), as the server checks it before anything
// reaches an engine. Built by -DLIFELINE_FUZZ=ON and, over its committed corpus, by the
// default test run (Fuzz.openai.Corpus).
//
// Invariants (abort when violated): a refusal is a 4xx ApiError with a message; an accepted
// request is within the documented limits (n, prompts, choices, stop sequences, max_tokens,
// logit_bias, sampling ranges) and has what its endpoint needs (prompts / messages).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/alloc_meter.h"
#include "fuzz/fuzz_check.h"
#include "api/openai.h"

namespace {

using namespace lifeline::api;

using lifeline::fuzz::Check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const lifeline::fuzz::GrowthScope growth(size, "openai");
  if (size < 1) return 0;
  const Endpoint ep = static_cast<Endpoint>(data[0] % 3);
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  RequestLimits limits;
  limits.max_json_depth = 32;
  GenerationRequest r;
  const auto err = ParseGenerationRequest(body, ep, limits, &r);
  if (err) {
    Check(err->http_status >= 400 && err->http_status < 500, "a refusal that is not a 4xx");
    Check(!err->message.empty(), "a refusal without a message");
    // As the server writes it (api/http_message.cpp): a message quoting a client's bytes
    // may hold invalid UTF-8 (an excerpt cut inside a character), which the strict dump()
    // throws on; the server's dump replaces it with U+FFFD.
    (void)ErrorJson(*err).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  }
  Check(r.n >= 1 && r.n <= limits.max_choices, "n outside 1..max_choices");
  Check(r.stop.size() <= limits.max_stop_sequences, "too many stop sequences");
  for (const auto& s : r.stop) {
    Check(!s.empty() && s.size() <= limits.max_stop_bytes, "a stop sequence out of bounds");
  }
  Check(!r.max_tokens || (*r.max_tokens >= 1 && *r.max_tokens <= limits.max_tokens_cap),
        "max_tokens outside 1..cap");
  Check(r.logit_bias.size() <= limits.max_logit_bias, "too many logit_bias entries");
  for (const auto& [id, bias] : r.logit_bias) {
    Check(id >= 0 && bias >= -100 && bias <= 100, "a logit_bias entry out of range");
  }
  Check(r.sampling.temperature >= 0 && r.sampling.temperature <= 2, "temperature out of range");
  Check(r.sampling.top_p > 0 && r.sampling.top_p <= 1, "top_p out of range");
  Check(std::isfinite(r.sampling.repeat_penalty), "a non-finite repeat_penalty");
  if (ep == Endpoint::kChatCompletions) {
    Check(r.is_chat && !r.messages.empty() && r.messages.size() <= limits.max_messages,
          "a chat request without messages or with too many");
  } else {
    Check(!r.prompts.empty() && r.prompts.size() <= limits.max_prompts,
          "a completion without prompts or with too many");
    Check(static_cast<int64_t>(r.prompts.size()) * r.n <= limits.max_choices_total,
          "prompts x n over max_choices_total");
  }
  return 0;
}
