#include "api/messages_api.h"

#include <set>

namespace lifeline::api {
namespace {

using nlohmann::json;

// The text of a string or of text blocks.
std::variant<std::string, ApiError> Text(const json& content, const std::string& where) {
  return JoinedPartsText(content, where, {"text"});
}

std::string StopReason(const std::string& finish) {
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  if (finish == "stop_sequence") return "stop_sequence";
  return "end_turn";
}

json Usage(const json& u) {
  if (!u.is_object()) return {{"input_tokens", 0}, {"output_tokens", 0}};
  return {{"input_tokens", u.value("prompt_tokens", 0)},
          {"output_tokens", u.value("completion_tokens", 0)}};
}

json Shell(const json& chat) {
  return {{"id", TranslatedId(chat, "msg_")},  {"type", "message"},          {"role", "assistant"},
          {"model", chat.value("model", std::string())}, {"content", json::array()},
          {"stop_reason", nullptr}, {"stop_sequence", nullptr}};
}

}  // namespace

std::variant<json, ApiError> MessagesToChat(const json& body) {
  if (!body.is_object()) return TranslatedFieldError("body", "expected a JSON object");
  static const std::set<std::string> kKnown = {
      "model", "max_tokens", "messages", "system", "temperature", "top_p", "top_k",
      "stop_sequences", "stream", "tools", "tool_choice", "thinking", "metadata"};
  for (const auto& [key, value] : body.items()) {
    if (!kKnown.count(key)) return TranslatedFieldError(key, "unknown parameter", "unknown_parameter");
  }
  if (!body.contains("max_tokens")) return TranslatedFieldError("max_tokens", "required", "missing_required_parameter");
  if (!body.contains("messages") || !body["messages"].is_array()) {
    return TranslatedFieldError("messages", "expected an array of messages", "missing_required_parameter");
  }
  json chat = json::object();
  json out = json::array();
  if (body.contains("system") && !body["system"].is_null()) {
    auto text = Text(body["system"], "system");
    if (auto* e = std::get_if<ApiError>(&text)) return *e;
    out.push_back({{"role", "system"}, {"content", std::get<std::string>(text)}});
  }
  const json& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return TranslatedFieldError(at + ".role", "expected user or assistant");
    }
    const std::string role = m["role"];
    if (role != "user" && role != "assistant") return TranslatedFieldError(at + ".role", "expected user or assistant");
    if (!m.contains("content")) return TranslatedFieldError(at + ".content", "required", "missing_required_parameter");
    const json& content = m["content"];
    if (content.is_string()) {
      out.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) return TranslatedFieldError(at + ".content", "expected a string or an array of blocks");
    std::string text;
    json calls = json::array();
    for (size_t j = 0; j < content.size(); ++j) {
      const json& b = content[j];
      const std::string bat = at + ".content[" + std::to_string(j) + "]";
      const std::string type = b.is_object() ? b.value("type", std::string()) : std::string();
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        text += b["text"].get<std::string>();
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string()) {
          return TranslatedFieldError(bat, "a tool_use block needs a string id and name");
        }
        calls.push_back({{"id", b["id"]}, {"type", "function"},
                         {"function", {{"name", b["name"]},
                                       {"arguments", b.value("input", json::object()).dump()}}}});
      } else if (type == "tool_result" && role == "user") {
        if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) {
          return TranslatedFieldError(bat + ".tool_use_id", "expected a string");
        }
        std::string result;
        if (b.contains("content")) {
          auto t = Text(b["content"], bat + ".content");
          if (auto* e = std::get_if<ApiError>(&t)) return *e;
          result = std::get<std::string>(t);
        }
        out.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
      } else if (type == "thinking" || type == "redacted_thinking") {
        // An earlier turn's thinking: not resent to the model (as chat templates drop it).
      } else {
        return TranslatedFieldError(bat + ".type", "'" + type + "' is not supported here (text, tool_use in "
                                                 "assistant turns, tool_result in user turns)",
                   "unsupported_value");
      }
    }
    if (!calls.empty()) {
      out.push_back({{"role", "assistant"}, {"content", text}, {"tool_calls", std::move(calls)}});
    } else if (!text.empty() || role == "assistant") {
      out.push_back({{"role", role}, {"content", text}});
    }
  }
  chat["messages"] = std::move(out);
  if (body.contains("model")) chat["model"] = body["model"];
  chat["max_tokens"] = body["max_tokens"];
  for (const char* k : {"temperature", "top_p", "top_k", "stream"}) {
    if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];
  }
  if (chat.value("stream", false)) chat["stream_options"] = {{"include_usage", true}};
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null()) {
    chat["stop"] = body["stop_sequences"];
  }
  if (body.contains("thinking") && body["thinking"].is_object()) {
    const json& t = body["thinking"];
    const std::string type = t.value("type", std::string());
    if (type == "enabled") {
      if (!t.contains("budget_tokens") || !t["budget_tokens"].is_number_integer()) {
        return TranslatedFieldError("thinking.budget_tokens", "expected an integer");
      }
      chat["thinking_budget_tokens"] = t["budget_tokens"];
    } else if (type == "disabled") {
      chat["thinking_budget_tokens"] = 0;
    } else {
      return TranslatedFieldError("thinking.type", "expected enabled or disabled");
    }
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return TranslatedFieldError("tools", "expected an array");
    json tools = json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const json& t = body["tools"][i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("name") || !t.contains("input_schema")) {
        return TranslatedFieldError(at, "expected {name, description?, input_schema} (client tools only)");
      }
      json fn = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
      if (t.contains("description")) fn["description"] = t["description"];
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(tools);
  }
  if (body.contains("tool_choice") && body["tool_choice"].is_object()) {
    const json& tc = body["tool_choice"];
    const std::string type = tc.value("type", std::string());
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool" && tc.contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
      return TranslatedFieldError("tool_choice.type", "expected auto, any, tool (with name) or none");
    }
    if (tc.value("disable_parallel_tool_use", false)) chat["parallel_tool_calls"] = false;
  }
  return chat;
}

