// The properties every parse must have, shared by the unit tests and the libFuzzer harness
// (tests/fuzz/toolcall_fuzz.cpp): whole-output and streamed parsing agree, and the result is
// well formed. Returns "" when all hold, else what broke.
//
//   - the streamed deltas, with the output cut at `cuts` (byte offsets, ascending), give the
//     same content, calls (id, name, arguments) and malformed flag as ParseToolCalls;
//   - each call is streamed as one first delta (its index, id, name, empty text) followed by
//     argument fragments with the same index; indices count up from 0;
//   - arguments parse as a JSON object whose compact dump is the arguments string itself;
//   - ids have the format's shape; names are non-empty; content has no outer whitespace
//     (except kNone, whose content is the output unchanged).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/toolcall/parser.h"

namespace lifeline::toolcall::testing {

inline bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

inline bool IdHasShape(ToolCallFormat format, const std::string& id) {
  const bool mistral =
      format == ToolCallFormat::kMistralNemo || format == ToolCallFormat::kMistralArgs;
  std::string_view rest = id;
  if (!mistral) {
    if (!rest.starts_with("call_")) return false;
    rest.remove_prefix(5);
  }
  if (rest.size() != (mistral ? 9u : 24u)) return false;
  for (char c : rest) {
    if (!IsAlnum(c)) return false;
  }
  return true;
}

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string CheckAgreement(ToolCallFormat format, std::string_view output,
                                  const std::vector<size_t>& cuts,
                                  const ToolCallParseOptions& options = {}) {
  const ParsedToolCalls whole = ParseToolCalls(format, output, options);

  ToolCallStreamParser stream(format, options);
  std::vector<ToolCallDelta> deltas;
  size_t prev = 0;
  for (size_t cut : cuts) {
    if (cut < prev || cut > output.size()) return "bad cut list";
    for (auto& d : stream.Push(output.substr(prev, cut - prev))) deltas.push_back(std::move(d));
    prev = cut;
  }
  for (auto& d : stream.Push(output.substr(prev))) deltas.push_back(std::move(d));
  for (auto& d : stream.Finish()) deltas.push_back(std::move(d));

  std::string content;
  std::vector<ToolCall> calls;
  bool expect_args = false;
  for (const ToolCallDelta& d : deltas) {
    if (d.kind == ToolCallDelta::Kind::kContent) {
      if (d.text.empty()) return "empty content delta";
      if (expect_args) return "content between a call's first delta and its arguments";
      content += d.text;
      continue;
    }
    if (d.first) {
      if (expect_args) return "call started before the previous call's arguments";
      if (d.index != calls.size()) return "call index " + std::to_string(d.index) + " out of order";
      if (!d.text.empty()) return "first delta of a call carries arguments";
      calls.push_back(ToolCall{d.id, d.name, ""});
      expect_args = true;
    } else {
      if (calls.empty() || d.index + 1 != calls.size()) return "arguments for a call not started";
      if (!d.id.empty() || !d.name.empty()) return "id or name repeated after the first delta";
      calls.back().arguments += d.text;
      expect_args = false;
    }
  }
  if (expect_args) return "a call without an arguments delta";
  if (content != whole.content) {
    return "content differs: streamed '" + content + "' whole '" + whole.content + "'";
  }
  if (calls != whole.calls) return "calls differ between streamed and whole";
  if (stream.malformed() != whole.malformed) return "malformed flag differs";
  if (stream.calls_emitted() != whole.calls.size()) return "calls_emitted differs";

  if (format == ToolCallFormat::kNone) {
    if (whole.content != output || !whole.calls.empty()) return "kNone changed the output";
    return "";
  }
  if (!content.empty() && (IsSpace(content.front()) || IsSpace(content.back()))) {
    return "content not trimmed";
  }
  for (const ToolCall& call : whole.calls) {
    if (call.name.empty()) return "empty name";
    if (!IdHasShape(format, call.id)) return "id '" + call.id + "' has the wrong shape";
    auto v = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    if (v.is_discarded() || !v.is_object()) return "arguments not a JSON object: " + call.arguments;
    if (v.dump() != call.arguments) return "arguments not compact: " + call.arguments;
  }
  return "";
}

}  // namespace lifeline::toolcall::testing
