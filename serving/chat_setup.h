// Which chat template a model serves with, and how a rendered chat prompt becomes tokens.
// Shared by `lifeline serve` (ModelEngine), `lifeline run --chat` and `lifeline template`.
//
// Choice, first that applies: --chat-template-file FILE, --chat-template NAME (a preset), the
// GGUF's `tokenizer.chat_template`, else the chatml preset (a GGUF without a template; said in
// `fallback_note` so start-up logs show it). bos_token / eos_token are the texts of the
// vocabulary's BOS / EOS tokens. The chosen template is dry-run (one user message) before it
// is returned; a failure is reported in `dry_run_error` for the start-up log (a template that
// cannot render that may still render the conversations its clients send), and a template
// that does not parse is an error.
//
// Failure: InvalidArgument naming the flag (--chat-template, --chat-template-file) or the GGUF
// key and, for template errors, the template line; NotFound for a missing file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"
#include "text/template/chat.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::serving {

struct ChatTemplateChoice {
  std::string preset;  // --chat-template NAME; "" = not given
  std::string file;    // --chat-template-file PATH; "" = not given
};

// A template source above this is refused (file or GGUF): real ones are under 32 KiB.
inline constexpr uint64_t kMaxChatTemplateBytes = 1u << 20;

struct ResolvedChatTemplate {
  chat::ChatTemplate tmpl;
  std::string fallback_note;  // non-empty when the GGUF had no template and chatml is used
  std::string dry_run_error;  // non-empty when one user message failed to render
};

Result<ResolvedChatTemplate> ResolveChatTemplate(const GgufFile& file, const Tokenizer& tokenizer,
                                                 const ChatTemplateChoice& choice);

// "gguf tokenizer.chat_template (2431 bytes)", "preset llama3", "file my.jinja (812 bytes)".
std::string DescribeChatTemplate(const chat::ChatTemplate& tmpl);

// Tokens of a rendered chat prompt: special-token text parsed; BOS prepended when the vocab
// adds one and the text does not already start with the BOS text (no double BOS).
std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, const chat::ChatTemplate& tmpl,
                                      const std::string& text);

}  // namespace lifeline::serving
