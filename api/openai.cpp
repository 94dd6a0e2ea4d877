#include "api/openai.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "base/excerpt.h"
#include "api/json_guard.h"
#include "text/toolcall/tools.h"
#include "api/openai_util.h"

namespace lifeline::api {

using json = nlohmann::json;

using namespace detail;

namespace {

bool AppliesTo(const FieldSpec& spec, Endpoint endpoint) {
  switch (spec.applies) {
    case Applies::kAll:
      return true;
    case Applies::kText:
      return endpoint != Endpoint::kChatCompletions;
    case Applies::kCompletionsOnly:
      return endpoint == Endpoint::kCompletions;
    case Applies::kChatOnly:
      return endpoint == Endpoint::kChatCompletions;
    case Applies::kInfillOnly:
      return endpoint == Endpoint::kInfill;
  }
  return false;
}

std::string_view EndpointPath(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kCompletions:
      return "/v1/completions";
    case Endpoint::kChatCompletions:
      return "/v1/chat/completions";
    case Endpoint::kInfill:
      return "/infill";
  }
  return "";
}

// Fields clients send that Lifeline does not implement, with what to do instead.
std::string UnknownFieldHint(std::string_view name) {
  if (name == "functions" || name == "function_call") {
    return "; it is the deprecated form of 'tools' / 'tool_choice', which are supported";
  }
  if (name == "n_predict") return "; use 'max_tokens'";
  if (name == "json_schema") return "; use 'response_format'";
  return "";
}

// 400 for a field `endpoint` does not read: never accepted and silently ignored.
std::optional<ApiError> RejectUnreadFields(const json& doc, Endpoint endpoint) {
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool read = false, elsewhere = false;
    for (const FieldSpec& spec : RequestFields()) {
      if (spec.name != it.key()) continue;
      (AppliesTo(spec, endpoint) ? read : elsewhere) = true;
    }
    if (read) continue;
    const std::string name = Utf8Prefix(it.key(), 64);
    return InvalidRequestError(
        name,
        elsewhere ? "'" + name + "' is not a parameter of " + std::string(EndpointPath(endpoint))
                  : "unrecognized request argument '" + name + "'" + UnknownFieldHint(name) +
                        " (api/README.md lists the supported fields)",
        "unknown_parameter");
  }
  return std::nullopt;
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
// The same holds for a response_format schema (its property order is the order the model is
// asked to write) and tool_choice.
void AttachOrderedInputs(std::string_view body, GenerationRequest* out) {
  using ojson = nlohmann::ordered_json;
  ojson doc = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  if (out->constraint.kind == OutputConstraint::Kind::kJsonSchema) {
    out->constraint.schema = std::move(doc["response_format"]["json_schema"]["schema"]);
  }
  if (!out->is_chat) return;
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
  take("tool_choice", &out->tool_choice);
}

// Rules between fields, checked once all are read.
std::optional<ApiError> CheckFieldCombinations(const json& doc, const RequestLimits& limits,
                                               GenerationRequest* out) {
  // As OpenAI: stream_options only makes sense for a stream.
  auto so = doc.find("stream_options");
  if (so != doc.end() && !so->is_null() && !out->stream) {
    return InvalidRequestError("stream_options",
                               "'stream_options' is only allowed when 'stream' is true");
  }
  if (out->is_chat && out->top_logprobs > 0 && !out->logprobs) {
    return InvalidRequestError("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  if (out->echo && out->logprobs) {
    return InvalidRequestError("echo", "'echo' together with 'logprobs' (log-probabilities of "
                                       "the prompt tokens) is not supported",
                               "unsupported_value");
  }
  if (out->suffix && out->prompts.size() > 1 && !out->is_infill) {
    return InvalidRequestError("suffix", "'suffix' needs a single prompt", "unsupported_value");
  }
  const int64_t prompts = out->is_chat ? 1 : static_cast<int64_t>(out->prompts.size());
  if (prompts * out->n > limits.max_choices_total) {
    return InvalidRequestError("n", std::to_string(prompts) + " prompt(s) x n=" +
                                        std::to_string(out->n) + " choices; at most " +
                                        std::to_string(limits.max_choices_total) + " in all",
                               "out_of_range");
  }
  if (!out->is_chat) return std::nullopt;
  // Tools: OpenAI's shapes, names unique and well formed, tool_choice naming one of them.
  const bool has_tools = out->tools.is_array() && !out->tools.empty();
  std::vector<toolcall::ToolSpec> tools;
  if (has_tools) {
    auto parsed = toolcall::ParseTools(out->tools);
    if (!parsed.ok()) {
      return InvalidRequestError(toolcall::ErrorFieldPath(parsed.status()),
                                 parsed.status().message());
    }
    tools = std::move(parsed).value();
  }
  auto choice = toolcall::ParseToolChoice(out->tool_choice, tools);
  if (!choice.ok()) {
    std::string param = toolcall::ErrorFieldPath(choice.status());
    return InvalidRequestError(param.empty() ? "tool_choice" : param, choice.status().message());
  }
  const bool forced = choice->mode == toolcall::ToolChoice::Mode::kRequired ||
                      choice->mode == toolcall::ToolChoice::Mode::kFunction;
  if (forced && out->constraint.kind != OutputConstraint::Kind::kNone) {
    return InvalidRequestError(out->constraint.param,
                               "a forced tool call (tool_choice) and '" + out->constraint.param +
                                   "' exclude each other",
                               "unsupported_value");
  }
  return std::nullopt;
}

}  // namespace


std::optional<ApiError> CheckContentType(std::optional<std::string_view> content_type) {
  auto unsupported = [&](std::string got) {
    return MakeError(ErrorKind::kUnsupportedMediaType, "unsupported_media_type",
                     "Content-Type must be application/json, got " + got);
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
  out->is_infill = endpoint == Endpoint::kInfill;
  if (auto err = RejectUnreadFields(doc, endpoint)) return err;
  for (const FieldSpec& spec : RequestFields()) {
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
  AttachOrderedInputs(body, out);
  return CheckFieldCombinations(doc, limits, out);
}

std::optional<ApiError> ApplySharedField(std::string_view name, const json& doc,
                                         const RequestLimits& limits, GenerationRequest* out) {
  auto it = doc.find(std::string(name));
  if (it == doc.end() || it->is_null()) return std::nullopt;
  for (const FieldSpec& spec : RequestFields()) {
    if (spec.name != name || spec.applies != Applies::kAll) continue;
    json clamped;
    bool use_clamped = false;
    if (auto err = CheckKind(spec, *it, &clamped, &use_clamped)) return err;
    return spec.apply(spec, use_clamped ? clamped : *it, limits, *out);
  }
  // A caller naming a field the table does not share is a bug here, not the client's.
  return InternalError("'" + std::string(name) + "' is not a field every generation route shares");
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

}  // namespace lifeline::api