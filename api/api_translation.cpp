#include "api/api_translation.h"

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
    case ApiShape::kChat: break;
  }
  return nullptr;
}

ApiError TranslatedFieldError(const std::string& param, const std::string& message,
                              const std::string& code) {
  return InvalidRequestError(param, "'" + param + "': " + message, code);
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
