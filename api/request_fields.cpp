// The request field table (RequestFields(), declared in openai.h) and the appliers that turn
// each field's value into GenerationRequest members.
#include <cmath>
#include <set>
#include <string>

#include "api/openai.h"
#include "api/openai_util.h"

namespace lifeline::api {

using json = nlohmann::json;
using namespace detail;

// One token-id prompt: integers in [0, 2^31) (the engine checks them against its vocabulary).
// Shared with the embeddings route's `input` (openai_util.h).
std::optional<ApiError> detail::ParseTokenPrompt(const json& v, const std::string& param,
                                                 const RequestLimits& limits, PromptInput* out) {
  if (v.size() > limits.max_prompt_token_ids) {
    return InvalidRequestError(param, "'" + param + "' has " + std::to_string(v.size()) +
                                          " token ids; at most " +
                                          std::to_string(limits.max_prompt_token_ids),
                               "out_of_range");
  }
  out->is_tokens = true;
  out->tokens.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_number_integer()) return TypeError(p, "a token id (integer)", v[i]);
    if (v[i].is_number_unsigned() ? v[i].get<uint64_t>() > 2147483647u
                                  : (v[i].get<int64_t>() < 0 || v[i].get<int64_t>() > 2147483647)) {
      return InvalidRequestError(p, "'" + p + "' is " + Echo(v[i]) + "; a token id is >= 0",
                                 "out_of_range");
    }
    out->tokens.push_back(static_cast<int32_t>(v[i].get<int64_t>()));
  }
  return std::nullopt;
}

