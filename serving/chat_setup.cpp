#include "serving/chat_setup.h"

#include <fstream>
#include <sstream>

namespace lifeline::serving {
namespace {

std::string TokenTextOrEmpty(const Tokenizer& tok, int32_t id) {
  return id >= 0 ? std::string(tok.TokenText(id)) : std::string();
}

Result<std::string> ReadTemplateFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("--chat-template-file: cannot open '" + path + "'");
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0) return IoError("--chat-template-file: cannot read '" + path + "'");
  if (static_cast<uint64_t>(size) > kMaxChatTemplateBytes) {
    return InvalidArgument("--chat-template-file: '" + path + "' is " + std::to_string(size) +
                           " bytes; the limit is " + std::to_string(kMaxChatTemplateBytes));
  }
  f.seekg(0);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Result<ResolvedChatTemplate> ResolveChatTemplate(const GgufFile& file, const Tokenizer& tokenizer,
                                                 const ChatTemplateChoice& choice) {
  if (!choice.preset.empty() && !choice.file.empty()) {
    return InvalidArgument("--chat-template and --chat-template-file exclude each other");
  }
  std::string bos = TokenTextOrEmpty(tokenizer, tokenizer.bos_id());
  std::string eos = TokenTextOrEmpty(tokenizer, tokenizer.eos_id());
  ResolvedChatTemplate out{chat::ChatTemplate(), "", ""};
  Result<chat::ChatTemplate> t = InvalidArgument("unset");
  if (!choice.file.empty()) {
    LL_ASSIGN_OR_RETURN(std::string source, ReadTemplateFile(choice.file));
    t = chat::ChatTemplate::Create(source, chat::Origin::kFile, choice.file, bos, eos);
    if (!t.ok()) return InvalidArgument("--chat-template-file: " + t.status().message());
  } else if (!choice.preset.empty()) {
    t = chat::ChatTemplate::FromPreset(choice.preset, bos, eos);
    if (!t.ok()) return InvalidArgument("--chat-template: " + t.status().message());
  } else if (auto src = file.GetString("tokenizer.chat_template"); src.ok() && !src->empty()) {
    if (src->size() > kMaxChatTemplateBytes) {
      return InvalidArgument("tokenizer.chat_template is " + std::to_string(src->size()) +
                             " bytes; the limit is " + std::to_string(kMaxChatTemplateBytes) +
                             " (pass --chat-template NAME or --chat-template-file FILE)");
    }
    t = chat::ChatTemplate::Create(*src, chat::Origin::kGguf, "tokenizer.chat_template", bos, eos);
    if (!t.ok()) {
      return InvalidArgument(t.status().message() +
                             " (pass --chat-template NAME or --chat-template-file FILE)");
    }
  } else {
    t = chat::ChatTemplate::FromPreset("chatml", bos, eos);
    out.fallback_note = "the GGUF has no tokenizer.chat_template; using the chatml preset";
  }
  LL_RETURN_IF_ERROR(t.status());
  if (Status s = t->DryRun(); !s.ok()) {
    // Said, not fatal: a template may refuse the probe yet render what clients send (one that
    // insists on a system message, say); each request it cannot render gets its own 400.
    out.dry_run_error = s.message();
    if (t->origin() == chat::Origin::kGguf) {
      out.dry_run_error += " (pass --chat-template NAME or --chat-template-file FILE)";
    }
  }
  out.tmpl = std::move(*t);
  return out;
}

std::string DescribeChatTemplate(const chat::ChatTemplate& tmpl) {
  std::string d = std::string(chat::OriginName(tmpl.origin())) + " " + tmpl.name();
  if (tmpl.origin() != chat::Origin::kPreset) {
    d += " (" + std::to_string(tmpl.source().size()) + " bytes)";
  }
  return d;
}

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, const chat::ChatTemplate& tmpl,
                                      const std::string& text) {
  const bool add_bos = tokenizer.add_bos() && !tmpl.StartsWithBos(text);
  return tokenizer.Encode(text, add_bos, /*parse_special=*/true);
}

}  // namespace lifeline::serving
