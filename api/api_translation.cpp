#include "api/api_translation.h"

#include <algorithm>

#include "api/messages_api.h"
#include "api/responses_api.h"

namespace lifeline::api {

std::variant<nlohmann::json, ApiError> TranslateToChat(ApiShape shape,
                                                       const nlohmann::json& body) {
  return shape == ApiShape::kMessages ? MessagesToChat(body) : ResponsesToChat(body);
}

std::unique_ptr<ApiTranslation> MakeApiTranslation(ApiShape shape) {
  switch (shape) {
    case ApiShape::kResponses: return std::make_unique<ResponsesStream>();
    case ApiShape::kMessages: return std::make_unique<MessagesStream>();
    case ApiShape::kChat:
    case ApiShape::kEmbeddings:
    case ApiShape::kRerank:
      break;
  }
  return nullptr;
}

ApiError TranslatedFieldError(const std::string& param, const std::string& message,
                              const std::string& code) {
  return InvalidRequestError(param, "'" + param + "': " + message, code);
}

std::variant<std::string, ApiError> JoinedPartsText(const nlohmann::json& content,
                                                    const std::string& where,
                                                    std::initializer_list<std::string_view> types) {
  std::string accepted;
  for (std::string_view t : types) accepted += (accepted.empty() ? "" : ", ") + std::string(t);
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return TranslatedFieldError(where, "expected a string or an array of parts {type: " + accepted +
                                           ", text}");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const nlohmann::json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return TranslatedFieldError(at, "expected a part {type: " + accepted + ", text}");
    }
    const std::string& type = part["type"].get_ref<const std::string&>();
    if (std::find(types.begin(), types.end(), type) == types.end()) {
      return TranslatedFieldError(at + ".type", "'" + type + "' is not supported here (" + accepted + ")",
                                  "unsupported_value");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return TranslatedFieldError(at + ".text", "expected a string");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string TranslatedId(const nlohmann::json& chat, std::string_view prefix) {
  const std::string id = chat.value("id", std::string("chatcmpl-0"));
  const size_t dash = id.find('-');
  return std::string(prefix) + (dash == std::string::npos ? id : id.substr(dash + 1));
}

std::string NamedSseEvent(const std::string& name, const nlohmann::json& data) {
  return "event: " + name + "\ndata: " +
         data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace lifeline::api
