#include "api/responses_api.h"

#include <set>
#include <variant>

namespace lifeline::api {
namespace {

using nlohmann::json;

// A message's content: a string, or parts of input_text / output_text (their texts joined).
std::variant<std::string, ApiError> ContentText(const json& content, const std::string& where) {
  return JoinedPartsText(content, where, {"input_text", "output_text", "text"});
}

}  // namespace

std::variant<json, ApiError> ResponsesToChat(const json& body) {
  if (!body.is_object()) return TranslatedFieldError("body", "expected a JSON object");
  static const std::set<std::string> kKnown = {
      "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
      "tools", "tool_choice", "parallel_tool_calls", "reasoning", "seed", "store", "metadata",
      "user", "previous_response_id"};
  for (const auto& [key, value] : body.items()) {
    if (!kKnown.count(key)) return TranslatedFieldError(key, "unknown parameter", "unknown_parameter");
  }
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
    return TranslatedFieldError("previous_response_id",
               "this server stores no responses: send the whole conversation in 'input'",
               "unsupported_value");
  }
  if (body.contains("store") && body["store"].is_boolean() && body["store"].get<bool>()) {
    return TranslatedFieldError("store", "this server stores no responses: send store false or leave it out",
               "unsupported_value");
  }
  json chat = json::object();
  json messages = json::array();
  if (body.contains("instructions") && !body["instructions"].is_null()) {
    if (!body["instructions"].is_string()) return TranslatedFieldError("instructions", "expected a string");
    messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  if (!body.contains("input")) return TranslatedFieldError("input", "required", "missing_required_parameter");
  const json& input = body["input"];
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    for (size_t i = 0; i < input.size(); ++i) {
      const json& item = input[i];
      const std::string at = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) return TranslatedFieldError(at, "expected an item object");
      const std::string type = item.value("type", std::string("message"));
      if (type == "message") {
        if (!item.contains("role") || !item["role"].is_string()) return TranslatedFieldError(at + ".role", "expected a string");
        std::string role = item["role"];
        if (role == "developer") role = "system";
        if (role != "user" && role != "assistant" && role != "system") {
          return TranslatedFieldError(at + ".role", "'" + role + "' is not user, assistant, system or developer");
        }
        if (!item.contains("content")) return TranslatedFieldError(at + ".content", "required", "missing_required_parameter");
        auto text = ContentText(item["content"], at + ".content");
        if (auto* e = std::get_if<ApiError>(&text)) return *e;
        messages.push_back({{"role", role}, {"content", std::get<std::string>(text)}});
      } else if (type == "function_call") {
        for (const char* k : {"call_id", "name", "arguments"}) {
          if (!item.contains(k) || !item[k].is_string()) return TranslatedFieldError(at + "." + k, "expected a string");
        }
        json call = {{"id", item["call_id"]},
                     {"type", "function"},
                     {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
        // Consecutive calls are one assistant turn.
        if (!messages.empty() && messages.back()["role"] == "assistant" &&
            messages.back().contains("tool_calls")) {
          messages.back()["tool_calls"].push_back(std::move(call));
        } else {
          messages.push_back({{"role", "assistant"}, {"content", ""},
                              {"tool_calls", json::array({std::move(call)})}});
        }
      } else if (type == "function_call_output") {
        if (!item.contains("call_id") || !item["call_id"].is_string()) {
          return TranslatedFieldError(at + ".call_id", "expected a string");
        }
        if (!item.contains("output")) return TranslatedFieldError(at + ".output", "required", "missing_required_parameter");
        auto text = ContentText(item["output"], at + ".output");
        if (auto* e = std::get_if<ApiError>(&text)) return *e;
        messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]},
                            {"content", std::get<std::string>(text)}});
      } else {
        return TranslatedFieldError(at + ".type", "'" + type + "' is not supported (message, function_call, "
                                               "function_call_output)",
                   "unsupported_value");
      }
    }
  } else {
    return TranslatedFieldError("input", "expected a string or an array of items");
  }
  chat["messages"] = std::move(messages);
  if (body.contains("model")) chat["model"] = body["model"];
  if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) {
    chat["max_tokens"] = body["max_output_tokens"];
  }
  for (const char* k : {"temperature", "top_p", "stream", "parallel_tool_calls", "seed"}) {
    if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];
  }
  if (chat.value("stream", false)) chat["stream_options"] = {{"include_usage", true}};
  if (body.contains("reasoning") && body["reasoning"].is_object() &&
      body["reasoning"].contains("effort") && !body["reasoning"]["effort"].is_null()) {
    chat["reasoning_effort"] = body["reasoning"]["effort"];
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return TranslatedFieldError("tools", "expected an array");
    json tools = json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const json& t = body["tools"][i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || t.value("type", std::string()) != "function") {
        return TranslatedFieldError(at + ".type", "only function tools are supported", "unsupported_value");
      }
      json fn = json::object();
      for (const char* k : {"name", "description", "parameters", "strict"}) {
        if (t.contains(k) && !t[k].is_null()) fn[k] = t[k];
      }
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(tools);
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    if (tc.is_object() && tc.value("type", std::string()) == "function" && tc.contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
      chat["tool_choice"] = tc;  // "auto" / "none" / "required"; the chat path validates it
    }
  }
  return chat;
}

