// Turns one request's engine events into OpenAI's answer: the choices of a non-streamed body,
// or the chunks of a stream, with per-token log-probabilities and tool calls.
//
//   token events (index = choice)  -> text appended to the choice / a delta chunk
//   logprobs on a token event      -> chat: logprobs.content[] entries {token, logprob, bytes,
//                                     top_logprobs[]}; completions: tokens / token_logprobs /
//                                     top_logprobs / text_offset
//   reasoning on a token event      -> chat: message.reasoning_content / delta.reasoning_content
//                                     (a thinking model's thinking; never content, never
//                                     parsed for tool calls)
//   tool calls (chat, tools given)  -> the model's text goes through the format's stream
//                                     parser: content outside calls stays content, each call
//                                     becomes message.tool_calls[i] (streamed as OpenAI does:
//                                     {index, id, type, function: {name, arguments: ""}}, then
//                                     {index, function: {arguments}}); finish_reason
//                                     "tool_calls" when a call was made and the model stopped
//   embedding on a token event      -> the choice's `embedding` (array of floats) in the
//                                     non-streamed body: an embeddings / rerank request's
//                                     pooled vector or scores (embeddings_api.h answers it)
//   kChoiceDone / kDone             -> each choice's finish_reason, usage (with
//                                     prompt_tokens_details.cached_tokens), timings
//   the events' `lifeline` objects   -> `lifeline` on every choice ({"truncated": false} or
//                                     what the SLO ladder cut, serving_api.h); a stream's
//                                     finish chunk carries it, and a truncated stream ends
//                                     with one more chunk (empty choices, a top-level
//                                     `lifeline` listing the cut choices) before [DONE];
//                                     finish_reason stays OpenAI's ("length")
//
// Ownership: owns the choices' text and parser state. Thread-safety: one per request, used on
// its connection's strand. Failure: none (malformed tool-call text stays content).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/toolcall/format.h"
#include "api/serving_api.h"
#include "api/responses.h"

namespace lifeline::api {

struct AssemblerOptions {
  CompletionContext ctx;
  int32_t n_choices = 1;
  bool logprobs = false;
  // Chat with tools in play: the format the model's template writes calls in (kNone: none).
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kNone;
  uint64_t tool_call_id_seed = 0;
  bool infill = false;  // POST /infill: the body also carries llama.cpp's "content"
  // Where a thinking model's reasoning goes: "reasoning_content" (llama.cpp, DeepSeek's API)
  // or "reasoning" (vLLM's name, serve --reasoning-field reasoning).
  std::string reasoning_field = "reasoning_content";
};

class ChoiceAssembler {
 public:
  explicit ChoiceAssembler(AssemblerOptions options);
  ~ChoiceAssembler();
  ChoiceAssembler(const ChoiceAssembler&) = delete;
  ChoiceAssembler& operator=(const ChoiceAssembler&) = delete;

  // Streaming: the chunks to send now (maybe none). Non-streaming callers ignore the result.
  std::vector<nlohmann::json> OnToken(const GenerationEvent& event, bool stream);
  std::vector<nlohmann::json> OnChoiceDone(int32_t index, const std::string& finish_reason,
                                           bool stream,
                                           const nlohmann::json& lifeline = nullptr);
  // The end of a stream: finish chunks of the choices still open, then (include_usage) the
  // usage chunk. `timings` rides on the usage chunk, else on the last finish chunk.
  std::vector<nlohmann::json> StreamEnd(const GenerationEvent& done, bool include_usage,
                                        const nlohmann::json& timings);
  // The model the answer comes from changed before any chunk was made (a late request routed
  // to a lighter member): chunks and the body name `model` from now on.
  void SetModel(std::string model) { opts_.ctx.model = std::move(model); }
  // The non-streamed body.
  nlohmann::json FinalBody(const GenerationEvent& done, const nlohmann::json& timings);
  // After the last choice closed: the reasons of the truncated choices, comma-separated and
  // without repeats ("max_tokens_cap", "deadline"), for the X-Lifeline-Truncated header;
  // empty when none was cut.
  std::string TruncatedReasons() const;

 private:
  struct Choice;
  Choice& At(int32_t index);
  // Text through the tool-call parser (when tools are in play) into chunks / the choice.
  void Route(Choice& c, std::string_view text, bool stream, std::vector<nlohmann::json>* out);
  void CloseChoice(Choice& c, const std::string& finish_reason, const nlohmann::json& lifeline,
                   bool stream, std::vector<nlohmann::json>* out);
  nlohmann::json Chunk(const Choice& c, nlohmann::json delta_or_text) const;
  nlohmann::json LogprobsJson(const std::vector<TokenLogprobs>& entries, size_t text_offset) const;

  AssemblerOptions opts_;
  std::vector<std::unique_ptr<Choice>> choices_;
};

}  // namespace lifeline::api
