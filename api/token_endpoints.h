// POST /tokenize and POST /detokenize, llama.cpp's shapes:
//   /tokenize   {"model"?, "content": string, "add_special"?: bool (false),
//                "parse_special"?: bool (true)}           -> {"tokens": [ids...]}
//   /detokenize {"model"?, "tokens": [ids...]}             -> {"content": "..."}
// The body passes the same checks as every JSON endpoint (openai.h: Content-Type, UTF-8,
// depth, strict JSON, an object); `content` is bounded by max_body_bytes, `tokens` by
// RequestLimits::max_detokenize_tokens and must hold integers in [0, 2^31) (the engine checks
// them against its vocabulary). Unknown fields are ignored; null means "default" (a null
// `content` / `tokens` is missing). The session runs these on a prep thread (prep_pool.h), not
// the I/O thread; the engine queues nothing for them.
//
// Ownership: pure functions over borrowed input. Thread-safety: no shared state (the engine's
// Tokenize / Detokenize are thread-safe). Failure: 400 naming the field, 404 for an unknown
// model, 415 for the Content-Type; the engine's own errors are passed through.
#pragma once

#include <optional>
#include <string_view>

#include "api/serving_api.h"
#include "api/http_message.h"
#include "api/openai.h"

namespace lifeline::api {

// `model` is left as sent ("" = none); the caller resolves it.
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out);
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out);

// The whole exchange: checks, model resolution against engine.Models(), the engine call, the
// 200 body or the error response.
HttpResponse TokenizeResponse(const ServingApi& engine,
                              std::optional<std::string_view> content_type,
                              std::string_view body, const RequestLimits& limits);
HttpResponse DetokenizeResponse(const ServingApi& engine,
                                std::optional<std::string_view> content_type,
                                std::string_view body, const RequestLimits& limits);

}  // namespace lifeline::api
