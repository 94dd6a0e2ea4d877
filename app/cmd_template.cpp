// lifeline template -m MODEL.gguf [--messages FILE.json] [--chat-template NAME |
//   --chat-template-file FILE] [--tools FILE.json] [--no-generation-prompt] [--kwargs JSON]
//   [--tokens]
// Renders a conversation through the chat template `lifeline serve` would use for this model and
// prints the prompt on stdout byte for byte (no newline added), so a template can be checked
// without starting a server. stderr says which template was chosen; with --tokens also the
// prompt's token ids as the server encodes them. Only the GGUF's metadata and vocabulary are
// read (the file is mapped, the weights never touched), so it is quick for any model size.
// Errors: one line on stderr, exit status 1.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli_common.h"
#include "app/commands.h"
#include "engine/gguf/gguf_file.h"
#include "text/template/chat.h"
#include "text/template/jinja.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/chat_setup.h"

namespace lifeline::app {
namespace {

using nlohmann::ordered_json;

struct TemplateFlags {
  std::string model_path;
  std::string messages_path;  // "" = the default conversation
  serving::ChatTemplateChoice choice;
  std::string tools_path;
  bool no_generation_prompt = false;
  std::string kwargs_json;
  bool tokens = false;
};

// A conversation file far above any context window is a mistake, not a prompt.
constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;

int Fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';  // one line per error, whatever the template raised
  }
  std::fprintf(stderr, "lifeline template: %s\n", line.c_str());
  return 1;
}

// A system and a user turn: enough to show where a template puts the system prompt, the
// turn markers and the generation prompt.
ordered_json DefaultMessages() {
  return ordered_json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                              {{"role", "user"}, {"content", "Hello"}}});
}

Result<std::string> ReadTextFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(flag + ": cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return IoError(flag + ": cannot read '" + path + "'");
  if (static_cast<uint64_t>(size) > kMaxJsonFileBytes) {
    return InvalidArgument(flag + ": '" + path + "' is " + std::to_string(size) +
                           " bytes; the limit is " + std::to_string(kMaxJsonFileBytes));
  }
  in.seekg(0);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError(flag + ": cannot read '" + path + "'");
  return ss.str();
}

// Ordered, because the template sees key order (tojson, dict iteration) as Python would.
// `where` names the flag and file (or the flag alone for inline JSON).
Result<ordered_json> ParseJson(const std::string& where, const std::string& text) {
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::parse_error& e) {
    // e.what() starts with "[json.exception.parse_error.N] "; the byte offset says the rest.
    std::string what = e.what();
    if (const size_t cut = what.find("] "); cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgument(where + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + what);
  }
}

Result<ordered_json> ReadJsonFile(const std::string& flag, const std::string& path) {
  LL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(flag, path));
  return ParseJson(flag + " " + path, text);
}

// What the template indexes without a guard: every message is an object with a string role.
Status CheckMessages(const std::string& where, const ordered_json& messages) {
  if (!messages.is_array()) return InvalidArgument(where + ": \"messages\" must be an array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidArgument(where + ": messages[" + std::to_string(i) +
                             "] is not an object with a string \"role\"");
    }
  }
  return Status::Ok();
}

Status CheckTools(const std::string& where, const ordered_json& tools) {
  if (!tools.is_null() && !tools.is_array()) {
    return InvalidArgument(where + ": tools must be an array of tool definitions");
  }
  return Status::Ok();
}

// chat_template_kwargs: an object whose names are not the template's own inputs.
Status CheckKwargs(const std::string& where, const ordered_json& kwargs) {
  if (!kwargs.is_object()) return InvalidArgument(where + ": chat_template_kwargs must be a JSON object");
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    if (chat::IsReservedGlobal(it.key())) {
      return InvalidArgument(where + ": '" + it.key() +
                             "' is one of the template's own inputs and cannot be set");
    }
  }
  return Status::Ok();
}

// --messages FILE: a bare array of messages, or a chat-completions body whose messages,
// tools, documents, chat_template_kwargs and add_generation_prompt are used (other fields,
// such as model or temperature, are ignored so a request body can be passed as it is).
Result<chat::ChatInput> InputFromMessagesFile(const std::string& path) {
  const std::string where = "--messages " + path;
  LL_ASSIGN_OR_RETURN(ordered_json doc, ReadJsonFile("--messages", path));
  chat::ChatInput input;
  if (doc.is_array()) {
    input.messages = std::move(doc);
  } else if (doc.is_object() && doc.contains("messages")) {
    input.messages = doc["messages"];
    if (doc.contains("tools")) input.tools = doc["tools"];
    if (doc.contains("documents")) input.documents = doc["documents"];
    if (doc.contains("chat_template_kwargs") && !doc["chat_template_kwargs"].is_null()) {
      input.kwargs = doc["chat_template_kwargs"];
      LL_RETURN_IF_ERROR(CheckKwargs(where, input.kwargs));
    }
    if (doc.contains("add_generation_prompt")) {
      if (!doc["add_generation_prompt"].is_boolean()) {
        return InvalidArgument(where + ": add_generation_prompt must be true or false");
      }
      input.add_generation_prompt = doc["add_generation_prompt"].get<bool>();
    }
  } else {
    return InvalidArgument(where +
                           ": expected an array of messages or an object with \"messages\"");
  }
  LL_RETURN_IF_ERROR(CheckMessages(where, input.messages));
  LL_RETURN_IF_ERROR(CheckTools(where, input.tools));
  return input;
}

