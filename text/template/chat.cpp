#include "text/template/chat.h"

namespace lifeline::chat {

std::string PresetNames() {
  std::string out;
  for (const Preset& p : Presets()) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

const char* OriginName(Origin origin) {
  switch (origin) {
    case Origin::kGguf: return "gguf";
    case Origin::kPreset: return "preset";
    case Origin::kFile: return "file";
  }
  return "?";
}

bool IsReservedGlobal(std::string_view name) {
  return name == "messages" || name == "tools" || name == "documents" ||
         name == "add_generation_prompt" || name == "bos_token" || name == "eos_token";
}

Result<ChatTemplate> ChatTemplate::Create(std::string_view source, Origin origin,
                                          std::string name, std::string bos_token,
                                          std::string eos_token) {
  const std::string where = std::string("chat template (") + OriginName(origin) + " " + name + ")";
  auto tmpl = jinja::Template::Parse(source);
  if (!tmpl.ok()) return InvalidArgument(where + ": " + tmpl.status().message());
  ChatTemplate t;
  t.tmpl_ = std::move(*tmpl);
  t.origin_ = origin;
  t.name_ = std::move(name);
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  return t;
}

Status ChatTemplate::DryRun() const {
  ChatInput probe;
  probe.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto r = Render(probe);
  if (!r.ok()) {
    // Tool-use templates (Hermes' and Command R's "tool_use") loop over `tools` and only
    // render when a request has some: one sample tool must then do.
    probe.tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "get_time", "description": "The time.",
             "parameters": {"type": "object", "properties": {}, "required": []}}}])");
    if (Render(probe).ok()) return Status::Ok();
  }
  if (!r.ok()) {
    return InvalidArgument(std::string("chat template (") + OriginName(origin_) + " " + name_ +
                           ") fails to render one user message: " + r.status().message());
  }
  return Status::Ok();
}

Result<ChatTemplate> ChatTemplate::FromPreset(std::string_view preset, std::string bos_token,
                                              std::string eos_token) {
  for (const Preset& p : Presets()) {
    if (preset == p.name) {
      return Create(p.source, Origin::kPreset, p.name, std::move(bos_token), std::move(eos_token));
    }
  }
  return InvalidArgument("unknown chat template '" + std::string(preset) +
                         "'; known: " + PresetNames());
}

Result<std::string> ChatTemplate::Render(const ChatInput& input, const jinja::RenderLimits& limits,
                                         const jinja::Clock& clock) const {
  if (!input.messages.is_array()) return InvalidArgument("messages must be an array");
  if (!input.kwargs.is_null() && !input.kwargs.is_object()) {
    return InvalidArgument("chat_template_kwargs must be an object");
  }
  nlohmann::ordered_json globals = nlohmann::ordered_json::object();
  if (input.kwargs.is_object()) {
    for (auto it = input.kwargs.begin(); it != input.kwargs.end(); ++it) {
      if (IsReservedGlobal(it.key())) {
        return InvalidArgument("chat_template_kwargs." + it.key() +
                               " is set by the server and cannot be overridden");
      }
      globals[it.key()] = it.value();
    }
  }
  globals["messages"] = input.messages;
  globals["tools"] = input.tools;
  globals["documents"] = input.documents;
  globals["add_generation_prompt"] = input.add_generation_prompt;
  globals["bos_token"] = bos_token_;
  globals["eos_token"] = eos_token_;
  return tmpl_.Render(globals, limits, clock);
}

}  // namespace lifeline::chat
