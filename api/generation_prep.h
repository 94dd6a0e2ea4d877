// What a prep thread (prep_pool.h) does for a request whose cost grows with its body: a
// generation request is parsed, validated and submitted (ServingApi::Submit renders the chat
// template, tokenizes, compiles a grammar or JSON schema and decides admission), and
// POST /apply-template renders the same prompt. /tokenize and /detokenize are
// token_endpoints.h's. Nothing here touches a socket: the connection hands over a copy of
// what the request said and gets a PrepOutcome or an HttpResponse back on its strand.
//
// Ownership: pure functions over borrowed input. Thread-safety: any thread (ServingApi's
// methods are thread-safe). Failure: refusals are ApiErrors in the outcome; an exception
// from a dependency (e.g. bad_alloc) becomes a 500 for this request only, and once Submit
// has accepted the request it stays accepted (its events answer it as always).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_translation.h"
#include "api/serving_api.h"
#include "api/http_message.h"
#include "api/openai.h"
#include "api/pending_submit.h"

namespace lifeline::api {

// What a generation request carries from the connection to the prep thread.
struct GenerationInput {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string body;
  std::optional<std::string> slo_class_header;  // X-SLO-Class: overrides the body's
  std::optional<std::string> user_role_header;  // X-User-Role: likewise
  RequestTimeline timeline;                     // as far as the connection has seen it
  std::string request_id;                       // the client's X-Request-Id, else response_id
  std::string response_id;                      // the body's "id" (cmpl-... / chatcmpl-...)
  uint64_t serial = 0;                          // the connection's exchange number
  GenerationSink sink;                          // where the engine's events go
  std::string reasoning_field = "reasoning_content";  // ServerOptions::reasoning_field
  // POST /v1/responses or /v1/messages: `body` is in that API's shape, translated onto a chat
  // body here, on the prep thread (parsing up to a MiB of JSON is the I/O thread's to avoid
  // too). POST /v1/embeddings or /v1/rerank: `body` is parsed by embeddings_api.h onto a
  // completions-style request, and the outcome carries the answer's translation.
  ApiShape shape = ApiShape::kChat;
};

// Parses and validates the body, resolves the model and calls engine.Submit: the same steps,
// in the same order, as before they moved off the I/O thread. `validated` is stamped just before
// Submit. An embeddings / rerank request is also checked against the resolved model
// (PoolingTranslation::CheckModel) before Submit.
PrepOutcome PrepareGeneration(ServingApi& engine, const RequestLimits& limits,
                              GenerationInput input);

// POST /apply-template: a chat-completions body in, {"prompt": "..."} out (llama.cpp's
// shape). Validated exactly as a chat request; nothing is queued or generated.
HttpResponse ApplyTemplateResponse(const ServingApi& engine,
                                   std::optional<std::string_view> content_type,
                                   std::string_view body, const RequestLimits& limits);

}  // namespace lifeline::api
