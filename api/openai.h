// OpenAI-compatible request parsing and validation for POST /v1/completions and
// /v1/chat/completions, driven by ONE declarative field table (RequestFields()): each field's
// JSON type, range, which endpoint reads it, whether it is required, and what happens above
// the maximum (reject with 400, or clamp for the few fields where a large value is harmless).
//
// Body policy, in order: Content-Type must be application/json (415; a missing header is also
// 415, because browsers may send such a body cross-site without a CORS preflight); the bytes
// must be valid UTF-8 (400 invalid_utf8); nesting must stay within `max_json_depth` (400
// json_too_deep, checked by a scan before parsing); the JSON must parse strictly (400
// invalid_json: trailing garbage, NaN, truncation) without duplicate keys (400 duplicate_key);
// the top level must be an object (400). Nothing is silently ignored: a field the endpoint does
// not read (unknown, another endpoint's, or an OpenAI feature Lifeline lacks) is 400
// `unknown_parameter` naming it, as OpenAI answers; values a field cannot honour are 400 too.
//
// Ownership: pure functions over borrowed input; results are returned by value.
// Thread-safety: no shared state. Failure: std::optional<ApiError> naming `param`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/serving_api.h"
#include "api/errors.h"

namespace lifeline::api {

// POST /v1/completions, /v1/chat/completions, /infill (llama.cpp's fill-in-the-middle route:
// completions fields plus input_prefix / input_suffix).
enum class Endpoint : uint8_t { kCompletions, kChatCompletions, kInfill };

// Request-shape limits. Defaults are the documented ones; the server takes them from flags.
struct RequestLimits {
  int max_json_depth = 64;             // nesting of [ / { in the body
  int32_t max_tokens_cap = 131072;     // max_tokens above this -> 400 (engine checks context)
  size_t max_stop_sequences = 16;      // entries in `stop`
  size_t max_stop_bytes = 1024;        // bytes per stop sequence
  size_t max_messages = 4096;          // entries in `messages`
  size_t max_tools = 256;              // entries in `tools` (and in `documents`)
  size_t max_name_bytes = 256;         // model, slo_class, user_role
  size_t max_detokenize_tokens = 1000000;  // entries in POST /detokenize's `tokens`
  size_t max_prompts = 64;             // prompts in a completions `prompt` array
  int32_t max_choices = 16;            // `n`; prompts x n at most max_choices_total
  int32_t max_choices_total = 64;
  size_t max_logit_bias = 1024;        // entries in `logit_bias`
  size_t max_prompt_token_ids = 1000000;  // ids in a token-id prompt
};

// --- The field table ----------------------------------------------------------------------
enum class JsonKind : uint8_t {
  kString,         // JSON string, length-limited
  kInteger,        // JSON integer (a float such as 1.0 is a type error)
  kNumber,         // any finite JSON number
  kBoolean,
  kCustom,         // structure checked by the field's own parser (prompt, messages, stop, ...)
};
// Which endpoints read a field: kAll (every generation endpoint), kText (completions and
// infill: the text-completion answer shape), or one endpoint.
enum class Applies : uint8_t { kAll, kText, kCompletionsOnly, kChatOnly, kInfillOnly };
enum class AboveMax : uint8_t { kReject, kClamp };

struct FieldSpec;
// Applies one present, non-null, type- and range-checked value to the request.
using FieldApplyFn = std::optional<ApiError> (*)(const FieldSpec& spec, const nlohmann::json& value,
                                                 const RequestLimits& limits,
                                                 GenerationRequest& out);

struct FieldSpec {
  std::string_view name;
  JsonKind kind;
  Applies applies;
  bool required;
  double min;            // numbers and integers; ignored for other kinds
  bool min_exclusive;
  double max;
  bool max_exclusive;
  AboveMax above_max;    // below min always rejects
  std::string_view doc;  // one line for generated docs
  FieldApplyFn apply;
};

std::span<const FieldSpec> RequestFields();

// Validates `content_type` (media type application/json, parameters allowed). 415 otherwise.
std::optional<ApiError> CheckContentType(std::optional<std::string_view> content_type);

// The body checks every JSON endpoint shares, in the order above: UTF-8, nesting depth, strict
// JSON without duplicate keys, a top-level object. On success `*out` is that object.
std::optional<ApiError> ParseJsonObject(std::string_view body, const RequestLimits& limits,
                                        nlohmann::json* out);

// Parses and validates `body` for `endpoint` into `out` (fields not set keep their defaults;
// request_id, model resolution and the timeline are left to the caller).
std::optional<ApiError> ParseGenerationRequest(std::string_view body, Endpoint endpoint,
                                               const RequestLimits& limits,
                                               GenerationRequest* out);

// One field every generation route shares (an Applies::kAll row of the table: model, user,
// slo_class, user_role, ...), read from `doc` and checked and applied exactly as
// ParseGenerationRequest does; absent or null leaves `out` as it is. For the routes whose
// bodies are not completions or chat (embeddings_api.h) but carry the same fields.
std::optional<ApiError> ApplySharedField(std::string_view name, const nlohmann::json& doc,
                                         const RequestLimits& limits, GenerationRequest* out);

// Resolves `requested` (empty = first model) against the engine's list; 404 model_not_found
// otherwise, 503 when no model is loaded. On success `*resolved` is the model id.
std::optional<ApiError> ResolveModel(const std::vector<ModelInfo>& models,
                                     std::string_view requested, std::string* resolved);

}  // namespace lifeline::api
