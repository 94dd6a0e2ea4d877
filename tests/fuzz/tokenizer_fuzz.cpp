// libFuzzer harness for the tokenizers: SentencePiece-style ("llama") and byte-level BPE
// ("gpt2", with the pre-tokenizer regexes), on fuzzed vocabularies and fuzzed text.
// Built by -DLIFELINE_FUZZ=ON (tests/fuzz/CMakeLists.txt; scripts/fuzz.sh runs it) and, over
// its committed corpus, by the default test run (Fuzz.tokenizer.Corpus).
//
// Input layout: byte 0 chooses the model (bit 0: gpt2), the pre-tokenizer (bits 1-3, gpt2),
// parse_special (bit 4), add_bos (bit 5) and whether the vocabulary starts from a complete
// base (bit 6: the 256 byte tokens for llama, the GPT-2 byte alphabet for gpt2) or is only
// what the input says (validation of hostile vocabularies). Byte 1: the number of extra
// tokens (0..31). Then that many '\x01'-terminated token texts; for each, one byte of score
// and type (low 3 bits: GGUF token type 0..6, the rest the score); then, for gpt2, one merge
// per pair of bytes (indices into the extra tokens, "left right"). The rest is the text.
//
// Invariants (abort when violated): a refused vocabulary has a message; an accepted one
// encodes any text to ids in [0, n_vocab); decoding them, and streaming them through the
// incremental detokenizer, gives valid UTF-8; the two agree when they share their input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_check.h"

namespace {

using lifeline::IncrementalDetokenizer;
using lifeline::Tokenizer;
using lifeline::VocabSpec;

using lifeline::fuzz::Check;

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

// GPT-2's byte -> printable code point map, as UTF-8 (the byte-level alphabet).
std::string Gpt2ByteChar(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) {
        ++n;
      }
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

constexpr const char* kPre[] = {"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm",
                                "deepseek-coder", "falcon", "starcoder"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  const bool gpt2 = (mode & 1) != 0;
  const bool parse_special = (mode & 16) != 0;
  const bool add_bos = (mode & 32) != 0;
  const bool base = (mode & 64) != 0;
  const size_t n_extra = data[1] % 32;
  size_t pos = 2;

  VocabSpec spec;
  spec.model = gpt2 ? "gpt2" : "llama";
  if (gpt2) spec.pre = kPre[(mode >> 1) & 7];
  if (base) {
    if (gpt2) {
      for (int b = 0; b < 256; ++b) spec.tokens.push_back(Gpt2ByteChar(b));
    } else {
      spec.tokens = {"<unk>", "<s>", "</s>"};
      spec.token_types = {2, 3, 3};
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        spec.tokens.push_back(name);
        spec.token_types.push_back(6);
      }
      spec.tokens.push_back("\xE2\x96\x81");  // U+2581, the SentencePiece space
      spec.token_types.push_back(1);
    }
  }
  const size_t first_extra = spec.tokens.size();
  std::vector<std::string> extra;
  for (size_t k = 0; k < n_extra && pos < size; ++k) {
    std::string t;
    while (pos < size && data[pos] != 1) t += static_cast<char>(data[pos++]);
    if (pos < size) ++pos;  // the terminator
    extra.push_back(std::move(t));
  }
  for (const std::string& t : extra) spec.tokens.push_back(t);
  // Types and scores: the base's, then one byte per extra token.
  std::vector<int32_t> types = spec.token_types;
  if (types.empty()) types.assign(first_extra, 1);
  std::vector<float> scores(first_extra, 0.0f);
  for (size_t k = 0; k < extra.size(); ++k) {
    const uint8_t b = pos < size ? data[pos++] : 0;
    types.push_back(b & 7);  // 7 is not a GGUF token type: it must be refused
    scores.push_back(static_cast<float>(static_cast<int>(b >> 3) - 16));
  }
  spec.token_types = std::move(types);
  spec.scores = std::move(scores);
  if (gpt2 && extra.size() >= 2) {
    const size_t n_merges = extra.size();
    for (size_t k = 0; k < n_merges && pos + 1 < size; ++k) {
      spec.merges.push_back(extra[data[pos] % extra.size()] + " " +
                            extra[data[pos + 1] % extra.size()]);
      pos += 2;
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + pos, size - pos);

  lifeline::TokenizerLimits limits;
  limits.max_vocab = 4096;
  limits.max_token_bytes = 1024;
  auto tok = Tokenizer::FromVocab(std::move(spec), limits);
  if (!tok.ok()) {
    Check(!tok.status().message().empty(), "a refused vocabulary without a message");
    return 0;
  }
  const Tokenizer& t = **tok;
  const std::vector<int32_t> ids = t.Encode(text, add_bos, parse_special);
  for (int32_t id : ids) Check(id >= 0 && id < t.n_vocab(), "an id outside the vocabulary");
  const std::string decoded = t.Decode(ids);
  IncrementalDetokenizer stream(t);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.Push(id);
    Check(ValidUtf8(piece), "the incremental detokenizer emitted invalid UTF-8");
    streamed += piece;
  }
  streamed += stream.Flush();
  Check(ValidUtf8(streamed), "the streamed text is not valid UTF-8");
  // Where the plain decoding is valid UTF-8 the stream must have produced the same text.
  if (ValidUtf8(decoded)) Check(decoded == streamed, "streamed and decoded text differ");
  for (int32_t id : ids) (void)t.TokenToPiece(id, /*render_special=*/true);
  (void)t.TokenToPiece(-1);
  (void)t.TokenToPiece(t.n_vocab());
  return 0;
}
