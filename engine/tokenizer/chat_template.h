// Chat templates: turn a list of {role, content} messages into the prompt text a chat model
// was trained on, for a fixed set of model families. There is no Jinja interpreter: the GGUF's
// `tokenizer.chat_template` is only inspected for distinctive markers (Detect) to pick one of
// the built-in renderers, and templates are never taken from requests.
//
// Each renderer reproduces what the family's official Hugging Face template produces, with
// bos/eos substituted by the caller's strings:
//   kChatML   <|im_start|>{role}\n{content}<|im_end|>\n ... [+ <|im_start|>assistant\n]
//             (teknium/OpenHermes, Qwen-style; no BOS). Roles: system, user, assistant, tool.
//   kLlama2   {bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} {eos}...
//             (meta-llama/Llama-2-*-chat; content stripped; no generation prompt exists).
//   kLlama3   {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>...
//             [+ <|start_header_id|>assistant<|end_header_id|>\n\n] (Meta-Llama-3-*-Instruct;
//             the 3.1+ tool / date preamble is not rendered).
//   kMistral  {bos} [INST] {system}\n\n{user} [/INST] {assistant}{eos} [INST] ...
//             (Mistral tokenizer v1: Mistral-7B-Instruct-v0.1/v0.2, Mixtral-8x7B-Instruct; the
//             system prompt is prepended to the first user message, as mistral-common does).
//   kGemma    {bos}<start_of_turn>user\n{system}\n\n{user|trim}<end_of_turn>\n
//             <start_of_turn>model\n{assistant|trim}<end_of_turn>\n ... [+ <start_of_turn>model\n]
//             (Gemma 3 template; identical to Gemma 1/2 when there is no system message).
//   kPhi3     <|system|>\n{system}<|end|>\n<|user|>\n{user}<|end|>\n<|assistant|>\n...
//             then <|assistant|>\n if add_generation_prompt, else {eos} (Phi-3-mini-4k-instruct).
//   kZephyr   <|system|>\n{system}{eos}\n<|user|>\n{user}{eos}\n ... [+ <|assistant|>\n]
//             (HuggingFaceH4/zephyr-7b-beta).
// "Trim"/"strip" follow Python's str.strip(): Unicode whitespace at both ends.
//
// BOS: the official templates write bos_token into the text. When the tokenizer also adds BOS
// by itself, pass an empty `bos_token` (or tokenize without auto-BOS) to avoid a double BOS.
//
// Ownership: pure functions over borrowed inputs; results are owned std::strings.
// Thread-safety: all functions are thread-safe (no state). Failure: Render returns
// InvalidArgument naming messages[i].role for roles the family does not support and for the
// ordering rules the official templates enforce (raise_exception there); FromName returns
// InvalidArgument listing the known names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lifeline::chat_template {

enum class Family : uint8_t { kChatML, kLlama2, kLlama3, kMistral, kGemma, kPhi3, kZephyr };

struct Message {
  std::string role;     // "system", "user", "assistant" (and "tool" where supported)
  std::string content;
};

// Picks the family from a Jinja chat template by its distinctive markers:
//   "<|im_start|>" ChatML; "[INST]" with "<<SYS>>" Llama 2, without it Mistral;
//   "<|start_header_id|>" Llama 3; "<start_of_turn>" Gemma; "<|user|>" with "<|end|>" Phi-3;
//   "<|user|>" with an end-of-sequence marker ("</s>", "eos_token", "<|endoftext|>") Zephyr.
// Anything else (including an empty template) yields kChatML, the documented safe default:
// it is the most widely trained format and its markers cannot be confused with content.
Family Detect(std::string_view jinja_template);

// Override-flag names: "chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr".
Result<Family> FromName(std::string_view name);

// The FromName spelling of a family.
const char* Name(Family family);

// Renders the conversation. add_generation_prompt appends the assistant-turn opener where the
// family's template has one (Llama 2 and Mistral end user turns with [/INST] already).
Result<std::string> Render(Family family, std::span<const Message> messages,
                           bool add_generation_prompt, std::string_view bos_token,
                           std::string_view eos_token);

}  // namespace lifeline::chat_template
