#include "server/openai.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "server/json_guard.h"

namespace lifeline::server {

using json = nlohmann::json;

// --- Errors -------------------------------------------------------------------------------

ApiError InvalidRequestError(std::string param, std::string message, std::string code) {
  return ApiError{400, "invalid_request_error", std::move(code), std::move(message),
                  std::move(param), 0};
}

ApiError NotFoundError(std::string param, std::string message, std::string code) {
  return ApiError{404, "not_found_error", std::move(code), std::move(message), std::move(param),
                  0};
}

ApiError UnavailableError(std::string message, std::string code, int retry_after_s) {
  return ApiError{503, "unavailable", std::move(code), std::move(message), "", retry_after_s};
}

ApiError InternalError(std::string message) {
  return ApiError{500, "internal_error", "internal_error", std::move(message), "", 0};
}

json ErrorJson(const ApiError& e) {
  json inner = json::object();
  inner["message"] = e.message;
  inner["type"] = e.type;
  inner["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  inner["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", std::move(inner)}};
}

namespace {

// --- Small helpers ------------------------------------------------------------------------

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Prefer the short form when it round-trips (2 rather than 2.0000000000000000).
  char shorter[64];
  std::snprintf(shorter, sizeof shorter, "%g", v);
  return std::strtod(shorter, nullptr) == v ? shorter : buf;
}

// The value as the client wrote it, shortened so a 1 MiB string cannot bloat the error.
std::string Echo(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMaxEcho = 64;
  if (s.size() > kMaxEcho) s = s.substr(0, kMaxEcho) + "...";
  return s;
}

std::string RangeText(const FieldSpec& spec) {
  return std::string(spec.min_exclusive ? "(" : "[") + FormatNumber(spec.min) + ", " +
         FormatNumber(spec.max) + (spec.max_exclusive ? ")" : "]");
}

ApiError TypeError(std::string_view param, std::string_view expected, const json& value) {
  return InvalidRequestError(std::string(param),
                             "'" + std::string(param) + "' must be " + std::string(expected) +
                                 ", got " + value.type_name() + " " + Echo(value),
                             "invalid_type");
}

bool BelowMin(const FieldSpec& s, double v) { return s.min_exclusive ? v <= s.min : v < s.min; }
bool AboveMaxBound(const FieldSpec& s, double v) {
  return s.max_exclusive ? v >= s.max : v > s.max;
}

ApiError RangeError(const FieldSpec& spec, const json& value) {
  return InvalidRequestError(std::string(spec.name),
                             "'" + std::string(spec.name) + "' is " + Echo(value) +
                                 ", outside the allowed range " + RangeText(spec),
                             "out_of_range");
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}

// --- Field appliers -----------------------------------------------------------------------

std::optional<ApiError> ApplyModel(const FieldSpec&, const json& v, const RequestLimits&,
                                   GenerationRequest& out) {
  out.model = v.get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ApplyPrompt(const FieldSpec& spec, const json& v, const RequestLimits&,
                                    GenerationRequest& out) {
  if (v.is_string()) {
    out.prompt = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    out.prompt = v[0].get<std::string>();
    return std::nullopt;
  }
  if (v.is_array()) {
    return InvalidRequestError("prompt",
                               "'prompt' as an array must hold exactly one string (batched and "
                               "token-id prompts are not supported); got " +
                                   std::to_string(v.size()) + " element(s)",
                               "unsupported_value");
  }
  return TypeError(spec.name, "a string or an array of one string", v);
}

std::optional<ApiError> ParseContent(const json& content, const std::string& role,
                                     const std::string& param, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (content.is_null() && role == "assistant") return std::nullopt;
  if (!content.is_array()) return TypeError(param, "a string or an array of text parts", content);
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string p = param + "[" + std::to_string(j) + "]";
    if (!part.is_object()) return TypeError(p, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text") {
      return InvalidRequestError(p + ".type", "only content parts of type \"text\" are supported",
                                 "unsupported_value");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      return TypeError(p + ".text", "a string", text == part.end() ? json(nullptr) : *text);
    }
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyMessages(const FieldSpec& spec, const json& v,
                                      const RequestLimits& limits, GenerationRequest& out) {
  if (!v.is_array()) return TypeError(spec.name, "an array of message objects", v);
  if (v.empty() || v.size() > limits.max_messages) {
    return InvalidRequestError("messages",
                               "'messages' has " + std::to_string(v.size()) +
                                   " entries; allowed 1.." + std::to_string(limits.max_messages),
                               "out_of_range");
  }
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant",
                                               "tool"};
  out.messages.clear();
  out.messages.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return TypeError(p, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return TypeError(p + ".role", "a string", role == m.end() ? json(nullptr) : *role);
    }
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (!kRoles.contains(msg.role)) {
      return InvalidRequestError(p + ".role",
                                 "'" + p + ".role' is " + Echo(*role) +
                                     "; allowed: system, developer, user, assistant, tool");
    }
    auto content = m.find("content");
    const json null_content;
    if (auto err = ParseContent(content == m.end() ? null_content : *content, msg.role,
                                p + ".content", &msg.content)) {
      return err;
    }
    out.messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

// tools / documents: arrays of objects; what they hold is the template's business (real
// templates read function.name / description / parameters, documents' title / text).
std::optional<ApiError> ApplyObjectArray(const FieldSpec& spec, const json& v,
                                         const RequestLimits& limits, GenerationRequest&) {
  const std::string name(spec.name);
  if (!v.is_array()) return TypeError(name, "an array of objects", v);
  if (v.size() > limits.max_tools) {
    return InvalidRequestError(name,
                               "'" + name + "' has " + std::to_string(v.size()) +
                                   " entries; at most " + std::to_string(limits.max_tools),
                               "out_of_range");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_object()) return TypeError(name + "[" + std::to_string(i) + "]", "an object", v[i]);
  }
  if (name == "tools") {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      auto type = v[i].find("type");
      if (type == v[i].end() || *type != "function") {
        return InvalidRequestError(p + ".type", "'" + p + ".type' must be \"function\"",
                                   "unsupported_value");
      }
      auto fn = v[i].find("function");
      if (fn == v[i].end() || !fn->is_object()) {
        return TypeError(p + ".function", "an object", fn == v[i].end() ? json(nullptr) : *fn);
      }
      auto fname = fn->find("name");
      if (fname == fn->end() || !fname->is_string() || fname->get_ref<const std::string&>().empty()) {
        return TypeError(p + ".function.name", "a non-empty string",
                         fname == fn->end() ? json(nullptr) : *fname);
      }
    }
  }
  return std::nullopt;
}

// The globals a chat template gets from the server; chat_template_kwargs cannot rebind them.
constexpr std::string_view kTemplateOwnGlobals[] = {"messages", "tools", "documents",
                                                    "add_generation_prompt", "bos_token",
                                                    "eos_token"};

std::optional<ApiError> ApplyTemplateKwargs(const FieldSpec& spec, const json& v,
                                            const RequestLimits&, GenerationRequest&) {
  if (!v.is_object()) return TypeError(spec.name, "an object", v);
  for (auto it = v.begin(); it != v.end(); ++it) {
    for (std::string_view own : kTemplateOwnGlobals) {
      if (it.key() == own) {
        return InvalidRequestError("chat_template_kwargs." + it.key(),
                                   "'chat_template_kwargs." + it.key() +
                                       "' is set by the server; it cannot be overridden",
                                   "unsupported_value");
      }
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyAddGenerationPrompt(const FieldSpec&, const json& v,
                                                 const RequestLimits&, GenerationRequest& out) {
  out.add_generation_prompt = v.get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ApplyMaxTokens(const FieldSpec& spec, const json& v,
                                       const RequestLimits& limits, GenerationRequest& out) {
  const int64_t n = v.get<int64_t>();
  if (n > limits.max_tokens_cap) {
    return InvalidRequestError(std::string(spec.name),
                               "'" + std::string(spec.name) + "' is " + std::to_string(n) +
                                   ", above the server cap of " +
                                   std::to_string(limits.max_tokens_cap),
                               "out_of_range");
  }
  if (out.max_tokens && *out.max_tokens != n) {
    return InvalidRequestError(std::string(spec.name),
                               "'max_tokens' and 'max_completion_tokens' disagree (" +
                                   std::to_string(*out.max_tokens) + " vs " + std::to_string(n) +
                                   ")");
  }
  out.max_tokens = static_cast<int32_t>(n);
  return std::nullopt;
}

template <double SamplingFields::*Member>
std::optional<ApiError> ApplyDouble(const FieldSpec&, const json& v, const RequestLimits&,
                                    GenerationRequest& out) {
  out.sampling.*Member = v.get<double>();
  return std::nullopt;
}

std::optional<ApiError> ApplyTopK(const FieldSpec&, const json& v, const RequestLimits&,
                                  GenerationRequest& out) {
  out.sampling.top_k = static_cast<int32_t>(v.get<int64_t>());
  return std::nullopt;
}

std::optional<ApiError> ApplySeed(const FieldSpec&, const json& v, const RequestLimits&,
                                  GenerationRequest& out) {
  out.sampling.seed = v.get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> ApplyStop(const FieldSpec& spec, const json& v,
                                  const RequestLimits& limits, GenerationRequest& out) {
  std::vector<std::string> stops;
  if (v.is_string()) {
    stops.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > limits.max_stop_sequences) {
      return InvalidRequestError("stop",
                                 "'stop' has " + std::to_string(v.size()) +
                                     " sequences; at most " +
                                     std::to_string(limits.max_stop_sequences) + " allowed",
                                 "out_of_range");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return TypeError("stop[" + std::to_string(i) + "]", "a string", v[i]);
      stops.push_back(v[i].get<std::string>());
    }
  } else {
    return TypeError(spec.name, "a string or an array of strings", v);
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty() || stops[i].size() > limits.max_stop_bytes) {
      const std::string p = v.is_array() ? "stop[" + std::to_string(i) + "]" : "stop";
      return InvalidRequestError(p,
                                 "'" + p + "' is " + std::to_string(stops[i].size()) +
                                     " bytes; allowed 1.." +
                                     std::to_string(limits.max_stop_bytes),
                                 "out_of_range");
    }
  }
  out.stop = std::move(stops);
  return std::nullopt;
}

std::optional<ApiError> ApplyStream(const FieldSpec&, const json& v, const RequestLimits&,
                                    GenerationRequest& out) {
  out.stream = v.get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ApplyStreamOptions(const FieldSpec& spec, const json& v,
                                           const RequestLimits&, GenerationRequest& out) {
  if (!v.is_object()) return TypeError(spec.name, "an object", v);
  auto it = v.find("include_usage");
  if (it != v.end() && !it->is_null()) {
    if (!it->is_boolean()) return TypeError("stream_options.include_usage", "a boolean", *it);
    out.include_usage = it->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyIgnoreEos(const FieldSpec&, const json& v, const RequestLimits&,
                                       GenerationRequest& out) {
  out.ignore_eos = v.get<bool>();
  return std::nullopt;
}

// n / best_of: only one choice per request is generated.
std::optional<ApiError> ApplyOnlyOne(const FieldSpec& spec, const json& v, const RequestLimits&,
                                     GenerationRequest&) {
  if (v.get<int64_t>() != 1) {
    return InvalidRequestError(std::string(spec.name),
                               "'" + std::string(spec.name) + "' is " + Echo(v) +
                                   "; only 1 is supported",
                               "unsupported_value");
  }
  return std::nullopt;
}

// logprobs / top_logprobs / echo: accepted only in their "off" form.
std::optional<ApiError> ApplyOff(const FieldSpec& spec, const json& v, const RequestLimits&,
                                 GenerationRequest&) {
  const bool off = (v.is_boolean() && !v.get<bool>()) ||
                   (v.is_number_integer() && v.get<int64_t>() == 0);
  if (!v.is_boolean() && !v.is_number_integer()) {
    return TypeError(spec.name, "a boolean or an integer", v);
  }
  if (!off) {
    return InvalidRequestError(std::string(spec.name),
                               "'" + std::string(spec.name) + "' is " + Echo(v) +
                                   "; it is not supported (send false, 0 or omit it)",
                               "unsupported_value");
  }
  return std::nullopt;
}

template <std::string GenerationRequest::*Member>
std::optional<ApiError> ApplyName(const FieldSpec& spec, const json& v, const RequestLimits&,
                                  GenerationRequest& out) {
  const std::string s = v.get<std::string>();
  for (char c : s) {
    if (!IsNameChar(c)) {
      return InvalidRequestError(std::string(spec.name),
                                 "'" + std::string(spec.name) + "' is " + Echo(v) +
                                     "; allowed characters are A-Z a-z 0-9 _ - .");
    }
  }
  out.*Member = s;
  return std::nullopt;
}

std::optional<ApiError> ApplyDeadline(const FieldSpec&, const json& v, const RequestLimits&,
                                      GenerationRequest& out) {
  out.deadline_ms = v.get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> ApplyAllowContextTrim(const FieldSpec&, const json& v,
                                              const RequestLimits&, GenerationRequest& out) {
  out.allow_context_trim = v.get<bool>();
  return std::nullopt;
}

constexpr double kI32Max = 2147483647.0;
constexpr double kI64Min = -9223372036854775808.0;
constexpr double kI64Max = 9223372036854775807.0;  // rounds to 2^63; values above fail as uint

using SF = SamplingFields;
// The table. min/max bound numbers, integers and string lengths in bytes.
const FieldSpec kFields[] = {
    {"model", JsonKind::kString, Applies::kBoth, false, 1, false, 256, false, AboveMax::kReject,
     "model id from GET /v1/models; default: the first model", &ApplyModel},
    {"prompt", JsonKind::kCustom, Applies::kCompletionsOnly, true, 0, false, 0, false,
     AboveMax::kReject, "string, or an array holding one string", &ApplyPrompt},
    {"messages", JsonKind::kCustom, Applies::kChatOnly, true, 0, false, 0, false,
     AboveMax::kReject, "array of {role, content}; content is a string or text parts",
     &ApplyMessages},
    {"max_tokens", JsonKind::kInteger, Applies::kBoth, false, 1, false, kI32Max, false,
     AboveMax::kReject, "tokens to generate, 1..max_tokens_cap", &ApplyMaxTokens},
    {"max_completion_tokens", JsonKind::kInteger, Applies::kBoth, false, 1, false, kI32Max, false,
     AboveMax::kReject, "alias of max_tokens; must agree when both are sent", &ApplyMaxTokens},
    {"temperature", JsonKind::kNumber, Applies::kBoth, false, 0, false, 2, false,
     AboveMax::kReject, "0 = greedy", &ApplyDouble<&SF::temperature>},
    {"top_p", JsonKind::kNumber, Applies::kBoth, false, 0, true, 1, false, AboveMax::kReject,
     "nucleus mass", &ApplyDouble<&SF::top_p>},
    {"top_k", JsonKind::kInteger, Applies::kBoth, false, 0, false, 1000000, false,
     AboveMax::kClamp, "0 disables; above the cap means 'all' and is clamped", &ApplyTopK},
    {"min_p", JsonKind::kNumber, Applies::kBoth, false, 0, false, 1, false, AboveMax::kReject,
     "relative probability floor", &ApplyDouble<&SF::min_p>},
    {"seed", JsonKind::kInteger, Applies::kBoth, false, kI64Min, false, kI64Max, false,
     AboveMax::kReject, "int64 RNG seed", &ApplySeed},
    {"stop", JsonKind::kCustom, Applies::kBoth, false, 0, false, 0, false, AboveMax::kReject,
     "string or array of <= 16 strings, each 1..1024 bytes", &ApplyStop},
    {"presence_penalty", JsonKind::kNumber, Applies::kBoth, false, -2, false, 2, false,
     AboveMax::kReject, "", &ApplyDouble<&SF::presence_penalty>},
    {"frequency_penalty", JsonKind::kNumber, Applies::kBoth, false, -2, false, 2, false,
     AboveMax::kReject, "", &ApplyDouble<&SF::frequency_penalty>},
    {"repeat_penalty", JsonKind::kNumber, Applies::kBoth, false, 0, true, 10, false,
     AboveMax::kReject, "1 disables", &ApplyDouble<&SF::repeat_penalty>},
    {"stream", JsonKind::kBoolean, Applies::kBoth, false, 0, false, 0, false, AboveMax::kReject,
     "server-sent events", &ApplyStream},
    {"stream_options", JsonKind::kCustom, Applies::kBoth, false, 0, false, 0, false,
     AboveMax::kReject, "{include_usage: bool}; only with stream=true", &ApplyStreamOptions},
    {"ignore_eos", JsonKind::kBoolean, Applies::kBoth, false, 0, false, 0, false,
     AboveMax::kReject, "keep generating past end-of-sequence", &ApplyIgnoreEos},
    {"n", JsonKind::kInteger, Applies::kBoth, false, kI64Min, false, kI64Max, false,
     AboveMax::kReject, "choices per request; only 1", &ApplyOnlyOne},
    {"best_of", JsonKind::kInteger, Applies::kCompletionsOnly, false, kI64Min, false, kI64Max,
     false, AboveMax::kReject, "only 1", &ApplyOnlyOne},
    {"logprobs", JsonKind::kCustom, Applies::kBoth, false, 0, false, 0, false, AboveMax::kReject,
     "not supported: false/0 only", &ApplyOff},
    {"top_logprobs", JsonKind::kCustom, Applies::kBoth, false, 0, false, 0, false,
     AboveMax::kReject, "not supported: 0 only", &ApplyOff},
    {"echo", JsonKind::kCustom, Applies::kCompletionsOnly, false, 0, false, 0, false,
     AboveMax::kReject, "not supported: false only", &ApplyOff},
    {"slo_class", JsonKind::kString, Applies::kBoth, false, 1, false, 64, false,
     AboveMax::kReject, "latency class name", &ApplyName<&GenerationRequest::slo_class>},
    {"user_role", JsonKind::kString, Applies::kBoth, false, 1, false, 64, false,
     AboveMax::kReject, "role whose multiplier scales the class budget",
     &ApplyName<&GenerationRequest::user_role>},
    {"deadline_ms", JsonKind::kInteger, Applies::kBoth, false, 1, false, 3600000, false,
     AboveMax::kReject, "end-to-end deadline from arrival", &ApplyDeadline},
    {"tools", JsonKind::kCustom, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "array of {type: \"function\", function: {name, ...}}; shown to the "
     "model through its chat template", &ApplyObjectArray},
    {"documents", JsonKind::kCustom, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "array of objects for templates with a documents (RAG) section",
     &ApplyObjectArray},
    {"chat_template_kwargs", JsonKind::kCustom, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "extra template variables, e.g. {\"enable_thinking\": false}",
     &ApplyTemplateKwargs},
    {"add_generation_prompt", JsonKind::kBoolean, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "end the prompt with the assistant turn's opener (default true)",
     &ApplyAddGenerationPrompt},
    // Accepted on both endpoints so one body works for either; completions are never trimmed.
    {"allow_context_trim", JsonKind::kBoolean, Applies::kBoth, false, 0, false, 0, false,
     AboveMax::kReject, "chat: old turns may be dropped under SLO pressure (level >= 2)",
     &ApplyAllowContextTrim},
};

bool AppliesTo(const FieldSpec& spec, Endpoint endpoint) {
  switch (spec.applies) {
    case Applies::kBoth:
      return true;
    case Applies::kCompletionsOnly:
      return endpoint == Endpoint::kCompletions;
    case Applies::kChatOnly:
      return endpoint == Endpoint::kChatCompletions;
  }
  return false;
}

// Generic type and range check. On kClamp, `*clamped` receives the clamped value and
// `*use_clamped` is set.
std::optional<ApiError> CheckKind(const FieldSpec& spec, const json& v, json* clamped,
                                  bool* use_clamped) {
  *use_clamped = false;
  switch (spec.kind) {
    case JsonKind::kString: {
      if (!v.is_string()) return TypeError(spec.name, "a string", v);
      const size_t n = v.get_ref<const std::string&>().size();
      if (n < spec.min || n > spec.max) {
        return InvalidRequestError(std::string(spec.name),
                                   "'" + std::string(spec.name) + "' is " + std::to_string(n) +
                                       " bytes; allowed " + FormatNumber(spec.min) + ".." +
                                       FormatNumber(spec.max),
                                   "out_of_range");
      }
      return std::nullopt;
    }
    case JsonKind::kInteger: {
      if (!v.is_number_integer()) return TypeError(spec.name, "an integer", v);
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return RangeError(spec, v);
      }
      const double d = static_cast<double>(v.get<int64_t>());
      if (BelowMin(spec, d)) return RangeError(spec, v);
      if (AboveMaxBound(spec, d)) {
        if (spec.above_max == AboveMax::kReject) return RangeError(spec, v);
        *clamped = static_cast<int64_t>(spec.max);
        *use_clamped = true;
      }
      return std::nullopt;
    }
    case JsonKind::kNumber: {
      if (!v.is_number()) return TypeError(spec.name, "a number", v);
      const double d = v.get<double>();
      if (!std::isfinite(d) || BelowMin(spec, d)) return RangeError(spec, v);
      if (AboveMaxBound(spec, d)) {
        if (spec.above_max == AboveMax::kReject) return RangeError(spec, v);
        *clamped = spec.max;
        *use_clamped = true;
      }
      return std::nullopt;
    }
    case JsonKind::kBoolean:
      if (!v.is_boolean()) return TypeError(spec.name, "a boolean", v);
      return std::nullopt;
    case JsonKind::kCustom:
      return std::nullopt;
  }
  return std::nullopt;
}

// Strict parse with a duplicate-key check (nlohmann would keep the last one silently, and
// two different values for e.g. `max_tokens` hide intent).
std::optional<ApiError> ParseJsonStrict(std::string_view body, json* out) {
  std::vector<std::set<std::string>> scopes;  // keys seen, one set per open object
  bool duplicate = false;
  std::string duplicate_key;
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        scopes.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!scopes.empty()) scopes.pop_back();
        break;
      case json::parse_event_t::key:
        if (!scopes.empty() && parsed.is_string() &&
            !scopes.back().insert(parsed.get<std::string>()).second && !duplicate) {
          duplicate = true;
          duplicate_key = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  *out = json::parse(body.begin(), body.end(), cb, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    return InvalidRequestError("", "request body is not valid JSON", "invalid_json");
  }
  if (duplicate) {
    return InvalidRequestError(duplicate_key, "duplicate key '" + duplicate_key + "' in request",
                               "duplicate_key");
  }
  return std::nullopt;
}

// The template's inputs keep the client's key order (tojson and dict iteration show it, as
// in Python), so they come from a second, ordered parse of the already validated body.
void AttachTemplateInputs(std::string_view body, GenerationRequest* out) {
  using ojson = nlohmann::ordered_json;
  ojson doc = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  if (auto m = doc.find("messages"); m != doc.end() && m->is_array() &&
                                     m->size() == out->messages.size()) {
    for (size_t i = 0; i < out->messages.size(); ++i) {
      ojson obj = std::move((*m)[i]);
      // OpenAI's "developer" role is the newer name of "system", which templates know.
      if (out->messages[i].role == "developer") obj["role"] = "system";
      out->messages[i].object = std::move(obj);
    }
  }
  auto take = [&](const char* key, ojson* dst) {
    if (auto it = doc.find(key); it != doc.end() && !it->is_null()) *dst = std::move(*it);
  };
  take("tools", &out->tools);
  take("documents", &out->documents);
  take("chat_template_kwargs", &out->chat_template_kwargs);
}

}  // namespace

std::span<const FieldSpec> RequestFields() { return kFields; }

std::optional<ApiError> CheckContentType(std::optional<std::string_view> content_type) {
  auto unsupported = [&](std::string got) {
    return ApiError{415, "invalid_request_error", "unsupported_media_type",
                    "Content-Type must be application/json, got " + got, "", 0};
  };
  if (!content_type) return unsupported("none");
  std::string_view media = content_type->substr(0, content_type->find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  bool match = media.size() == kJson.size();
  for (size_t i = 0; match && i < media.size(); ++i) {
    const char c = media[i] >= 'A' && media[i] <= 'Z' ? static_cast<char>(media[i] + 32) : media[i];
    match = c == kJson[i];
  }
  if (!match) return unsupported("'" + std::string(content_type->substr(0, 128)) + "'");
  return std::nullopt;
}

std::optional<ApiError> ParseJsonObject(std::string_view body, const RequestLimits& limits,
                                        json* out) {
  if (auto bad = FindInvalidUtf8(body)) {
    return InvalidRequestError("", "request body is not valid UTF-8 (byte offset " +
                                       std::to_string(*bad) + ")",
                               "invalid_utf8");
  }
  if (DepthScan scan = ScanJsonDepth(body, limits.max_json_depth); scan.exceeded) {
    return InvalidRequestError("", "JSON nesting deeper than " +
                                       std::to_string(limits.max_json_depth) +
                                       " levels (byte offset " + std::to_string(scan.offset) + ")",
                               "json_too_deep");
  }
  if (auto err = ParseJsonStrict(body, out)) return err;
  if (!out->is_object()) {
    return InvalidRequestError("", std::string("request body must be a JSON object, got ") +
                                       out->type_name(),
                               "invalid_type");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseGenerationRequest(std::string_view body, Endpoint endpoint,
                                               const RequestLimits& limits,
                                               GenerationRequest* out) {
  json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return err;
  out->is_chat = endpoint == Endpoint::kChatCompletions;
  for (const FieldSpec& spec : kFields) {
    if (!AppliesTo(spec, endpoint)) continue;
    auto it = doc.find(spec.name);
    if (it == doc.end() || it->is_null()) {
      if (spec.required) {
        return InvalidRequestError(std::string(spec.name),
                                   "missing required parameter '" + std::string(spec.name) + "'",
                                   "missing_required_parameter");
      }
      continue;
    }
    json clamped;
    bool use_clamped = false;
    if (auto err = CheckKind(spec, *it, &clamped, &use_clamped)) return err;
    if (auto err = spec.apply(spec, use_clamped ? clamped : *it, limits, *out)) return err;
  }
  if (out->is_chat) AttachTemplateInputs(body, out);
  // Cross-field rule (as OpenAI): stream_options only makes sense for a stream.
  auto so = doc.find("stream_options");
  if (so != doc.end() && !so->is_null() && !out->stream) {
    return InvalidRequestError("stream_options",
                               "'stream_options' is only allowed when 'stream' is true");
  }
  return std::nullopt;
}

std::optional<ApiError> ResolveModel(const std::vector<ModelInfo>& models,
                                     std::string_view requested, std::string* resolved) {
  if (models.empty()) return UnavailableError("no model is loaded", "model_not_loaded", 1);
  if (requested.empty()) {
    *resolved = models.front().id;
    return std::nullopt;
  }
  for (const ModelInfo& m : models) {
    if (m.id == requested) {
      *resolved = m.id;
      return std::nullopt;
    }
  }
  return NotFoundError("model", "model '" + std::string(requested) + "' does not exist",
                       "model_not_found");
}

}  // namespace lifeline::server