json ChatToMessage(const json& chat) {
  json m = Shell(chat);
  std::string finish;
  if (chat.contains("choices") && chat["choices"].is_array() && !chat["choices"].empty()) {
    const json& c = chat["choices"][0];
    finish = c.value("finish_reason", std::string());
    const json& msg = c.value("message", json::object());
    if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string()) {
      m["content"].push_back({{"type", "thinking"}, {"thinking", msg["reasoning_content"]},
                              {"signature", ""}});
    }
    if (msg.contains("content") && msg["content"].is_string() &&
        !msg["content"].get_ref<const std::string&>().empty()) {
      m["content"].push_back({{"type", "text"}, {"text", msg["content"]}});
    }
    if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
      for (const json& tc : msg["tool_calls"]) {
        const json input = json::parse(tc["function"].value("arguments", std::string("{}")),
                                       nullptr, false);
        m["content"].push_back({{"type", "tool_use"}, {"id", tc.value("id", std::string())},
                                {"name", tc["function"].value("name", std::string())},
                                {"input", input.is_discarded() ? json::object() : input}});
      }
    }
  }
  m["stop_reason"] = StopReason(finish);
  m["usage"] = Usage(chat.value("usage", json()));
  if (chat.contains("timings")) m["timings"] = chat["timings"];
  return m;
}

void MessagesStream::Open(const std::string& kind, json block, std::vector<Event>* out) {
  Close(out);
  ++index_;
  open_kind_ = kind;
  out->push_back({"content_block_start",
                  {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}});
}

void MessagesStream::Close(std::vector<Event>* out) {
  if (open_kind_.empty()) return;
  out->push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  open_kind_.clear();
}

std::vector<MessagesStream::Event> MessagesStream::Feed(const json& chunk) {
  std::vector<Event> out;
  if (!chunk.is_object()) return out;
  if (!started_) {
    started_ = true;
    json m = Shell(chunk);
    m["usage"] = {{"input_tokens", 0}, {"output_tokens", 0}};
    out.push_back({"message_start", {{"type", "message_start"}, {"message", m}}});
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = chunk["usage"];
  if (chunk.contains("timings") && chunk["timings"].is_object()) timings_ = chunk["timings"];
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) {
    return out;
  }
  const json& c = chunk["choices"][0];
  if (c.contains("finish_reason") && c["finish_reason"].is_string()) finish_reason_ = c["finish_reason"];
  const json& d = c.value("delta", json::object());
  auto delta = [&](json body) {
    out.push_back({"content_block_delta",
                   {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(body)}}});
  };
  if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) {
    if (open_kind_ != "thinking") Open("thinking", {{"type", "thinking"}, {"thinking", ""}}, &out);
    delta({{"type", "thinking_delta"}, {"thinking", d["reasoning_content"]}});
  }
  if (d.contains("content") && d["content"].is_string() &&
      !d["content"].get_ref<const std::string&>().empty()) {
    if (open_kind_ != "text") Open("text", {{"type", "text"}, {"text", ""}}, &out);
    delta({{"type", "text_delta"}, {"text", d["content"]}});
  }
  if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
    for (const json& tc : d["tool_calls"]) {
      const int64_t i = tc.value("index", int64_t{0});
      const json& fn = tc.value("function", json::object());
      if (open_kind_ != "tool_use" || i != tool_index_) {
        Open("tool_use", {{"type", "tool_use"}, {"id", tc.value("id", std::string())},
                          {"name", fn.value("name", std::string())}, {"input", json::object()}},
             &out);
        tool_index_ = i;
        saw_tool_use_ = true;
      }
      const std::string piece = fn.value("arguments", std::string());
      if (!piece.empty()) delta({{"type", "input_json_delta"}, {"partial_json", piece}});
    }
  }
  return out;
}

std::vector<MessagesStream::Event> MessagesStream::Finish() {
  std::vector<Event> out;
  Close(&out);
  std::string reason = StopReason(finish_reason_);
  if (saw_tool_use_ && finish_reason_ == "stop") reason = "tool_use";
  json md = {{"type", "message_delta"},
             {"delta", {{"stop_reason", reason}, {"stop_sequence", nullptr}}},
             {"usage", {{"output_tokens", Usage(usage_)["output_tokens"]}}}};
  if (timings_.is_object()) md["timings"] = timings_;
  out.push_back({"message_delta", std::move(md)});
  out.push_back({"message_stop", {{"type", "message_stop"}}});
  return out;
}

}  // namespace lifeline::api
