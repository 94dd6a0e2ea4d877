// Tool-call formats: how a model writes a function call into its output text, which format a
// chat template implies, and which marker texts the detokenizer must let through.
//
// The formats (examples are model output, after the assistant turn's opener):
//
//   kLlama3Json   Llama 3.1 / 3.2 / 3.3. A call is a JSON object at the START of the output,
//                 optionally after <|python_tag|>; "parameters" holds the arguments ("arguments"
//                 is accepted too). Several calls are separated by ';' and/or whitespace; text
//                 after the last call is content. <|python_tag|> later in the text starts a call
//                 as well.
//                   {"name": "get_weather", "parameters": {"city": "Paris"}}
//                   <|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}
//
//   kHermes       Hermes 2 Pro / Hermes 3, Qwen2.5, Qwen3, QwQ, Granite 4.0. Calls are JSON
//                 objects between <tool_call> and </tool_call>, anywhere in the text, any number.
//                 A closing tag cut off at the end of the output is accepted. A <think>...</think>
//                 block at the start stays in the content, and markers inside it are not calls.
//                   Let me check.
//                   <tool_call>
//                   {"name": "get_weather", "arguments": {"city": "Paris"}}
//                   </tool_call>
//
//   kMistralNemo  Mistral 7B v0.3, Mistral Nemo, Mistral Small 3.1. [TOOL_CALLS] then a JSON array
//                 of calls, each with "name", "arguments" (an object, or a string holding one) and
//                 the model's own "id" (ignored: ids are ours, see parser.h).
//                   [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]
//
//   kMistralArgs  Mistral Small 3.2, Devstral, Magistral. One [TOOL_CALLS] per call, the name,
//                 an optional [CALL_ID]<id>, then [ARGS] and the arguments object. Magistral's
//                 leading [THINK]...[/THINK] stays in the content.
//                   [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}
//                 Both Mistral formats parse both Mistral syntaxes; they differ in what the
//                 grammar for a forced call makes the model write.
//
//   kGeneric      Any other template (no native call syntax, or one this module does not parse:
//                 DeepSeek, Command R7B, functionary, Qwen3-Coder XML, GLM, gpt-oss, ...). A call
//                 is the output itself being one JSON call object, or a JSON array of them:
//                   {"name": "get_weather", "arguments": {"city": "Paris"}}
//                   [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]
//                 Why this fallback: it needs no special token, so any vocabulary can write it
//                 (a forced call on a model with no tool training is still a parseable call);
//                 it is the shape OpenAI's own function objects have and what instruction-tuned
//                 models write when asked for "JSON for a function call"; and it is unambiguous,
//                 because only output that begins with a JSON value is examined, and plain
//                 prose never does. llama.cpp's generic format ({"tool_call": {...}} or
//                 {"response": "..."}) was not taken: it forces every answer into JSON even
//                 under tool_choice "auto", which changes answers that call nothing.
//
//   kNone         No tool parsing: the whole output is content, unchanged (a request without
//                 tools, or tool_choice "none").
//
// Detection (DetectToolCallFormat) follows llama.cpp's common/chat.cpp, which looks for marker
// strings in the template source; first match wins:
//   1. "[TOOL_CALLS]" and "[ARGS]"                                 -> kMistralArgs
//   2. "[TOOL_CALLS]"                                              -> kMistralNemo
//   3. "<tool_call>", unless the template uses Qwen3-Coder's XML
//      ("<function=" and "<parameter=") or GLM's ("<arg_key>")    -> kHermes
//   4. "<|start_header_id|>ipython<|end_header_id|>", unless it is
//      functionary v3.1 ("<function=")                             -> kLlama3Json
//   5. anything else                                               -> kGeneric
// DetectToolCallFormat never returns kNone.
//
// Thread-safety: pure functions over borrowed input. Failure: none (total functions).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace lifeline::toolcall {

enum class ToolCallFormat : uint8_t {
  kNone,
  kLlama3Json,
  kHermes,
  kMistralNemo,
  kMistralArgs,
  kGeneric,
};

// "none", "llama3-json", "hermes", "mistral-nemo", "mistral-args", "generic".
std::string_view ToolCallFormatName(ToolCallFormat format);
// The inverse of ToolCallFormatName (e.g. for a flag that overrides detection).
std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name);

ToolCallFormat DetectToolCallFormat(std::string_view chat_template_source);

// The marker texts a format's calls are written with. In many vocabularies these are special
// (control) tokens whose text a detokenizer hides by default; for a request with tools the
// detokenizer must emit their text, or the parser never sees a call. Empty for kGeneric and
// kNone (plain JSON text).
std::span<const std::string_view> ToolCallMarkers(ToolCallFormat format);

}  // namespace lifeline::toolcall
