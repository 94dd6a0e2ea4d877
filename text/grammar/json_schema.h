// JSON Schema -> GBNF, for response_format json_schema and tool-call arguments.
//
// Supported (the subset OpenAI's strict structured outputs allows, and a little more):
//   type: object, array, string, number, integer, boolean, null, or an array of these;
//   properties (emitted in the schema's order), required (listed ones must appear; the others
//   may be left out), additionalProperties false / true / a schema (absent: extra properties of
//   any value when !strict, none when strict); items, minItems, maxItems; enum and const of any
//   JSON value; anyOf; allOf with one member; $ref to local JSON pointers ("#", "#/$defs/X",
//   "#/definitions/X", any "#/..."), recursion included; string minLength / maxLength;
//   integer minimum / maximum / exclusiveMinimum / exclusiveMaximum (any numeric bound,
//   rounded inward) and number minimum / maximum (integer-valued bounds; the bounded number
//   is written without exponent), both as exact digit grammars (numeric_range.h); format
//   date, time, date-time, uuid enforced, other formats accepted as plain strings;
//   description, title, default, examples, $schema, $id, $comment, deprecated, readOnly,
//   writeOnly ignored. A schema without type is inferred from its keywords, else any value.
// Numbers are JSON numbers with at most 16 integer and 16 fraction digits and a 1-2 digit
// exponent (an unbounded digit run is how small models fail); -0 is allowed, leading zeros not.
// Strings: JSON strings (escapes incl. \uXXXX, no raw control characters). Whitespace between
// tokens: nothing, one space, or a newline and up to max_whitespace_chars - 1 spaces/tabs.
//
// Rule names: every rule starts with rule_prefix and the schema's top rule is
// `<rule_prefix>root`, so several schemas can be combined into one grammar.
//
// Failure: InvalidArgument naming the JSON path, e.g. "schema.properties.age.multipleOf: not
// supported"; ResourceExhausted when the grammar would exceed max_grammar_bytes or nesting
// exceeds max_depth. Left recursion through $ref (e.g. {"$ref": "#"}) is reported by ParseGbnf.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/gbnf_literal.h"
#include "base/status.h"

namespace lifeline::grammar {

struct JsonSchemaOptions {
  std::string rule_prefix;
  bool strict = true;
  // Keywords the converter does not enforce (minimum, pattern, multipleOf, ...) are skipped
  // instead of refused: the grammar then admits a superset of what the schema allows. For
  // best-effort constraints (tool parameters, non-strict response formats), where refusing a
  // common schema would be worse than admitting a few values it excludes.
  bool ignore_unknown_keywords = false;
  int32_t max_whitespace_chars = 20;
  int32_t max_depth = 64;                // nested schema objects
  int32_t max_repetition = 2000;         // minItems / maxItems / minLength / maxLength
  int64_t max_grammar_bytes = 1 << 20;   // GBNF text produced
};

// Property order is the schema object's key order: pass an ordered_json (parse requests with
// nlohmann::ordered_json). The nlohmann::json overload sees keys sorted alphabetically.
Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& opts = {});
Result<std::string> JsonSchemaToGbnf(const nlohmann::json& schema,
                                     const JsonSchemaOptions& opts = {});
// Parses `schema_json` (InvalidArgument "schema: ..." when it is not JSON) and converts it.
Result<std::string> JsonSchemaTextToGbnf(std::string_view schema_json,
                                         const JsonSchemaOptions& opts = {});

// response_format {"type": "json_object"}: any JSON object (whitespace as above, default).
std::string JsonObjectGbnf(const std::string& rule_prefix = "");

// GBNF string literals: base/gbnf_literal.h (shared with text/toolcall).
using ::lifeline::GbnfLiteral;

}  // namespace lifeline::grammar
