// Tokenizers driven by the vocabulary stored in a GGUF file (tokenizer.ggml.*), matching
// llama.cpp's behaviour token for token:
//   - "llama": SentencePiece-style BPE with scores. Spaces become U+2581, a leading U+2581 is
//     added to each text fragment that starts the input or follows a special token (when
//     add_space_prefix, default true), then the highest-scoring adjacent pair is merged
//     until no pair is a token; pieces that are not tokens fall back to <0xXX> byte tokens.
//   - "gpt2": byte-level BPE. The text is split by the pre-tokenizer regexes that
//     tokenizer.ggml.pre selects (PCRE2, UTF + UCP), every byte is mapped to the GPT-2
//     byte alphabet, and merges are applied by rank.
//
// Loading validates everything (the file is hostile input): array element types and
// lengths, token types, <0xXX> byte tokens, merges, special ids and caps. After load every
// stored id is known to be < n_vocab, so the encoders index without further checks.
//
// Special tokens: Encode always splits out user-defined tokens (as llama.cpp and HF do);
// with parse_special it also splits out control and unknown tokens. Longer texts win.
//
// Decoding: TokenToPiece/Decode give the bytes a token contributes to the output. Control
// and unknown tokens contribute nothing unless render_special is set. Decode is a plain
// concatenation: for "llama" vocabs with add_space_prefix, Decode(Encode(x)) == " " + x
// (the prefix space is real output of the first token; strip it yourself if needed).
// Ids outside [0, n_vocab) decode to nothing and are never control / end-of-generation.
//
// Ownership: a Tokenizer owns copies of everything it needs; it does not keep the GgufFile.
// Thread-safety: immutable after construction; all const methods (Encode included) are safe
// to call concurrently. IncrementalDetokenizer is a per-stream object (not thread-safe) that
// borrows its Tokenizer, which must outlive it.
// Failure: FromGguf / FromVocab return a Status naming the key, the index and the limit.
// Encode never fails: invalid UTF-8 is tokenized as bytes (llama) or as U+FFFD (gpt2).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lifeline {

class GgufFile;

namespace tokenizer_internal {
class Vocab;
class PreTokenizer;
}  // namespace tokenizer_internal

enum class TokenAttr : uint8_t { kNormal, kUnknown, kControl, kUserDefined, kUnused, kByte };

// Caps on what a vocabulary may make us allocate.
struct TokenizerLimits {
  int64_t max_vocab = 1 << 22;        // tokens (Llama 3: 128K, Gemma: 256K)
  int64_t max_token_bytes = 1 << 16;  // bytes of one token text
  int64_t max_merges = 1 << 22;       // BPE merge rules
};

// A vocabulary as the GGUF keys describe it, before validation. FromGguf fills it from
// tokenizer.ggml.*; tests build one directly. Optional fields are "key absent".
struct VocabSpec {
  std::string model;                 // tokenizer.ggml.model: "llama" or "gpt2"
  std::optional<std::string> pre;    // tokenizer.ggml.pre (gpt2 only)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;         // tokenizer.ggml.scores; empty = all 0
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (GGUF values 0..6); empty = normal
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right", rank = index

  // Special ids as stored. -1 (or 0xFFFFFFFF as uint32) means "explicitly unset".
  std::optional<int64_t> bos_id, eos_id, unk_id, sep_id, pad_id, mask_id, eot_id, eom_id;
  std::optional<int64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;

  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,*_token_id,
  // add_bos_token,add_eos_token,add_space_prefix} and validates them (see VocabSpec /
  // FromVocab for the rules).
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file,
                                                     const TokenizerLimits& limits = {});

  // Validates and builds. Defaults for absent keys (as llama.cpp):
  //   llama: bos 1, eos 2, unk 0 (each only if < n_vocab), add_bos true, add_eos false,
  //          add_space_prefix true.
  //   gpt2:  no bos/eos/unk, add_bos false (true for the llama3 pre-tokenizer), add_eos
  //          false; pre absent means "default".
  // Errors: unsupported model or pre-tokenizer (Unimplemented); array lengths that differ
  // from tokens, token types outside 0..6, NaN scores, duplicate token texts, malformed or
  // duplicate <0xXX> byte tokens, merges without a separator or naming unknown tokens
  // (DataLoss); special ids >= n_vocab, sizes above limits (OutOfRange).
  static Result<std::unique_ptr<Tokenizer>> FromVocab(VocabSpec spec,
                                                      const TokenizerLimits& limits = {});

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_bos: prepend bos_id() (ignored when the vocab has none); callers normally pass
  // add_bos(). parse_special: text equal to control/unknown token texts becomes those ids.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;

  // Raw bytes this token contributes to output ("" for control/unknown tokens unless
  // render_special, and for ids out of range).
  std::string TokenToPiece(int32_t id, bool render_special = false) const;
  std::string Decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  int32_t unk_id() const;  // -1 if none
  int32_t eot_id() const;  // -1 if none
  int32_t pad_id() const;  // -1 if none
  int32_t sep_id() const;  // -1 if none (BERT-family vocabularies: [SEP])
  // Fill-in-the-middle tokens (prefix, suffix, middle): tokenizer.ggml.fim_{pre,suf,mid}_token_id,
  // else the first token whose text is one of the known spellings (<|fim_prefix|> of
  // Qwen-Coder, <fim_prefix> of StarCoder, <PRE> / ▁<PRE> of CodeLlama, <|fim▁begin|> of
  // DeepSeek-Coder, ...), as llama.cpp guesses them; -1 if none.
  int32_t fim_pre_id() const;
  int32_t fim_suf_id() const;
  int32_t fim_mid_id() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool IsEndOfGeneration(int32_t id) const;  // eos, eot, eom, and other end tokens
  bool IsControl(int32_t id) const;
  std::string_view model_name() const;  // "llama" (SPM) or "gpt2" (BPE)
  std::string_view pre_name() const;    // pre-tokenizer in use ("" for llama)

  // Vocabulary lookups. Out-of-range ids give "" / kUnused.
  std::string_view TokenText(int32_t id) const;  // the stored text (e.g. "▁the", "<0x0A>")
  TokenAttr token_attr(int32_t id) const;
  float token_score(int32_t id) const;
  int32_t FindToken(std::string_view text) const;  // id whose stored text is `text`, or -1

 private:
  Tokenizer();
  void EncodeFragment(std::string_view text, bool after_special, std::vector<int32_t>* out) const;

  std::unique_ptr<tokenizer_internal::Vocab> vocab_;
  std::unique_ptr<tokenizer_internal::PreTokenizer> pre_;  // null for llama
};

// Streams text as tokens arrive; never emits half a UTF-8 character (holds incomplete
// sequences back until complete; invalid bytes emitted as U+FFFD once they can't complete).
// Control tokens contribute nothing, as in Tokenizer::Decode.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok);
  // `render_ids`: control tokens whose text is written anyway (e.g. a tool-call marker such
  // as <tool_call> that a parser downstream must see).
  IncrementalDetokenizer(const Tokenizer& tok, std::vector<int32_t> render_ids);
  std::string Push(int32_t id);  // returns newly completed text (may be empty)
  std::string Flush();           // whatever is left at the end of generation

 private:
  const Tokenizer& tok_;
  std::vector<int32_t> render_ids_;  // sorted
  std::string pending_;  // bytes of an unfinished UTF-8 character (at most 3)
};

}  // namespace lifeline
