#include "api/token_endpoints.h"

#include <limits>
#include <string>

namespace lifeline::api {

namespace {

using json = nlohmann::json;

// The value as sent, shortened so a long string cannot bloat the error message.
std::string Echo(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMaxEcho = 64;
  if (s.size() > kMaxEcho) s = s.substr(0, kMaxEcho) + "...";
  return s;
}

ApiError TypeError(const std::string& param, std::string_view expected, const json& value) {
  return InvalidRequestError(param,
                             "'" + param + "' must be " + std::string(expected) + ", got " +
                                 value.type_name() + " " + Echo(value),
                             "invalid_type");
}

// Present and not null (null means "default", as in the generation endpoints).
const json* Field(const json& doc, const char* name) {
  auto it = doc.find(name);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> Missing(const char* name) {
  return InvalidRequestError(name, std::string("missing required parameter '") + name + "'",
                             "missing_required_parameter");
}

std::optional<ApiError> ParseModel(const json& doc, const RequestLimits& limits,
                                   std::string* out) {
  const json* v = Field(doc, "model");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return TypeError("model", "a string", *v);
  const std::string& s = v->get_ref<const std::string&>();
  if (s.empty() || s.size() > limits.max_name_bytes) {
    return InvalidRequestError("model",
                               "'model' is " + std::to_string(s.size()) + " bytes; allowed 1.." +
                                   std::to_string(limits.max_name_bytes),
                               "out_of_range");
  }
  *out = s;
  return std::nullopt;
}

std::optional<ApiError> ParseBool(const json& doc, const char* name, bool* out) {
  const json* v = Field(doc, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return TypeError(name, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out) {
  json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return err;
  if (auto err = ParseModel(doc, limits, &out->model)) return err;
  const json* content = Field(doc, "content");
  if (content == nullptr) return Missing("content");
  if (!content->is_string()) return TypeError("content", "a string", *content);
  out->content = content->get<std::string>();
  if (auto err = ParseBool(doc, "add_special", &out->add_special)) return err;
  if (auto err = ParseBool(doc, "parse_special", &out->parse_special)) return err;
  return std::nullopt;
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out) {
  json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return err;
  if (auto err = ParseModel(doc, limits, &out->model)) return err;
  const json* tokens = Field(doc, "tokens");
  if (tokens == nullptr) return Missing("tokens");
  if (!tokens->is_array()) return TypeError("tokens", "an array of token ids", *tokens);
  if (tokens->size() > limits.max_detokenize_tokens) {
    return InvalidRequestError("tokens",
                               "'tokens' has " + std::to_string(tokens->size()) +
                                   " entries; at most max_detokenize_tokens = " +
                                   std::to_string(limits.max_detokenize_tokens),
                               "out_of_range");
  }
  constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
  out->tokens.clear();
  out->tokens.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& t = (*tokens)[i];
    const std::string param = "tokens[" + std::to_string(i) + "]";
    if (!t.is_number_integer()) return TypeError(param, "an integer token id", t);
    // Unsigned values above int64 would wrap in get<int64_t>(); they are out of range anyway.
    const bool too_big = t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t{kMaxId}
                                                : t.get<int64_t>() > kMaxId;
    if (too_big || (!t.is_number_unsigned() && t.get<int64_t>() < 0)) {
      return InvalidRequestError(param,
                                 "'" + param + "' is " + Echo(t) +
                                     "; token ids are integers in [0, " + std::to_string(kMaxId) +
                                     "]",
                                 "out_of_range");
    }
    out->tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

HttpResponse TokenizeResponse(const ServingApi& engine,
                              std::optional<std::string_view> content_type,
                              std::string_view body, const RequestLimits& limits) {
  if (auto err = CheckContentType(content_type)) return ErrorResponse(*err);
  TokenizeRequest request;
  if (auto err = ParseTokenizeRequest(body, limits, &request)) return ErrorResponse(*err);
  if (auto err = ResolveModel(engine.Models(), request.model, &request.model)) {
    return ErrorResponse(*err);
  }
  auto tokens = engine.Tokenize(request);
  if (auto* err = std::get_if<ApiError>(&tokens)) return ErrorResponse(*err);
  return JsonResponse(200, {{"tokens", std::get<std::vector<int32_t>>(tokens)}});
}

HttpResponse DetokenizeResponse(const ServingApi& engine,
                                std::optional<std::string_view> content_type,
                                std::string_view body, const RequestLimits& limits) {
  if (auto err = CheckContentType(content_type)) return ErrorResponse(*err);
  DetokenizeRequest request;
  if (auto err = ParseDetokenizeRequest(body, limits, &request)) return ErrorResponse(*err);
  if (auto err = ResolveModel(engine.Models(), request.model, &request.model)) {
    return ErrorResponse(*err);
  }
  auto text = engine.Detokenize(request);
  if (auto* err = std::get_if<ApiError>(&text)) return ErrorResponse(*err);
  // DumpJson (inside JsonResponse) replaces bytes that are not UTF-8, e.g. half a character.
  return JsonResponse(200, {{"content", std::get<std::string>(text)}});
}

}  // namespace lifeline::api
