// Reasoning ("thinking") in a model's output: which syntax a chat template implies, whether an
// answer starts inside its thinking (the generation prompt already opened it), and a streaming
// splitter of the output into reasoning and answer text, as llama.cpp's `reasoning_content`,
// vLLM's reasoning parsers and DeepSeek's API do.
//
// Formats (DetectReasoningFormat, from the template source; first match wins):
//   kBracketThink [THINK] ... [/THINK]: Magistral.
//   kThinkTags    <think> ... </think>: DeepSeek R1 and its distills (whose generation prompt
//                 ends with "<think>\n", so the output starts inside the thinking and only
//                 closes it), QwQ, Qwen3 (thinking on by default; enable_thinking=false renders
//                 an empty "<think>\n\n</think>\n\n" into the prompt), SmolLM3 (/think,
//                 /no_think).
//   kGranite      "Here is my thought process:" ... "Here is my response:" (Granite 3.2 / 3.3
//                 with thinking on).
//   kNone         no split: the whole output is the answer.
//
// Splitting (ReasoningSplitter): reasoning is one block at the start of the output -- after
// optional leading whitespace, the opening marker (or none, when the prompt opened it) and
// everything up to the closing marker; the whitespace right after the closing marker is
// dropped; everything after is the answer (a later opening marker is answer text). Text that
// may still become a marker is held back until it cannot (a stream cut at any byte splits the
// same as the whole output). Output that ends inside the thinking (max_tokens reached) is all
// reasoning, not answer.
//
// Thread-safety: DetectReasoningFormat and StartsInReasoning are pure; a splitter is used by
// one output at a time. Failure: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lifeline::toolcall {

enum class ReasoningFormat : uint8_t { kNone, kThinkTags, kBracketThink, kGranite };

// "none", "think", "bracket-think", "granite".
std::string_view ReasoningFormatName(ReasoningFormat f);
// The inverse, for `--reasoning-format` ("auto" is the caller's); nullopt for an unknown name.
std::optional<ReasoningFormat> ReasoningFormatFromName(std::string_view name);
ReasoningFormat DetectReasoningFormat(std::string_view template_source);

struct ReasoningMarkers {
  std::string_view open;   // e.g. "<think>"
  std::string_view close;  // e.g. "</think>"
};
ReasoningMarkers MarkersOf(ReasoningFormat f);  // empty views for kNone

// Whether a generation that continues `prompt` starts inside its reasoning: the prompt's last
// opening marker comes after its last closing marker (R1's "<think>\n").
bool StartsInReasoning(ReasoningFormat f, std::string_view prompt);

// What one Feed / Finish releases: reasoning and answer text, in output order (reasoning
// always comes before any answer text).
struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  // kNone: everything is content at once.
  ReasoningSplitter(ReasoningFormat format, bool starts_in_reasoning);

  ReasoningDelta Feed(std::string_view text);
  // End of output: releases what was held; unterminated reasoning stays reasoning.
  ReasoningDelta Finish();

  bool in_reasoning() const { return state_ == State::kReasoning; }
  // The closing marker was seen (or there was no reasoning block): what comes now is answer.
  bool answering() const { return state_ == State::kContent || state_ == State::kAfterClose; }
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State : uint8_t {
    kStart,       // nothing but whitespace yet: an opening marker may come
    kReasoning,   // inside the block
    kAfterClose,  // just after the closing marker: whitespace dropped
    kContent,     // the answer
  };
  void Run(bool final, ReasoningDelta* out);
  size_t Emit(std::string_view text, bool last, ReasoningDelta* out);

  ReasoningMarkers m_;
  State state_;
  bool saw_reasoning_ = false;
  bool reasoning_started_ = false;  // a non-space reasoning character was released
  std::string pending_;  // held back: may still be (part of) a marker
};

}  // namespace lifeline::toolcall