namespace {

json Usage(const json& chat_usage) {
  if (!chat_usage.is_object()) return nullptr;
  const int64_t in = chat_usage.value("prompt_tokens", 0), out = chat_usage.value("completion_tokens", 0);
  json u = {{"input_tokens", in}, {"output_tokens", out}, {"total_tokens", in + out}};
  int64_t cached = 0, reasoning = 0;
  if (auto d = chat_usage.find("prompt_tokens_details"); d != chat_usage.end() && d->is_object()) {
    cached = d->value("cached_tokens", 0);
  }
  if (auto d = chat_usage.find("completion_tokens_details"); d != chat_usage.end() && d->is_object()) {
    reasoning = d->value("reasoning_tokens", 0);
  }
  u["input_tokens_details"] = {{"cached_tokens", cached}};
  u["output_tokens_details"] = {{"reasoning_tokens", reasoning}};
  return u;
}

json MessageItem(const std::string& id, const std::string& text) {
  return {{"type", "message"},
          {"id", id},
          {"status", "completed"},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"}, {"text", text},
                                    {"annotations", json::array()}}})}};
}

json CallItem(const std::string& id, const std::string& call_id, const std::string& name,
              const std::string& arguments) {
  return {{"type", "function_call"}, {"id", id},     {"status", "completed"},
          {"call_id", call_id},      {"name", name}, {"arguments", arguments}};
}

json ResponseShell(const std::string& id, int64_t created, const std::string& model,
                   const std::string& status) {
  return {{"id", id},
          {"object", "response"},
          {"created_at", created},
          {"status", status},
          {"model", model},
          {"output", json::array()},
          {"error", nullptr},
          {"incomplete_details", nullptr}};
}

void Finish(json* r, const std::string& finish_reason, const json& usage, const json& timings) {
  if (finish_reason == "length") {
    (*r)["status"] = "incomplete";
    (*r)["incomplete_details"] = {{"reason", "max_output_tokens"}};
  } else {
    (*r)["status"] = "completed";
  }
  (*r)["usage"] = Usage(usage);
  if (timings.is_object()) (*r)["timings"] = timings;  // Lifeline's timings, as on chat
}

}  // namespace

json ChatToResponse(const json& chat) {
  const std::string id = TranslatedId(chat, "resp_");
  json r = ResponseShell(id, chat.value("created", int64_t{0}), chat.value("model", std::string()),
                         "completed");
  std::string finish;
  if (chat.contains("choices") && chat["choices"].is_array() && !chat["choices"].empty()) {
    const json& c = chat["choices"][0];
    finish = c.value("finish_reason", std::string());
    const json& m = c.value("message", json::object());
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
      r["output"].push_back({{"type", "reasoning"}, {"id", "rs_" + id.substr(5)},
                             {"summary", json::array({{{"type", "summary_text"},
                                                       {"text", m["reasoning_content"]}}})}});
    }
    if (m.contains("content") && m["content"].is_string() &&
        !m["content"].get_ref<const std::string&>().empty()) {
      r["output"].push_back(MessageItem("msg_" + id.substr(5), m["content"]));
    }
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
        const json& tc = m["tool_calls"][i];
        r["output"].push_back(CallItem("fc_" + id.substr(5) + "_" + std::to_string(i),
                                       tc.value("id", std::string()),
                                       tc["function"].value("name", std::string()),
                                       tc["function"].value("arguments", std::string())));
      }
    }
  }
  Finish(&r, finish, chat.value("usage", json()), chat.value("timings", json()));
  return r;
}

ResponsesStream::Event ResponsesStream::Make(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return {type, std::move(data)};
}

json ResponsesStream::ResponseObject(const std::string& status) const {
  json r = ResponseShell(id_, created_, model_, status);
  r["output"] = output_;
  return r;
}

void ResponsesStream::Start(const json& chunk, std::vector<Event>* out) {
  started_ = true;
  id_ = TranslatedId(chunk, "resp_");
  model_ = chunk.value("model", std::string());
  created_ = chunk.value("created", int64_t{0});
  out->push_back(Make("response.created", {{"response", ResponseObject("in_progress")}}));
  out->push_back(Make("response.in_progress", {{"response", ResponseObject("in_progress")}}));
}

