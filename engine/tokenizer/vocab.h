// Validated vocabulary tables shared by the encoders (internal to engine/tokenizer).
//
// Vocab::Build checks a VocabSpec completely and precomputes everything the hot paths need:
// text -> id, per-id attribute/score/piece, byte tokens, BPE merge ranks keyed by id pairs,
// special-token match order and the end-of-generation set. Every id stored here is in
// [0, n_vocab), so the encoders index without checks.
//
// Ownership: owns all its data. text_to_id_ keys are views into tokens_[i].text, which never
// moves after Build (the vector is sized once and Vocab is neither copyable nor movable).
// Thread-safety: immutable after Build.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace lifeline::tokenizer_internal {

enum class VocabKind : uint8_t { kSpm, kBpe };

struct TokenData {
  std::string text;   // as stored in the vocab
  std::string piece;  // output bytes (U+2581 -> ' ' for SPM, byte-decoded for BPE)
  float score = 0;
  TokenAttr attr = TokenAttr::kNormal;
};

// A BPE merge rule as looked up by (left id, right id).
struct MergeRule {
  int32_t rank;
  int32_t result;  // id of left+right, or -1 when the concatenation is not a token
};

class Vocab {
 public:
  static Result<std::unique_ptr<Vocab>> Build(VocabSpec spec, const TokenizerLimits& limits);
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabKind kind() const { return kind_; }
  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  const TokenData& token(int32_t id) const { return tokens_[id]; }
  bool InRange(int32_t id) const { return id >= 0 && id < n_vocab(); }

  // -1 when absent.
  int32_t Find(std::string_view text) const {
    auto it = text_to_id_.find(text);
    return it == text_to_id_.end() ? -1 : it->second;
  }

  // SPM: the <0xXX> token for byte b (or the single-character token, or unk), -1 if none.
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }
  // BPE: the token whose text is the GPT-2 alphabet character of byte b, -1 if none.
  int32_t bpe_byte_token(uint8_t b) const { return bpe_byte_token_[b]; }
  const MergeRule* FindMerge(int32_t left, int32_t right) const {
    auto it = merges_.find(MergeKey(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // Control / user-defined / unknown ids, longest text first (ties: lower id first).
  const std::vector<int32_t>& special_match_order() const { return special_match_order_; }
  bool IsEog(int32_t id) const { return InRange(id) && eog_[id]; }

  int32_t bos_id = -1, eos_id = -1, unk_id = -1, sep_id = -1, pad_id = -1, mask_id = -1;
  int32_t eot_id = -1, eom_id = -1;
  int32_t fim_pre_id = -1, fim_suf_id = -1, fim_mid_id = -1;
  int32_t fim_pad_id = -1, fim_rep_id = -1, fim_sep_id = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

 private:
  Vocab() = default;
  static uint64_t MergeKey(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  Status LoadTokens(VocabSpec& spec, const TokenizerLimits& limits);
  Status LoadByteTokens();
  Status LoadMerges(const std::vector<std::string>& merges, const TokenizerLimits& limits);
  Status LoadSpecialIds(const VocabSpec& spec);
  void BuildPieces();
  void BuildSpecialTables();

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_;
  std::string pre_;
  std::vector<TokenData> tokens_;
  std::unordered_map<std::string_view, int32_t> text_to_id_;
  std::array<int32_t, 256> byte_token_{};
  std::array<int32_t, 256> bpe_byte_token_{};
  std::unordered_map<uint64_t, MergeRule> merges_;
  std::vector<int32_t> special_match_order_;
  std::vector<bool> eog_;
};

}  // namespace lifeline::tokenizer_internal
