// Helpers shared by the request parser (openai.cpp) and the field appliers
// (request_fields.cpp, output_fields.cpp). Internal to api/.
#pragma once

#include <string>
#include <string_view>

#include "api/openai.h"

namespace lifeline::api::detail {

// Shortest "%g" form that round-trips, else 17 digits.
std::string FormatNumber(double v);
// The value as the client wrote it, cut to 64 bytes so a huge value cannot bloat an error.
std::string Echo(const nlohmann::json& value);
// "[min, max]" / "(min, max)" of a numeric field.
std::string RangeText(const FieldSpec& spec);
// 400 invalid_type: "'param' must be <expected>, got <type> <value>".
ApiError TypeError(std::string_view param, std::string_view expected, const nlohmann::json& value);
bool BelowMin(const FieldSpec& s, double v);
bool AboveMaxBound(const FieldSpec& s, double v);
// 400 out_of_range naming the field, the value and the allowed range.
ApiError RangeError(const FieldSpec& spec, const nlohmann::json& value);
// One token-id prompt (a completions `prompt` entry, an embeddings `input` entry): at most
// max_prompt_token_ids integers in [0, 2^31), the engine checks them against its vocabulary;
// refusals name `param[k]`.
std::optional<ApiError> ParseTokenPrompt(const nlohmann::json& v, const std::string& param,
                                         const RequestLimits& limits, PromptInput* out);
// [A-Za-z0-9_.-]: slo_class / user_role characters.
bool IsNameChar(char c);

}  // namespace lifeline::api::detail
