// Request-side tool types: the `tools` and `tool_choice` fields of an OpenAI chat request,
// validated into ToolSpec / ToolChoice.
//
// tools: an array (at most kMaxTools entries, at most kMaxToolsBytes serialised) of
//   {"type": "function", "function": {"name": "...", "description": "...",
//                                     "parameters": {JSON Schema}, "strict": bool}}
//   type must be "function"; name must match ^[a-zA-Z0-9_-]{1,64}$ and be unique; description
//   is an optional string; parameters an optional object (absent or null: a function without
//   parameters, {"type": "object", "properties": {}}) whose "type", when present, is
//   "object" (arguments are always an object); strict an optional boolean. Other keys inside
//   a tool are passed through untouched (templates may read them).
// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name": "f"}}
//   where f names one of the tools; absent or null: "auto" with tools, "none" without.
//   "required" and a named function need at least one tool.
//
// Errors are InvalidArgument statuses whose message starts with the field path exactly as the
// JSON body spells it, in single quotes ('tools[2].type' must be "function", got "retrieval");
// ErrorFieldPath() gives the path back for the error's `param`.
//
// JSON values are nlohmann::ordered_json: a schema's property order is what the model was
// shown, and what a grammar built from it should keep (std::map-backed nlohmann::json sorts
// keys). The nlohmann::json overloads convert.
//
// Thread-safety: pure functions. Failure: Status, never throws.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::toolcall {

inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolsBytes = size_t{1} << 20;  // `tools` serialised, all entries
inline constexpr size_t kMaxToolNameBytes = 64;

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
  bool strict = false;
};

struct ToolChoice {
  enum class Mode : uint8_t { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function_name;  // kFunction only
  bool operator==(const ToolChoice&) const = default;
};

Result<std::vector<ToolSpec>> ParseTools(const nlohmann::ordered_json& tools);
Result<std::vector<ToolSpec>> ParseTools(const nlohmann::json& tools);

// `choice` is the tool_choice value, null when the field is absent.
Result<ToolChoice> ParseToolChoice(const nlohmann::ordered_json& choice,
                                   const std::vector<ToolSpec>& tools);
Result<ToolChoice> ParseToolChoice(const nlohmann::json& choice,
                                   const std::vector<ToolSpec>& tools);

// The quoted field path a ParseTools / ParseToolChoice error message starts with ("" if none).
std::string ErrorFieldPath(const Status& status);

// ^[a-zA-Z0-9_-]{1,64}$
bool IsValidToolName(std::string_view name);

}  // namespace lifeline::toolcall
