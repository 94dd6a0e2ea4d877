// What the translations share (responses_api.h: POST /v1/responses, messages_api.h:
// POST /v1/messages, both onto the chat path; embeddings_api.h: POST /v1/embeddings and
// /v1/rerank, onto the completions path): which API shape a generation request came in, the
// one interface the session streams and answers through (ApiTranslation), and the pieces the
// translations build from (a field error, an id in the API's own prefix, a named SSE event).
//
// Thread-safety: pure functions; a translation object belongs to one request.
#pragma once

#include <cstdint>
#include <memory>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace lifeline::api {

// The shape a generation request was sent in. kResponses and kMessages are translated onto
// chat; kEmbeddings and kRerank are parsed by embeddings_api.h into a completions-style
// request (one prompt per input / document) whose answer carries vectors, not text.
enum class ApiShape : uint8_t { kChat, kResponses, kMessages, kEmbeddings, kRerank };

// One request's answer in its API's shape, from the chat path's answer and stream.
class ApiTranslation {
 public:
  using Event = std::pair<std::string, nlohmann::json>;  // event name, data
  virtual ~ApiTranslation() = default;
  // A whole chat.completion body (with Lifeline's `timings`) as the API's answer (for
  // kEmbeddings / kRerank: a text_completion body whose choices carry `embedding`).
  virtual nlohmann::json Whole(const nlohmann::json& chat) const = 0;
  // Events for one chat chunk (a final chunk with finish_reason / usage / timings included).
  virtual std::vector<Event> Feed(const nlohmann::json& chunk) = 0;
  // The closing events (once, after the last chunk).
  virtual std::vector<Event> Finish() = 0;
};

// The chat-completions body for a body sent in `shape` (kResponses or kMessages); a 400
// names the field.
std::variant<nlohmann::json, ApiError> TranslateToChat(ApiShape shape, const nlohmann::json& body);
// The answer's translation for `shape`; nullptr for kChat, and for kEmbeddings / kRerank,
// whose translation depends on the request (dimensions, top_n, ...) and so is made where
// the body is parsed, on the prep thread (ParsePoolingRequest, embeddings_api.h).
std::unique_ptr<ApiTranslation> MakeApiTranslation(ApiShape shape);

// A 400 naming `param`: "'param': message".
ApiError TranslatedFieldError(const std::string& param, const std::string& message,
                              const std::string& code = "invalid_value");
// The text of a message's content: a string, or an array of parts {type, text} whose type is
// one of `types` (their texts joined). Refusals name the part: `<where>[i]`, `.type` (listing
// the accepted types), `.text`.
std::variant<std::string, ApiError> JoinedPartsText(const nlohmann::json& content,
                                                    const std::string& where,
                                                    std::initializer_list<std::string_view> types);
// The chat answer's id ("chatcmpl-XYZ") under the API's prefix ("resp_XYZ", "msg_XYZ").
std::string TranslatedId(const nlohmann::json& chat, std::string_view prefix);
// One SSE event with its name: "event: NAME\ndata: JSON\n\n".
std::string NamedSseEvent(const std::string& name, const nlohmann::json& data);

}  // namespace lifeline::api
