#include "modelgen/synthetic_vocab.h"

#include <cstdio>

namespace lifeline::modelgen {
namespace {

constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word-start marker

// The index-th lowercase string of exactly `len` letters, in lexicographic order.
std::string LetterString(uint64_t index, int len) {
  std::string s(static_cast<size_t>(len), 'a');
  for (int i = len - 1; i >= 0; --i) {
    s[static_cast<size_t>(i)] = static_cast<char>('a' + index % 26);
    index /= 26;
  }
  return s;
}

void AddPiece(SpmVocab* v, std::string piece, int64_t n_generated) {
  v->tokens.push_back(std::move(piece));
  // Earlier pieces merge first; integer steps keep every score exact in float.
  v->scores.push_back(-static_cast<float>(n_generated));
  v->types.push_back(static_cast<int32_t>(SpmTokenType::kNormal));
}

}  // namespace

Result<SpmVocab> BuildSyntheticSpmVocab(int64_t n_tokens) {
  if (n_tokens < kSpmFixedTokens || n_tokens > kMaxSyntheticVocab) {
    return InvalidArgument("--vocab " + std::to_string(n_tokens) + " is outside [" +
                           std::to_string(kSpmFixedTokens) + ", " +
                           std::to_string(kMaxSyntheticVocab) +
                           "] (3 special + 256 byte tokens are always present)");
  }
  SpmVocab v;
  v.tokens.reserve(static_cast<size_t>(n_tokens));
  v.scores.reserve(static_cast<size_t>(n_tokens));
  v.types.reserve(static_cast<size_t>(n_tokens));
  auto add_fixed = [&](std::string piece, SpmTokenType type) {
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(0.0f);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add_fixed("<unk>", SpmTokenType::kUnknown);
  add_fixed("<s>", SpmTokenType::kControl);
  add_fixed("</s>", SpmTokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add_fixed(buf, SpmTokenType::kByte);
  }

  int64_t n_generated = 0;
  auto room = [&] { return static_cast<int64_t>(v.tokens.size()) < n_tokens; };
  if (room()) AddPiece(&v, kSpace, n_generated++);
  uint64_t strings_of_len = 26;
  for (int len = 1; room(); ++len, strings_of_len *= 26) {
    for (uint64_t i = 0; i < strings_of_len && room(); ++i) {
      std::string s = LetterString(i, len);
      AddPiece(&v, s, n_generated++);
      if (room()) AddPiece(&v, kSpace + s, n_generated++);
    }
  }
  return v;
}

}  // namespace lifeline::modelgen
