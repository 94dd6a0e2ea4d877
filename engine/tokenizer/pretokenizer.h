// Regex pre-tokenizer for byte-level BPE (internal to engine/tokenizer).
//
// tokenizer.ggml.pre names a list of regexes (learned from llama.cpp's llama-vocab.cpp and
// the models' tokenizer.json). They are applied in order, as llama.cpp does: the text starts
// as one word; each regex splits every current word into its matches and the gaps between
// them (both kept), and the next regex works on those pieces. A regex never sees text
// outside the word it splits (lookarounds and `$` stop at the word's ends).
//
// Ownership: owns the compiled PCRE2 patterns (compiled once, JIT when available).
// Thread-safety: Split is const and allocates its own match data per call, so any number of
// threads may split concurrently.
// Failure: Create returns Unimplemented for an unknown pre name, Internal if a pattern does
// not compile. Split cannot fail: if PCRE2 reports a match error (e.g. a resource limit),
// the rest of that word stays one piece.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace lifeline::tokenizer_internal {

struct PreTokenizerConfig {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a word that is itself a token is emitted whole (Llama 3)
  bool add_bos = false;        // llama.cpp's default for add_bos_token with this pre type
};

// The config llama.cpp uses for `pre`, or Unimplemented naming the value.
Result<PreTokenizerConfig> PreTokenizerConfigFor(std::string_view pre);

class PreTokenizer {
 public:
  static Result<std::unique_ptr<PreTokenizer>> Create(std::string_view pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // text must be valid UTF-8 (utf8::SanitizeUtf8). Appends [begin, end) byte ranges of the
  // words, in order, covering text exactly.
  void Split(std::string_view text, std::vector<std::pair<size_t, size_t>>* words) const;

  const PreTokenizerConfig& config() const { return config_; }

 private:
  struct Pattern;
  PreTokenizer() = default;
  PreTokenizerConfig config_;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

}  // namespace lifeline::tokenizer_internal
