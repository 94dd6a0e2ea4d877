// ToolCallGbnf: the grammar (llama.cpp's GBNF dialect, start rule `root`) that enforces
// tool_choice "required" (a call to any of the tools) or a named function: the model can
// write nothing but the format's call wrapper around a function name and arguments matching
// that function's `parameters` schema. One call, or 1 to kMaxParallelToolCalls with
// parallel_tool_calls (bounded: a forced call otherwise repeated until max_tokens cut it).
//
// What each format's grammar makes the model write (ARGS: the schema's rule; these are the
// texts the chat templates render for a call, so a model sees its trained format):
//   kHermes       <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//                 parallel: calls joined by "\n"
//   kLlama3Json   {"name": "NAME", "parameters": ARGS}             parallel: joined by "; "
//   kMistralNemo  [TOOL_CALLS][{"name": "NAME", "arguments": ARGS, "id": "<9 alnum>"}]
//                 parallel: array elements joined by ", "
//   kMistralArgs  [TOOL_CALLS]NAME[ARGS]ARGS                       parallel: repeated
//   kGeneric      {"name": "NAME", "arguments": ARGS}              parallel: that, or a JSON
//                 array of such objects joined by ", "
// Every text the grammar admits is parsed by ParseToolCalls(format) as the same call(s).
//
// Schemas are converted by the caller's SchemaToGbnf (the grammar module's converter), once
// per function, with rule_prefix "tool<i>-args-" (i = position in `tools`); the converter must
// define "<prefix>root" and only rules starting with the prefix. The wrapper's own rules are
// `root`, `tool-call` and, per function, `tool<i>-call` (plus `tool-id` for Mistral Nemo), so
// no two rules share a name; a converter output breaking that is an Internal error.
//
// Returns "" for tool_choice "auto" and "none" (nothing to enforce). Errors: InvalidArgument
// for kNone, for "required" with no tools, for a named function not in `tools`; a converter
// failure is returned with 'tools[i].function.parameters' in front of its message.
//
// Thread-safety: pure (given a pure converter). Failure: Status, never throws.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/gbnf_literal.h"
#include "base/status.h"
#include "text/toolcall/format.h"
#include "text/toolcall/tools.h"

namespace lifeline::toolcall {

// The most calls one forced answer may make with parallel_tool_calls.
inline constexpr int kMaxParallelToolCalls = 8;

using SchemaToGbnf = std::function<Result<std::string>(const nlohmann::ordered_json& schema,
                                                       const std::string& rule_prefix)>;

Result<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                 const ToolChoice& choice, bool parallel_tool_calls,
                                 const SchemaToGbnf& schema_to_gbnf);

// GBNF string literals: base/gbnf_literal.h (shared with text/grammar).
using ::lifeline::GbnfLiteral;

}  // namespace lifeline::toolcall