void ResponsesStream::CloseMessage(std::vector<Event>* out) {
  if (!message_open_) return;
  message_open_ = false;
  const int64_t index = static_cast<int64_t>(output_.size());
  const std::string item_id = "msg_" + id_.substr(5);
  json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
  out->push_back(Make("response.output_text.done", {{"item_id", item_id}, {"output_index", index},
                                                    {"content_index", 0}, {"text", text_}}));
  out->push_back(Make("response.content_part.done", {{"item_id", item_id}, {"output_index", index},
                                                     {"content_index", 0}, {"part", part}}));
  json item = MessageItem(item_id, text_);
  out->push_back(Make("response.output_item.done", {{"output_index", index}, {"item", item}}));
  output_.push_back(std::move(item));
}

void ResponsesStream::CloseCall(std::vector<Event>* out) {
  if (!call_open_) return;
  call_open_ = false;
  const int64_t index = static_cast<int64_t>(output_.size());
  call_["status"] = "completed";
  out->push_back(Make("response.function_call_arguments.done",
                      {{"item_id", call_["id"]}, {"output_index", index},
                       {"arguments", call_["arguments"]}}));
  out->push_back(Make("response.output_item.done", {{"output_index", index}, {"item", call_}}));
  output_.push_back(call_);
}

std::vector<ResponsesStream::Event> ResponsesStream::Feed(const json& chunk) {
  std::vector<Event> out;
  if (!chunk.is_object()) return out;
  if (!started_) Start(chunk, &out);
  if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = chunk["usage"];
  if (chunk.contains("timings") && chunk["timings"].is_object()) timings_ = chunk["timings"];
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) {
    return out;
  }
  const json& c = chunk["choices"][0];
  if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
    finish_reason_ = c["finish_reason"];
  }
  const json& d = c.value("delta", json::object());
  if (d.contains("content") && d["content"].is_string() &&
      !d["content"].get_ref<const std::string&>().empty()) {
    CloseCall(&out);
    const int64_t index = static_cast<int64_t>(output_.size());
    const std::string item_id = "msg_" + id_.substr(5);
    if (!message_open_) {
      message_open_ = true;
      text_.clear();
      json item = MessageItem(item_id, "");
      item["status"] = "in_progress";
      item["content"] = json::array();
      out.push_back(Make("response.output_item.added", {{"output_index", index}, {"item", item}}));
      out.push_back(Make("response.content_part.added",
                         {{"item_id", item_id}, {"output_index", index}, {"content_index", 0},
                          {"part", {{"type", "output_text"}, {"text", ""},
                                    {"annotations", json::array()}}}}));
    }
    text_ += d["content"].get<std::string>();
    out.push_back(Make("response.output_text.delta", {{"item_id", item_id}, {"output_index", index},
                                                      {"content_index", 0}, {"delta", d["content"]}}));
  }
  if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
    CloseMessage(&out);
    for (const json& tc : d["tool_calls"]) {
      const int64_t call_index = tc.value("index", int64_t{0});
      if (!call_open_ || call_index != call_index_) {
        CloseCall(&out);
        call_open_ = true;
        call_index_ = call_index;
        const json& fn = tc.value("function", json::object());
        call_ = CallItem("fc_" + id_.substr(5) + "_" + std::to_string(call_index),
                         tc.value("id", std::string()), fn.value("name", std::string()), "");
        call_["status"] = "in_progress";
        out.push_back(Make("response.output_item.added",
                           {{"output_index", static_cast<int64_t>(output_.size())}, {"item", call_}}));
      }
      const std::string piece = tc.value("function", json::object()).value("arguments", std::string());
      if (!piece.empty()) {
        call_["arguments"] = call_["arguments"].get<std::string>() + piece;
        out.push_back(Make("response.function_call_arguments.delta",
                           {{"item_id", call_["id"]},
                            {"output_index", static_cast<int64_t>(output_.size())},
                            {"delta", piece}}));
      }
    }
  }
  return out;
}

std::vector<ResponsesStream::Event> ResponsesStream::Finish() {
  std::vector<Event> out;
  if (!started_) Start(json::object(), &out);
  CloseMessage(&out);
  CloseCall(&out);
  json r = ResponseObject("completed");
  ::lifeline::api::Finish(&r, finish_reason_, usage_, timings_);
  const std::string type =
      r["status"] == "incomplete" ? "response.incomplete" : "response.completed";
  out.push_back(Make(type, {{"response", std::move(r)}}));
  return out;
}

}  // namespace lifeline::api
