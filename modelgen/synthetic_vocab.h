// A built-in SentencePiece-style ("llama" tokenizer model) vocabulary for synthetic models,
// laid out like Llama 2's: <unk>=0, <s>=1, </s>=2, the 256 byte-fallback tokens <0x00>..<0xFF>,
// then generated pieces with strictly decreasing scores. Deterministic: depends only on the
// requested size.
//
// Generated pieces, in order: "▁", then for lengths 1, 2, 3, ... every lowercase-letter string
// s of that length as s and "▁"+s (so every piece can be reached by merging two shorter pieces
// that precede it, which an SPM tokenizer needs to produce it).
//
// Thread-safety: pure function. Fails (InvalidArgument naming --vocab) when n_tokens is below
// the 259 fixed tokens or above kMaxSyntheticVocab.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace lifeline::modelgen {

// llama.cpp's token attribute numbering (tokenizer.ggml.token_type).
enum class SpmTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

inline constexpr int64_t kSpmFixedTokens = 3 + 256;
inline constexpr int64_t kMaxSyntheticVocab = 1 << 20;

struct SpmVocab {
  std::vector<std::string> tokens;  // [n_tokens] UTF-8 pieces
  std::vector<float> scores;        // [n_tokens] merge priority, higher merges first
  std::vector<int32_t> types;       // [n_tokens] SpmTokenType values
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
};

Result<SpmVocab> BuildSyntheticSpmVocab(int64_t n_tokens);

}  // namespace lifeline::modelgen
