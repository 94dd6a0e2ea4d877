#include "text/toolcall/reasoning.h"

#include <algorithm>

namespace lifeline::toolcall {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t LeadingSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// The longest suffix of `s` that is a proper prefix of `marker` (what may still grow into it).
size_t HeldSuffix(std::string_view s, std::string_view marker) {
  const size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (marker.substr(0, n) == s.substr(s.size() - n)) return n;
  }
  return 0;
}

}  // namespace

std::string_view ReasoningFormatName(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kThinkTags: return "think";
    case ReasoningFormat::kBracketThink: return "bracket-think";
    case ReasoningFormat::kGranite: return "granite";
  }
  return "none";
}

std::optional<ReasoningFormat> ReasoningFormatFromName(std::string_view name) {
  for (ReasoningFormat f : {ReasoningFormat::kNone, ReasoningFormat::kThinkTags,
                            ReasoningFormat::kBracketThink, ReasoningFormat::kGranite}) {
    if (ReasoningFormatName(f) == name) return f;
  }
  return std::nullopt;
}

ReasoningFormat DetectReasoningFormat(std::string_view src) {
  // The closing markers: some templates only strip past thinking from the history
  // (content.split('</think>')) and never write the opening one.
  if (src.find("[/THINK]") != std::string_view::npos) return ReasoningFormat::kBracketThink;
  if (src.find("</think>") != std::string_view::npos) return ReasoningFormat::kThinkTags;
  if (src.find("Here is my thought process:") != std::string_view::npos) {
    return ReasoningFormat::kGranite;
  }
  return ReasoningFormat::kNone;
}

ReasoningMarkers MarkersOf(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kThinkTags: return {"<think>", "</think>"};
    case ReasoningFormat::kBracketThink: return {"[THINK]", "[/THINK]"};
    case ReasoningFormat::kGranite: return {"Here is my thought process:", "Here is my response:"};
    case ReasoningFormat::kNone: break;
  }
  return {};
}

bool StartsInReasoning(ReasoningFormat f, std::string_view prompt) {
  const ReasoningMarkers m = MarkersOf(f);
  if (m.open.empty()) return false;
  const size_t open = prompt.rfind(m.open);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(m.close);
  return close == std::string_view::npos || close < open;
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format, bool starts_in_reasoning)
    : m_(MarkersOf(format)),
      state_(format == ReasoningFormat::kNone ? State::kContent
             : starts_in_reasoning            ? State::kReasoning
                                              : State::kStart),
      saw_reasoning_(format != ReasoningFormat::kNone && starts_in_reasoning) {}

ReasoningDelta ReasoningSplitter::Feed(std::string_view text) {
  pending_.append(text);
  ReasoningDelta out;
  Run(/*final=*/false, &out);
  return out;
}

ReasoningDelta ReasoningSplitter::Finish() {
  ReasoningDelta out;
  Run(/*final=*/true, &out);
  return out;
}

// Appends `text` to the reasoning less its trailing whitespace (dropped when `last`: the
// block ends there), and returns how much of `text` was used (the held whitespace is not).
size_t ReasoningSplitter::Emit(std::string_view text, bool last, ReasoningDelta* out) {
  size_t end = text.size();
  while (end > 0 && IsSpace(text[end - 1])) --end;
  out->reasoning.append(text.substr(0, end));
  if (end > 0) reasoning_started_ = true;
  return last ? text.size() : end;
}

void ReasoningSplitter::Run(bool final, ReasoningDelta* out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        const std::string_view rest = std::string_view(pending_).substr(LeadingSpace(pending_));
        if (rest.empty()) {
          if (final) {
            out->content += pending_;  // an all-whitespace answer is still the answer
            pending_.clear();
          }
          return;
        }
        if (rest.starts_with(m_.open)) {
          pending_.erase(0, pending_.size() - rest.size() + m_.open.size());
          state_ = State::kReasoning;
          saw_reasoning_ = true;
          continue;
        }
        if (!final && m_.open.starts_with(rest)) return;  // may still be the opening marker
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        // The reasoning is trimmed at both ends, as llama.cpp's parser does: whitespace before
        // its first character is dropped, and whitespace is held until a character follows it
        // (before the close, or at the end, it is dropped). So a stream releases exactly what
        // the whole answer holds, and a forced close ("\n</think>") adds nothing to it.
        if (!reasoning_started_) {
          pending_.erase(0, LeadingSpace(pending_));
          if (pending_.empty()) return;
        }
        const size_t close = pending_.find(m_.close);
        if (close != std::string::npos) {
          Emit(std::string_view(pending_).substr(0, close), /*final=*/true, out);
          pending_.erase(0, close + m_.close.size());
          state_ = State::kAfterClose;
          continue;
        }
        const size_t keep = final ? 0 : HeldSuffix(pending_, m_.close);
        const size_t used = Emit(std::string_view(pending_).substr(0, pending_.size() - keep),
                                 final, out);
        pending_.erase(0, final ? pending_.size() : used);
        return;
      }
      case State::kAfterClose: {
        pending_.erase(0, LeadingSpace(pending_));
        if (pending_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out->content += pending_;
        pending_.clear();
        return;
    }
  }
}

}  // namespace lifeline::toolcall
