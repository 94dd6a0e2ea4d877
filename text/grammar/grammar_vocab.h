// The vocabulary as the grammar matcher sees it: each token's output bytes, arranged in a
// byte trie so that one depth-first walk checks every token against a parse state, with whole
// subtrees pruned at the first byte the grammar refuses.
//
// Build once per model and share: GrammarVocab is immutable except for an internal memo of
// token masks per grammar position (bounded by GrammarVocabOptions::mask_memo_bytes, guarded by
// a mutex), keyed by a structural fingerprint of the rule, so that requests with the same or
// overlapping grammars (every JSON schema has the same string rule) reuse each other's work.
//
// Tokens: token_bytes[id] is what the token adds to the output (byte-fallback tokens <0xE2>
// are the single byte; SentencePiece's U+2581 already turned into a space). An empty string
// (control tokens) is never allowed. eog_ids (end of generation) are allowed exactly when the
// grammar can end; their bytes are ignored.
//
// Failure: Build returns InvalidArgument / ResourceExhausted naming the id and the limit.
// Thread-safety: all const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace lifeline::grammar {

struct VocabTrie;
class MaskMemo;

struct GrammarVocabOptions {
  int64_t max_vocab = 1 << 22;
  int64_t max_token_bytes = 1024;  // longer tokens are never allowed (real vocabs: < 300 bytes)
  int64_t mask_memo_bytes = int64_t{64} << 20;  // shared token-mask memo (0 disables it)
};

class GrammarVocab {
 public:
  static Result<std::shared_ptr<const GrammarVocab>> Build(std::vector<std::string> token_bytes,
                                                           std::vector<int32_t> eog_ids,
                                                           const GrammarVocabOptions& options = {});
  ~GrammarVocab();
  GrammarVocab(const GrammarVocab&) = delete;
  GrammarVocab& operator=(const GrammarVocab&) = delete;

  int32_t n_vocab() const { return static_cast<int32_t>(token_bytes_.size()); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }
  bool is_eog(int32_t id) const { return is_eog_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // Internal to text/grammar.
  const VocabTrie& trie() const { return *trie_; }
  MaskMemo& memo() const { return *memo_; }

 private:
  GrammarVocab();
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> is_eog_;
  std::vector<int32_t> eog_ids_;
  std::unique_ptr<VocabTrie> trie_;
  std::unique_ptr<MaskMemo> memo_;
};

}  // namespace lifeline::grammar
