// Shared helpers of the grammar tests: a byte-level vocabulary (one token per byte, so a
// matcher walks text byte by byte), real GGUF vocabularies through the tokenizer, acceptance
// checks, a random walk that generates texts a grammar accepts, and an independent validator
// for the JSON Schema subset (written here, not derived from the converter).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/grammar/grammar.h"
#include "text/grammar/grammar_matcher.h"
#include "text/grammar/grammar_vocab.h"
#include "text/grammar/json_schema.h"

namespace lifeline::grammar::testing {

// Token b (0..255) is the byte b; token 256 is end of generation.
std::shared_ptr<const GrammarVocab> ByteVocab();
constexpr int32_t kByteEog = 256;

// Token bytes of a GGUF vocabulary as the engine would hand them over (TokenToPiece; control
// tokens empty), EOG ids from the tokenizer. Empty vector when the file is missing.
struct RealVocab {
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
  std::shared_ptr<const GrammarVocab> vocab;
};
RealVocab LoadGgufVocab(const std::string& path);

std::shared_ptr<const Grammar> MustParse(std::string_view gbnf, const GrammarLimits& limits = {});
std::shared_ptr<const Grammar> SchemaGrammar(const std::string& schema_json,
                                             const JsonSchemaOptions& opts = {});

// The whole text is a sentence of the grammar.
bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text);
// The text can be continued into a sentence (every byte accepted).
bool IsPrefix(const std::shared_ptr<const Grammar>& g, std::string_view text);

// A random sentence of the grammar: bytes chosen from the allowed set with weights that favour
// closing brackets and quotes as the text grows, stopping at CanEnd with probability 1/2.
// Empty optional-like result (ok = false) when no sentence was reached within max_bytes.
struct Generated {
  bool ok = false;
  std::string text;
};
Generated RandomSentence(const std::shared_ptr<const Grammar>& g, std::mt19937* rng,
                         size_t max_bytes = 600);

// Independent validator of `doc` against `schema` (the subset json_schema.h supports).
// Returns "" when valid, else a description of the first violation.
std::string ValidateSchema(const nlohmann::ordered_json& schema, const nlohmann::json& doc);

}  // namespace lifeline::grammar::testing
