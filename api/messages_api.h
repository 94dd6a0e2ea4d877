// POST /v1/messages (Anthropic's Messages API) as a translation onto the chat path, like
// /v1/responses (responses_api.h): the body becomes a chat-completions body (MessagesToChat),
// served, timed and shed as chat; the chat answer becomes a `message` (ChatToMessage) and a
// chat stream the Messages event stream (MessagesStream).
//
// Request: `model`, `max_tokens` (required, as Anthropic requires it), `messages` (role user /
// assistant; content a string or blocks: `text`, `tool_use` {id, name, input}, `tool_result`
// {tool_use_id, content}), `system` (a string or text blocks), `temperature`, `top_p`, `top_k`,
// `stop_sequences`, `stream`, `tools` ([{name, description?, input_schema}]), `tool_choice`
// ({type: auto | any | tool (name) | none}), `thinking` ({type: enabled, budget_tokens} or
// {type: disabled}); `metadata` is accepted and not used. Other fields are a 400 naming them.
// Answer: content blocks `thinking`, `text`, `tool_use`; `stop_reason` end_turn, max_tokens,
// stop_sequence or tool_use; `usage` input / output tokens; Lifeline's `timings`.
//
// Thread-safety: pure functions; a MessagesStream belongs to one request.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_translation.h"
#include "api/errors.h"

namespace lifeline::api {

std::variant<nlohmann::json, ApiError> MessagesToChat(const nlohmann::json& body);
nlohmann::json ChatToMessage(const nlohmann::json& chat);

class MessagesStream final : public ApiTranslation {
 public:
  nlohmann::json Whole(const nlohmann::json& chat) const override { return ChatToMessage(chat); }
  std::vector<Event> Feed(const nlohmann::json& chunk) override;
  std::vector<Event> Finish() override;

 private:
  void Open(const std::string& kind, nlohmann::json block, std::vector<Event>* out);
  void Close(std::vector<Event>* out);

  bool started_ = false;
  int64_t index_ = -1;       // the open block's index (-1: none)
  std::string open_kind_;    // "text", "thinking", "tool_use"
  int64_t tool_index_ = -1;  // the chat tool call the open tool_use block streams
  bool saw_tool_use_ = false;
  std::string finish_reason_;
  nlohmann::json usage_, timings_;
};

}  // namespace lifeline::api