// The conversation and options from the flags; each flag overrides what the --messages body
// says, so one conversation can be tried with other tools or kwargs.
Result<chat::ChatInput> BuildInput(const TemplateFlags& f) {
  chat::ChatInput input;
  if (f.messages_path.empty()) {
    input.messages = DefaultMessages();
  } else {
    LL_ASSIGN_OR_RETURN(input, InputFromMessagesFile(f.messages_path));
  }
  if (!f.tools_path.empty()) {
    LL_ASSIGN_OR_RETURN(input.tools, ReadJsonFile("--tools", f.tools_path));
    if (!input.tools.is_array()) {
      return InvalidArgument("--tools " + f.tools_path + ": expected a JSON array of tool definitions");
    }
  }
  if (!f.kwargs_json.empty()) {
    LL_ASSIGN_OR_RETURN(ordered_json kwargs, ParseJson("--kwargs", f.kwargs_json));
    LL_RETURN_IF_ERROR(CheckKwargs("--kwargs", kwargs));
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) input.kwargs[it.key()] = it.value();
  }
  if (f.no_generation_prompt) input.add_generation_prompt = false;
  return input;
}

std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

int RunTemplate(const TemplateFlags& f) {
  // Everything the flags alone decide is checked before the GGUF is opened.
  if (Status s = CheckChatTemplateChoice(f.choice); !s.ok()) return Fail(s.message());
  auto input = BuildInput(f);
  if (!input.ok()) return Fail(input.status().message());

  auto file = GgufFile::Open(f.model_path);
  if (!file.ok()) return Fail(f.model_path + ": " + file.status().ToString());
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return Fail(f.model_path + ": " + tok.status().ToString());
  auto resolved = serving::ResolveChatTemplate(**file, **tok, f.choice);
  if (!resolved.ok()) return Fail(resolved.status().message());
  const chat::ChatTemplate& tmpl = resolved->tmpl;
  std::fprintf(stderr, "chat template: %s\n", serving::DescribeChatTemplate(tmpl).c_str());
  if (!resolved->fallback_note.empty()) std::fprintf(stderr, "note: %s\n", resolved->fallback_note.c_str());

  auto text = tmpl.Render(*input);
  if (!text.ok()) {
    // A raise_exception message is already "template raised: ..."; other failures are the
    // interpreter's "template line L: ...".
    std::string msg = jinja::IsTemplateRaise(text.status())
                          ? text.status().message()
                          : "rendering failed: " + text.status().message();
    if (f.messages_path.empty()) msg += " (with the default system + user conversation; pass --messages FILE)";
    return Fail(msg);
  }
  if (std::fwrite(text->data(), 1, text->size(), stdout) != text->size() || std::fflush(stdout) != 0) {
    return Fail("writing stdout failed");
  }
  if (f.tokens) {
    const std::vector<int32_t> ids = serving::EncodeChatPrompt(**tok, tmpl, *text);
    std::fprintf(stderr, "prompt tokens: %zu\nprompt token ids: %s\n", ids.size(), JoinIds(ids).c_str());
  }
  return 0;
}

}  // namespace

CommandFn RegisterTemplate(CLI::App& root) {
  auto flags = std::make_shared<TemplateFlags>();
  CLI::App* cmd = root.add_subcommand(
      "template", "Render a conversation through a model's chat template and print the prompt");
  cmd->add_option("-m,--model", flags->model_path, "GGUF file (only its metadata and vocabulary are read)")
      ->required();
  cmd->add_option("--messages", flags->messages_path,
                  "JSON file: an array of messages, or a chat-completions body {messages, tools, "
                  "chat_template_kwargs, add_generation_prompt} (default: a system + user turn)");
  AddChatTemplateFlags(cmd, &flags->choice);
  cmd->add_option("--tools", flags->tools_path, "JSON file: an array of OpenAI tool definitions");
  cmd->add_flag("--no-generation-prompt", flags->no_generation_prompt,
                "Render with add_generation_prompt=false (no opening of the assistant turn)");
  cmd->add_option("--kwargs", flags->kwargs_json,
                  "chat_template_kwargs as a JSON object, e.g. '{\"enable_thinking\": false}'");
  cmd->add_flag("--tokens", flags->tokens,
                "Also print the prompt's token count and ids on stderr, encoded as the server does");
  return [flags] { return RunTemplate(*flags); };
}

}  // namespace lifeline::app
