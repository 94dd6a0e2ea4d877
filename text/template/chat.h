// The chat prompt: a conversation rendered through a model's Jinja chat template exactly as
// Hugging Face's apply_chat_template renders it. The template comes from the GGUF
// (`tokenizer.chat_template`), a built-in preset (the official templates of seven families,
// `--chat-template NAME`) or a user's file (`--chat-template-file`); never from a request.
//
// Globals, as transformers passes them: messages (the request's message objects as sent,
// content strings or text-part arrays, name, tool_calls, tool_call_id, ...), tools and
// documents (None when the request has none), add_generation_prompt, bos_token, eos_token,
// plus the request's chat_template_kwargs (e.g. enable_thinking), which may not rebind those.
//
// Ownership: a ChatTemplate owns its parsed template; copies share it.
// Thread-safety: Render is const and safe from any number of threads.
// Failure: Create returns InvalidArgument naming the origin and the template line for a
// syntax error; DryRun fails for a template that cannot render one user message; Render returns the
// template's own raise_exception message (jinja::IsTemplateRaise) or the evaluation error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "text/template/jinja.h"

namespace lifeline::chat {

struct Preset {
  const char* name;    // "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr"
  const char* origin;  // the model repository whose template it is
  const char* source;  // the Jinja source
};
const std::vector<Preset>& Presets();
std::string PresetNames();  // "chatml, llama2, ..." for help texts and errors

enum class Origin : uint8_t { kGguf, kPreset, kFile };
const char* OriginName(Origin origin);  // "gguf", "preset", "file"

struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null: the template sees None
  nlohmann::ordered_json documents;  // null: the template sees None
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

// Names chat_template_kwargs may not set (the template's own inputs).
bool IsReservedGlobal(std::string_view name);

class ChatTemplate {
 public:
  // `name`: the preset name, the file path, or "tokenizer.chat_template" for a GGUF's.
  static Result<ChatTemplate> Create(std::string_view source, Origin origin, std::string name,
                                     std::string bos_token, std::string eos_token);
  static Result<ChatTemplate> FromPreset(std::string_view preset, std::string bos_token,
                                         std::string eos_token);

  // Renders [{"role": "user", "content": "Hello"}] (and, for tool-use templates that need
  // tools, the same with one sample tool): run at load, so a template that cannot render the
  // simplest conversation is refused at start-up rather than on each request.
  Status DryRun() const;

  Result<std::string> Render(const ChatInput& input, const jinja::RenderLimits& limits = {},
                             const jinja::Clock& clock = {}) const;

  // llama.cpp's double-BOS rule: a prompt whose text already starts with the BOS token text
  // gets no second BOS from the tokenizer.
  bool StartsWithBos(std::string_view rendered) const {
    return !bos_token_.empty() && rendered.substr(0, bos_token_.size()) == bos_token_;
  }

  Origin origin() const { return origin_; }
  const std::string& name() const { return name_; }
  const std::string& source() const { return tmpl_.source(); }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  jinja::Template tmpl_;
  Origin origin_ = Origin::kPreset;
  std::string name_, bos_token_, eos_token_;
};

}  // namespace lifeline::chat