namespace {

// --- Field appliers -----------------------------------------------------------------------

std::optional<ApiError> ApplyModel(const FieldSpec&, const json& v, const RequestLimits&,
                                   GenerationRequest& out) {
  out.model = v.get<std::string>();
  return std::nullopt;
}

// prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]; each entry is one prompt
// whose choices come in order (prompt i's choices are indices i*n .. i*n + n - 1).
std::optional<ApiError> ApplyPrompt(const FieldSpec& spec, const json& v,
                                    const RequestLimits& limits, GenerationRequest& out) {
  out.prompts.clear();
  if (v.is_string()) {
    out.prompts.push_back({v.get<std::string>(), {}, false});
    return std::nullopt;
  }
  if (!v.is_array()) {
    return TypeError(spec.name, "a string, an array of strings, or token ids", v);
  }
  if (v.empty()) return InvalidRequestError("prompt", "'prompt' is an empty array", "out_of_range");
  if (v[0].is_number_integer()) {  // one prompt of token ids
    PromptInput p;
    if (auto err = ParseTokenPrompt(v, "prompt", limits, &p)) return err;
    out.prompts.push_back(std::move(p));
    return std::nullopt;
  }
  if (v.size() > limits.max_prompts) {
    return InvalidRequestError("prompt", "'prompt' holds " + std::to_string(v.size()) +
                                             " prompts; at most " +
                                             std::to_string(limits.max_prompts),
                               "out_of_range");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "prompt[" + std::to_string(i) + "]";
    PromptInput in;
    if (v[i].is_string()) {
      in.text = v[i].get<std::string>();
    } else if (v[i].is_array() && !v[i].empty()) {
      if (auto err = ParseTokenPrompt(v[i], p, limits, &in)) return err;
    } else {
      return TypeError(p, "a string or a non-empty array of token ids", v[i]);
    }
    out.prompts.push_back(std::move(in));
  }
  return std::nullopt;
}

// /infill: input_prefix is the text before the cursor (the one prompt), input_suffix after.
std::optional<ApiError> ApplyInputPrefix(const FieldSpec&, const json& v, const RequestLimits&,
                                         GenerationRequest& out) {
  out.prompts = {PromptInput{v.get<std::string>(), {}, false}};
  return std::nullopt;
}

std::optional<ApiError> ApplySuffix(const FieldSpec&, const json& v, const RequestLimits&,
                                    GenerationRequest& out) {
  out.suffix = v.get<std::string>();
  return std::nullopt;
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
  // tools: their shape (type, function name, parameters) is checked with tool_choice once
  // both are read (openai.cpp).
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

// best_of: generating extra candidates to rank them is not supported.
std::optional<ApiError> ApplyBestOf(const FieldSpec& spec, const json& v, const RequestLimits&,
                                    GenerationRequest&) {
  if (v.get<int64_t>() != 1) {
    return InvalidRequestError(std::string(spec.name),
                               "'best_of' is " + Echo(v) + "; only 1 is supported (use 'n' for "
                               "several choices)",
                               "unsupported_value");
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyN(const FieldSpec&, const json& v, const RequestLimits& limits,
                               GenerationRequest& out) {
  const int64_t n = v.get<int64_t>();
  if (n > limits.max_choices) {
    return InvalidRequestError("n", "'n' is " + std::to_string(n) + "; at most " +
                                        std::to_string(limits.max_choices),
                               "out_of_range");
  }
  out.n = static_cast<int32_t>(n);
  return std::nullopt;
}

// Chat: logprobs is a boolean (top_logprobs says how many alternatives).
std::optional<ApiError> ApplyChatLogprobs(const FieldSpec&, const json& v, const RequestLimits&,
                                          GenerationRequest& out) {
  out.logprobs = v.get<bool>();
  return std::nullopt;
}

// Completions: logprobs is the number of alternatives (0..5); present means "on".
std::optional<ApiError> ApplyTextLogprobs(const FieldSpec&, const json& v, const RequestLimits&,
                                          GenerationRequest& out) {
  out.logprobs = true;
  out.top_logprobs = static_cast<int32_t>(v.get<int64_t>());
  return std::nullopt;
}

std::optional<ApiError> ApplyTopLogprobs(const FieldSpec&, const json& v, const RequestLimits&,
                                         GenerationRequest& out) {
  out.top_logprobs = static_cast<int32_t>(v.get<int64_t>());
  return std::nullopt;
}

std::optional<ApiError> ApplyEcho(const FieldSpec&, const json& v, const RequestLimits&,
                                  GenerationRequest& out) {
  out.echo = v.get<bool>();
  return std::nullopt;
}

// logit_bias: {"<token id>": bias in [-100, 100]}; the engine checks ids against its vocabulary.
std::optional<ApiError> ApplyLogitBias(const FieldSpec& spec, const json& v,
                                       const RequestLimits& limits, GenerationRequest& out) {
  if (!v.is_object()) return TypeError(spec.name, "an object of token id -> bias", v);
  if (v.size() > limits.max_logit_bias) {
    return InvalidRequestError("logit_bias", "'logit_bias' has " + std::to_string(v.size()) +
                                                 " entries; at most " +
                                                 std::to_string(limits.max_logit_bias),
                               "out_of_range");
  }
  out.logit_bias.clear();
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    const std::string p = "logit_bias." + key.substr(0, 32);
    bool digits = !key.empty() && key.size() <= 10 && (key == "0" || key[0] != '0');
    for (char c : key) digits &= c >= '0' && c <= '9';
    const int64_t id = digits ? std::stoll(key) : -1;
    if (!digits || id > 2147483647) {
      return InvalidRequestError(p, "'" + p + "': a logit_bias key is a token id (a decimal "
                                              "integer string such as \"50256\")",
                                 "invalid_value");
    }
    if (!it->is_number()) return TypeError(p, "a number in [-100, 100]", *it);
    const double bias = it->get<double>();
    if (!std::isfinite(bias) || bias < -100 || bias > 100) {
      return InvalidRequestError(p, "'" + p + "' is " + Echo(*it) +
                                        ", outside the allowed range [-100, 100]",
                                 "out_of_range");
    }
    out.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return std::nullopt;
}

constexpr size_t kMaxSchemaNameBytes = 64;

bool ValidSchemaName(const std::string& name) {
  if (name.empty() || name.size() > kMaxSchemaNameBytes) return false;
  for (char c : name) {
    if (!IsNameChar(c) || c == '.') return false;
  }
  return true;
}

// response_format: {"type": "text"} | {"type": "json_object"} |
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"?, "description"?}}.
std::optional<ApiError> ApplyResponseFormat(const FieldSpec& spec, const json& v,
                                            const RequestLimits&, GenerationRequest& out) {
  if (!v.is_object()) return TypeError(spec.name, "an object", v);
  auto type = v.find("type");
  if (type == v.end() || !type->is_string()) {
    return TypeError("response_format.type", "one of \"text\", \"json_object\", \"json_schema\"",
                     type == v.end() ? json(nullptr) : *type);
  }
  const std::string& t = type->get_ref<const std::string&>();
  auto only_keys = [&](const json& obj, std::initializer_list<std::string_view> keys,
                       const std::string& where) -> std::optional<ApiError> {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (std::string_view k : keys) known |= it.key() == k;
      if (!known) {
        const std::string p = where + "." + it.key().substr(0, 64);
        return InvalidRequestError(p, "unrecognized argument '" + p + "'", "unknown_parameter");
      }
    }
    return std::nullopt;
  };
  out.constraint = OutputConstraint{};
  if (t == "text") return only_keys(v, {"type"}, "response_format");
  if (t == "json_object") {
    if (auto err = only_keys(v, {"type"}, "response_format")) return err;
    out.constraint.kind = OutputConstraint::Kind::kJsonObject;
    out.constraint.param = "response_format";
    return std::nullopt;
  }
  if (t != "json_schema") {
    return InvalidRequestError("response_format.type",
                               "'response_format.type' is " + Echo(*type) +
                                   "; supported: \"text\", \"json_object\", \"json_schema\"",
                               "unsupported_value");
  }
  if (auto err = only_keys(v, {"type", "json_schema"}, "response_format")) return err;
  auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object()) {
    return TypeError("response_format.json_schema", "an object {name, schema, strict?}",
                     js == v.end() ? json(nullptr) : *js);
  }
  if (auto err = only_keys(*js, {"name", "schema", "strict", "description"},
                           "response_format.json_schema")) {
    return err;
  }
  auto name = js->find("name");
  if (name == js->end() || !name->is_string() || !ValidSchemaName(name->get<std::string>())) {
    return InvalidRequestError("response_format.json_schema.name",
                               "'response_format.json_schema.name' must be 1..64 characters of "
                               "a-z A-Z 0-9 _ -",
                               "invalid_value");
  }
  auto schema = js->find("schema");
  if (schema == js->end() || !schema->is_object()) {
    return TypeError("response_format.json_schema.schema", "a JSON Schema object",
                     schema == js->end() ? json(nullptr) : *schema);
  }
  auto strict = js->find("strict");
  if (strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
    return TypeError("response_format.json_schema.strict", "a boolean", *strict);
  }
  auto desc = js->find("description");
  if (desc != js->end() && !desc->is_null() && !desc->is_string()) {
    return TypeError("response_format.json_schema.description", "a string", *desc);
  }
  out.constraint.kind = OutputConstraint::Kind::kJsonSchema;
  out.constraint.strict = strict != js->end() && strict->is_boolean() && strict->get<bool>();
  out.constraint.param = "response_format.json_schema.schema";
  // The schema itself is attached from the ordered parse (AttachOrderedInputs): property
  // order is what the model is asked to write.
  return std::nullopt;
}

// grammar (llama.cpp's field): a GBNF grammar the output must match.
std::optional<ApiError> ApplyGrammar(const FieldSpec&, const json& v, const RequestLimits&,
                                     GenerationRequest& out) {
  if (out.constraint.kind != OutputConstraint::Kind::kNone) {
    return InvalidRequestError("grammar", "'grammar' and 'response_format' exclude each other");
  }
  out.constraint.kind = OutputConstraint::Kind::kGrammar;
  out.constraint.grammar = v.get<std::string>();
  out.constraint.param = "grammar";
  return std::nullopt;
}

// tool_choice: the shape here; names are checked against `tools` once both are read.
std::optional<ApiError> ApplyToolChoice(const FieldSpec& spec, const json& v,
                                        const RequestLimits&, GenerationRequest&) {
  if (!v.is_string() && !v.is_object()) {
    return TypeError(spec.name, "\"auto\", \"none\", \"required\" or a function object", v);
  }
  return std::nullopt;  // value attached from the ordered parse; validated with the tools
}

std::optional<ApiError> ApplyParallelToolCalls(const FieldSpec&, const json& v,
                                               const RequestLimits&, GenerationRequest& out) {
  out.parallel_tool_calls = v.get<bool>();
  return std::nullopt;
}

// OpenAI fields Lifeline accepts with one value only (documented in api/README.md).
std::optional<ApiError> ApplyStore(const FieldSpec&, const json& v, const RequestLimits&,
                                   GenerationRequest&) {
  if (v.get<bool>()) {
    return InvalidRequestError("store", "'store': true is not supported (Lifeline keeps no "
                                        "completions); send false or omit it",
                               "unsupported_value");
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyServiceTier(const FieldSpec&, const json& v, const RequestLimits&,
                                         GenerationRequest&) {
  const std::string t = v.get<std::string>();
  if (t != "auto" && t != "default") {
    return InvalidRequestError("service_tier", "'service_tier' is " + Echo(v) +
                                                   "; supported: \"auto\", \"default\" (use "
                                                   "slo_class for latency classes)",
                               "unsupported_value");
  }
  return std::nullopt;
}

std::optional<ApiError> ApplyModalities(const FieldSpec& spec, const json& v,
                                        const RequestLimits&, GenerationRequest&) {
  if (!v.is_array() || v.size() != 1 || v[0] != "text") {
    return InvalidRequestError("modalities", "'modalities' must be [\"text\"] (text output only)",
                               "unsupported_value");
  }
  return std::nullopt;
}

// user: the client's end-user id (OpenAI uses it for abuse monitoring); accepted, not used.
std::optional<ApiError> ApplyUser(const FieldSpec&, const json&, const RequestLimits&,
                                  GenerationRequest&) {
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

std::optional<ApiError> ApplyReasoningEffort(const FieldSpec&, const json& v,
                                             const RequestLimits&, GenerationRequest& out) {
  const std::string e = v.get<std::string>();
  if (e != "minimal" && e != "low" && e != "medium" && e != "high") {
    return InvalidRequestError("reasoning_effort", "'reasoning_effort' is " + Echo(v) +
                                                       "; supported: \"minimal\", \"low\", "
                                                       "\"medium\", \"high\"",
                               "unsupported_value");
  }
  out.reasoning_effort = e;
  return std::nullopt;
}

std::optional<ApiError> ApplyThinkingBudget(const FieldSpec&, const json& v,
                                            const RequestLimits&, GenerationRequest& out) {
  out.thinking_budget_tokens = v.get<int32_t>();
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
    {"model", JsonKind::kString, Applies::kAll, false, 1, false, 256, false, AboveMax::kReject,
     "model id from GET /v1/models; default: the first model", &ApplyModel},
    {"prompt", JsonKind::kCustom, Applies::kCompletionsOnly, true, 0, false, 0, false,
     AboveMax::kReject, "string, array of strings, token ids, or arrays of token ids",
     &ApplyPrompt},
    {"messages", JsonKind::kCustom, Applies::kChatOnly, true, 0, false, 0, false,
     AboveMax::kReject, "array of {role, content}; content is a string or text parts",
     &ApplyMessages},
    {"max_tokens", JsonKind::kInteger, Applies::kAll, false, 1, false, kI32Max, false,
     AboveMax::kReject, "tokens to generate, 1..max_tokens_cap", &ApplyMaxTokens},
    {"max_completion_tokens", JsonKind::kInteger, Applies::kAll, false, 1, false, kI32Max, false,
     AboveMax::kReject, "alias of max_tokens; must agree when both are sent", &ApplyMaxTokens},
    {"temperature", JsonKind::kNumber, Applies::kAll, false, 0, false, 2, false,
     AboveMax::kReject, "0 = greedy", &ApplyDouble<&SF::temperature>},
    {"top_p", JsonKind::kNumber, Applies::kAll, false, 0, true, 1, false, AboveMax::kReject,
     "nucleus mass", &ApplyDouble<&SF::top_p>},
    {"top_k", JsonKind::kInteger, Applies::kAll, false, 0, false, 1000000, false,
     AboveMax::kClamp, "0 disables; above the cap means 'all' and is clamped", &ApplyTopK},
    {"min_p", JsonKind::kNumber, Applies::kAll, false, 0, false, 1, false, AboveMax::kReject,
     "relative probability floor", &ApplyDouble<&SF::min_p>},
    {"seed", JsonKind::kInteger, Applies::kAll, false, kI64Min, false, kI64Max, false,
     AboveMax::kReject, "int64 RNG seed", &ApplySeed},
    {"stop", JsonKind::kCustom, Applies::kAll, false, 0, false, 0, false, AboveMax::kReject,
     "string or array of <= 16 strings, each 1..1024 bytes", &ApplyStop},
    {"presence_penalty", JsonKind::kNumber, Applies::kAll, false, -2, false, 2, false,
     AboveMax::kReject, "", &ApplyDouble<&SF::presence_penalty>},
    {"frequency_penalty", JsonKind::kNumber, Applies::kAll, false, -2, false, 2, false,
     AboveMax::kReject, "", &ApplyDouble<&SF::frequency_penalty>},
    {"repeat_penalty", JsonKind::kNumber, Applies::kAll, false, 0, true, 10, false,
     AboveMax::kReject, "1 disables", &ApplyDouble<&SF::repeat_penalty>},
    {"stream", JsonKind::kBoolean, Applies::kAll, false, 0, false, 0, false, AboveMax::kReject,
     "server-sent events", &ApplyStream},
    {"stream_options", JsonKind::kCustom, Applies::kAll, false, 0, false, 0, false,
     AboveMax::kReject, "{include_usage: bool}; only with stream=true", &ApplyStreamOptions},
    {"ignore_eos", JsonKind::kBoolean, Applies::kAll, false, 0, false, 0, false,
     AboveMax::kReject, "keep generating past end-of-sequence", &ApplyIgnoreEos},
    {"n", JsonKind::kInteger, Applies::kAll, false, 1, false, kI32Max, false, AboveMax::kReject,
     "choices per prompt, 1..16", &ApplyN},
    {"best_of", JsonKind::kInteger, Applies::kCompletionsOnly, false, kI64Min, false, kI64Max,
     false, AboveMax::kReject, "only 1", &ApplyBestOf},
    {"logprobs", JsonKind::kBoolean, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "per-token log-probabilities", &ApplyChatLogprobs},
    {"logprobs", JsonKind::kInteger, Applies::kText, false, 0, false, 5, false, AboveMax::kReject,
     "0..5 alternatives per token (present: log-probabilities on)", &ApplyTextLogprobs},
    {"top_logprobs", JsonKind::kInteger, Applies::kChatOnly, false, 0, false, 20, false,
     AboveMax::kReject, "0..20 alternatives per token; needs logprobs: true", &ApplyTopLogprobs},
    {"echo", JsonKind::kBoolean, Applies::kCompletionsOnly, false, 0, false, 0, false,
     AboveMax::kReject, "each choice starts with the prompt", &ApplyEcho},
    {"logit_bias", JsonKind::kCustom, Applies::kAll, false, 0, false, 0, false,
     AboveMax::kReject, "{token id: bias -100..100}", &ApplyLogitBias},
    {"suffix", JsonKind::kString, Applies::kCompletionsOnly, false, 0, false, 1e12, false,
     AboveMax::kReject, "fill-in-the-middle: the text after the insertion", &ApplySuffix},
    {"input_prefix", JsonKind::kString, Applies::kInfillOnly, true, 0, false, 1e12, false,
     AboveMax::kReject, "/infill: the code before the cursor", &ApplyInputPrefix},
    {"input_suffix", JsonKind::kString, Applies::kInfillOnly, false, 0, false, 1e12, false,
     AboveMax::kReject, "/infill: the code after the cursor", &ApplySuffix},
    {"response_format", JsonKind::kCustom, Applies::kAll, false, 0, false, 0, false,
     AboveMax::kReject, "text | json_object | json_schema {name, schema, strict}",
     &ApplyResponseFormat},
    {"grammar", JsonKind::kString, Applies::kAll, false, 1, false, 1e12, false, AboveMax::kReject,
     "GBNF grammar the output must match (llama.cpp's field)", &ApplyGrammar},
    {"tool_choice", JsonKind::kCustom, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "auto | none | required | {type: function, function: {name}}",
     &ApplyToolChoice},
    {"parallel_tool_calls", JsonKind::kBoolean, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "several calls in one answer (default true)", &ApplyParallelToolCalls},
    {"user", JsonKind::kString, Applies::kAll, false, 0, false, 256, false, AboveMax::kReject,
     "end-user id; accepted, not used", &ApplyUser},
    {"store", JsonKind::kBoolean, Applies::kAll, false, 0, false, 0, false, AboveMax::kReject,
     "false only", &ApplyStore},
    {"service_tier", JsonKind::kString, Applies::kAll, false, 0, false, 64, false,
     AboveMax::kReject, "auto | default", &ApplyServiceTier},
    {"modalities", JsonKind::kCustom, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "[\"text\"] only", &ApplyModalities},
    {"slo_class", JsonKind::kString, Applies::kAll, false, 1, false, 64, false,
     AboveMax::kReject, "latency class name", &ApplyName<&GenerationRequest::slo_class>},
    {"user_role", JsonKind::kString, Applies::kAll, false, 1, false, 64, false,
     AboveMax::kReject, "role whose multiplier scales the class budget",
     &ApplyName<&GenerationRequest::user_role>},
    {"deadline_ms", JsonKind::kInteger, Applies::kAll, false, 1, false, 3600000, false,
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
    {"reasoning_effort", JsonKind::kString, Applies::kChatOnly, false, 0, false, 64, false,
     AboveMax::kReject, "minimal | low | medium | high: the thinking budget (docs/reasoning.md)",
     &ApplyReasoningEffort},
    {"thinking_budget_tokens", JsonKind::kInteger, Applies::kChatOnly, false, -1, false, kI32Max,
     false, AboveMax::kReject, "tokens the model may think; -1 unlimited, 0 none",
     &ApplyThinkingBudget},
    {"add_generation_prompt", JsonKind::kBoolean, Applies::kChatOnly, false, 0, false, 0, false,
     AboveMax::kReject, "end the prompt with the assistant turn's opener (default true)",
     &ApplyAddGenerationPrompt},
    // Accepted on both endpoints so one body works for either; completions are never trimmed.
    {"allow_context_trim", JsonKind::kBoolean, Applies::kAll, false, 0, false, 0, false,
     AboveMax::kReject, "chat: old turns may be dropped under SLO pressure (level >= 2)",
     &ApplyAllowContextTrim},
};

}  // namespace

std::span<const FieldSpec> RequestFields() { return kFields; }

}  // namespace lifeline::api
