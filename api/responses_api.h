// POST /v1/responses (OpenAI's Responses API, stateless) as a translation onto the chat path:
// the request body becomes a chat-completions body (ResponsesToChat), which is validated,
// admitted, served, timed and shed exactly as a chat request (same SLO classes, errors and
// timings); the chat answer becomes a response object (ChatToResponse), and a chat stream
// becomes the Responses event stream (ResponsesStream).
//
// Request: `model`, `input` (a string, or an array of items: messages {role, content: string
// or [{type: input_text | output_text, text}]} with role user / assistant / system / developer,
// `function_call` {call_id, name, arguments} and `function_call_output` {call_id, output}),
// `instructions` (a system message first), `max_output_tokens`, `temperature`, `top_p`,
// `stream`, `tools` ([{type: "function", name, description?, parameters, strict?}]),
// `tool_choice` ("auto" | "none" | "required" | {type: "function", name}),
// `parallel_tool_calls`, `reasoning` ({effort}), `seed`; `store` false or absent, `metadata`
// and `user` are accepted and not used (nothing is stored: `previous_response_id` is a 400).
// Any other field is a 400 naming it, as on the chat path.
//
// Thread-safety: pure functions; a ResponsesStream belongs to one request.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_translation.h"
#include "api/errors.h"

namespace lifeline::api {

// The chat-completions body for a Responses request; an ApiError (400) names the field.
std::variant<nlohmann::json, ApiError> ResponsesToChat(const nlohmann::json& body);

// A chat.completion body (with Lifeline's `timings`) as a `response` object.
nlohmann::json ChatToResponse(const nlohmann::json& chat);

// The Responses event stream of one streamed request, from its chat chunks: response.created,
// then per output item its added / delta / done events, then response.completed (or
// response.incomplete when max_output_tokens cut it) carrying the whole response object.
class ResponsesStream final : public ApiTranslation {
 public:
  nlohmann::json Whole(const nlohmann::json& chat) const override { return ChatToResponse(chat); }
  std::vector<Event> Feed(const nlohmann::json& chunk) override;
  std::vector<Event> Finish() override;

 private:
  Event Make(const std::string& type, nlohmann::json data);
  void Start(const nlohmann::json& chunk, std::vector<Event>* out);
  void CloseMessage(std::vector<Event>* out);
  void CloseCall(std::vector<Event>* out);
  nlohmann::json ResponseObject(const std::string& status) const;

  bool started_ = false;
  int64_t sequence_ = 0;
  std::string id_, model_;
  int64_t created_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // finished items
  // The item being streamed: a message (text) or a function call (index into tool calls).
  bool message_open_ = false;
  std::string text_;
  bool call_open_ = false;
  int64_t call_index_ = -1;
  nlohmann::json call_;
  std::string finish_reason_;
  nlohmann::json usage_, timings_;
};


}  // namespace lifeline::api
