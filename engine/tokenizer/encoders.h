// The two merge algorithms (internal to engine/tokenizer). Both append ids to *out and
// borrow the Vocab for the duration of the call; all state is local, so concurrent calls
// on one Vocab are safe. Neither can fail: text that no token covers becomes byte tokens
// (SPM) or per-byte lookups (BPE), as in llama.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace lifeline::tokenizer_internal {

// SentencePiece-style: text already has spaces replaced by U+2581 (and the prefix added).
// The text is cut into UTF-8 characters (each invalid byte alone), then the best-scoring adjacent
// pair that is a token is merged until none is; leftovers fall back to <0xXX> tokens.
void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out);

// Byte-level BPE for one pre-tokenized word of raw bytes: bytes -> GPT-2 alphabet tokens,
// then the lowest-rank merge first (ties: leftmost). With ignore_merges a word that is
// itself a token is emitted whole.
void BpeEncodeWord(const Vocab& vocab, std::string_view word, bool ignore_merges,
                   std::vector<int32_t>* out);

}  // namespace lifeline::tokenizer_internal
