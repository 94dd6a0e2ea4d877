#include "engine/tokenizer/vocab.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine/tokenizer/utf8.h"

namespace lifeline::tokenizer_internal {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Shortens a token text for error messages (texts can be long or binary).
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 40) out += "...";
  return out + "'";
}

// GGUF token types (llama.cpp's llama_token_type). 0 = undefined: llama.cpp renders such
// tokens as nothing and never treats them as special, which is what kUnused does here.
Result<TokenAttr> AttrFromGgufType(int32_t type, size_t index) {
  switch (type) {
    case 0: return TokenAttr::kUnused;
    case 1: return TokenAttr::kNormal;
    case 2: return TokenAttr::kUnknown;
    case 3: return TokenAttr::kControl;
    case 4: return TokenAttr::kUserDefined;
    case 5: return TokenAttr::kUnused;
    case 6: return TokenAttr::kByte;
    default:
      return DataLoss("tokenizer.ggml.token_type[" + std::to_string(index) + "] = " +
                      std::to_string(type) + " is not a token type (0..6)");
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" exactly (hex digits in either case) -> 0xAB; anything else -> -1.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = HexDigit(text[3]);
  const int lo = HexDigit(text[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

// Byte-level BPE text (GPT-2 alphabet) back to raw bytes. Characters outside the alphabet
// are kept as their UTF-8 (llama.cpp writes an "[UNK_BYTE_...]" marker instead).
std::string ByteDecode(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp;
    size_t len;
    if (!utf8::DecodeUtf8(text, pos, &cp, &len)) {
      out.push_back(text[pos++]);
      continue;
    }
    const int b = utf8::CodepointToByte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

struct SpecialKey {
  const char* key;
  std::optional<int64_t> VocabSpec::*spec;
  int32_t Vocab::*vocab;
};

constexpr SpecialKey kSpecialKeys[] = {
    {"tokenizer.ggml.bos_token_id", &VocabSpec::bos_id, &Vocab::bos_id},
    {"tokenizer.ggml.eos_token_id", &VocabSpec::eos_id, &Vocab::eos_id},
    {"tokenizer.ggml.unknown_token_id", &VocabSpec::unk_id, &Vocab::unk_id},
    {"tokenizer.ggml.seperator_token_id", &VocabSpec::sep_id, &Vocab::sep_id},
    {"tokenizer.ggml.padding_token_id", &VocabSpec::pad_id, &Vocab::pad_id},
    {"tokenizer.ggml.mask_token_id", &VocabSpec::mask_id, &Vocab::mask_id},
    {"tokenizer.ggml.eot_token_id", &VocabSpec::eot_id, &Vocab::eot_id},
    {"tokenizer.ggml.eom_token_id", &VocabSpec::eom_id, &Vocab::eom_id},
    {"tokenizer.ggml.fim_pre_token_id", &VocabSpec::fim_pre_id, &Vocab::fim_pre_id},
    {"tokenizer.ggml.fim_suf_token_id", &VocabSpec::fim_suf_id, &Vocab::fim_suf_id},
    {"tokenizer.ggml.fim_mid_token_id", &VocabSpec::fim_mid_id, &Vocab::fim_mid_id},
    {"tokenizer.ggml.fim_pad_token_id", &VocabSpec::fim_pad_id, &Vocab::fim_pad_id},
    {"tokenizer.ggml.fim_rep_token_id", &VocabSpec::fim_rep_id, &Vocab::fim_rep_id},
    {"tokenizer.ggml.fim_sep_token_id", &VocabSpec::fim_sep_id, &Vocab::fim_sep_id},
};

// Token texts that end a turn in common chat formats; llama.cpp detects them by text
// because many conversions do not store eot/eom ids.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",   "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<EOT>",        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
};

}  // namespace

Result<std::unique_ptr<Vocab>> Vocab::Build(VocabSpec spec, const TokenizerLimits& limits) {
  std::unique_ptr<Vocab> v(new Vocab());
  if (spec.model == "llama") {
    v->kind_ = VocabKind::kSpm;
  } else if (spec.model == "gpt2") {
    v->kind_ = VocabKind::kBpe;
  } else {
    return Unimplemented("tokenizer.ggml.model = '" + spec.model +
                         "' is not supported (supported: 'llama', 'gpt2')");
  }
  v->model_ = spec.model;
  if (v->kind_ == VocabKind::kBpe) v->pre_ = spec.pre.value_or("default");
  LL_RETURN_IF_ERROR(v->LoadTokens(spec, limits));
  LL_RETURN_IF_ERROR(v->LoadByteTokens());
  if (v->kind_ == VocabKind::kBpe) {
    LL_RETURN_IF_ERROR(v->LoadMerges(spec.merges, limits));
  } else if (!spec.merges.empty()) {
    // SentencePiece vocabs merge by score; stored merges are unused but still must be sane.
    LL_RETURN_IF_ERROR(v->LoadMerges(spec.merges, limits));
    v->merges_.clear();
  }
  LL_RETURN_IF_ERROR(v->LoadSpecialIds(spec));
  const bool spm = v->kind_ == VocabKind::kSpm;
  v->add_bos = spec.add_bos.value_or(spm);
  v->add_eos = spec.add_eos.value_or(false);
  v->add_space_prefix = spm && spec.add_space_prefix.value_or(true);
  v->BuildSpecialTables();
  v->BuildPieces();
  return v;
}

Status Vocab::LoadTokens(VocabSpec& spec, const TokenizerLimits& limits) {
  const size_t n = spec.tokens.size();
  if (n == 0) return DataLoss("tokenizer.ggml.tokens is empty");
  if (static_cast<uint64_t>(n) > static_cast<uint64_t>(limits.max_vocab)) {
    return OutOfRange("tokenizer.ggml.tokens has " + std::to_string(n) +
                      " entries, above the limit of " + std::to_string(limits.max_vocab));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return DataLoss("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
                    " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return DataLoss("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
                    " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  tokens_.resize(n);
  text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = tokens_[i];
    if (spec.tokens[i].size() > static_cast<uint64_t>(limits.max_token_bytes)) {
      return OutOfRange("tokenizer.ggml.tokens[" + std::to_string(i) + "] is " +
                        std::to_string(spec.tokens[i].size()) + " bytes, above the limit of " +
                        std::to_string(limits.max_token_bytes));
    }
    t.text = std::move(spec.tokens[i]);
    if (!spec.scores.empty()) {
      t.score = spec.scores[i];
      if (std::isnan(t.score)) {
        return DataLoss("tokenizer.ggml.scores[" + std::to_string(i) + "] is NaN");
      }
    }
    if (!spec.token_types.empty()) {
      LL_ASSIGN_OR_RETURN(t.attr, AttrFromGgufType(spec.token_types[i], i));
    }
  }
  // Views are taken only now: tokens_ is fully built and never resized again.
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = tokens_[i].text;
    if (text.empty()) continue;  // can never match; llama.cpp renames these "[EMPTY_i]"
    auto [it, inserted] = text_to_id_.emplace(std::string_view(text), static_cast<int32_t>(i));
    if (!inserted) {
      return DataLoss("tokenizer.ggml.tokens[" + std::to_string(i) + "] = " + Quote(text) +
                      " duplicates tokenizer.ggml.tokens[" + std::to_string(it->second) + "]");
    }
  }
  return Status::Ok();
}

Status Vocab::LoadByteTokens() {
  byte_token_.fill(-1);
  bpe_byte_token_.fill(-1);
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (tokens_[id].attr != TokenAttr::kByte) continue;
    const int b = ParseByteToken(tokens_[id].text);
    if (b < 0) {
      return DataLoss("tokenizer.ggml.tokens[" + std::to_string(id) + "] = " +
                      Quote(tokens_[id].text) + " has type byte but is not of the form <0xXX>");
    }
    if (byte_token_[b] >= 0) {
      return DataLoss("tokenizer.ggml.tokens[" + std::to_string(id) + "] = " +
                      Quote(tokens_[id].text) + " repeats the byte of tokenizer.ggml.tokens[" +
                      std::to_string(byte_token_[b]) + "]");
    }
    byte_token_[b] = id;
  }
  // Without a <0xXX> token, byte fallback uses a single-character token for that byte
  // (as llama.cpp does), else the unknown token (filled in LoadSpecialIds).
  for (int b = 0; b < 256; ++b) {
    if (byte_token_[b] < 0) byte_token_[b] = Find(std::string(1, static_cast<char>(b)));
    std::string ch;
    utf8::AppendUtf8(utf8::ByteToCodepoint()[b], &ch);
    bpe_byte_token_[b] = Find(ch);
  }
  return Status::Ok();
}

Status Vocab::LoadMerges(const std::vector<std::string>& merges, const TokenizerLimits& limits) {
  if (static_cast<uint64_t>(merges.size()) > static_cast<uint64_t>(limits.max_merges)) {
    return OutOfRange("tokenizer.ggml.merges has " + std::to_string(merges.size()) +
                      " entries, above the limit of " + std::to_string(limits.max_merges));
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // The separator is the first space after position 0 (a part may itself be " ").
    const size_t sep = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos) {
      return DataLoss("tokenizer.ggml.merges[" + std::to_string(rank) + "] = " + Quote(m) +
                      " has no ' ' separating two tokens");
    }
    const std::string_view left = std::string_view(m).substr(0, sep);
    const std::string_view right = std::string_view(m).substr(sep + 1);
    const int32_t l = Find(left);
    const int32_t r = Find(right);
    if (l < 0 || r < 0) {
      return DataLoss("tokenizer.ggml.merges[" + std::to_string(rank) + "] = " + Quote(m) +
                      " names " + Quote(l < 0 ? left : right) + ", which is not a token");
    }
    joined.assign(left);
    joined.append(right);
    // First rule wins for duplicates, as in llama.cpp.
    merges_.emplace(MergeKey(l, r), MergeRule{static_cast<int32_t>(rank), Find(joined)});
  }
  return Status::Ok();
}

Status Vocab::LoadSpecialIds(const VocabSpec& spec) {
  if (kind_ == VocabKind::kSpm) {
    // llama.cpp's SentencePiece defaults, kept only where they fit the vocab.
    bos_id = n_vocab() > 1 ? 1 : -1;
    eos_id = n_vocab() > 2 ? 2 : -1;
    unk_id = 0;
  }
  for (const SpecialKey& k : kSpecialKeys) {
    const std::optional<int64_t>& stored = spec.*(k.spec);
    if (!stored.has_value()) continue;
    const int64_t v = *stored;
    if (v == -1 || v == 0xFFFFFFFFll) {  // converters write this for "no such token"
      this->*(k.vocab) = -1;
      continue;
    }
    if (v < 0 || v >= n_vocab()) {
      return OutOfRange(std::string(k.key) + " = " + std::to_string(v) +
                        " is out of range for n_vocab " + std::to_string(n_vocab()));
    }
    this->*(k.vocab) = static_cast<int32_t>(v);
  }
  if (unk_id >= 0) {
    for (int b = 0; b < 256; ++b) {
      if (byte_token_[b] < 0) byte_token_[b] = unk_id;
    }
  }
  return Status::Ok();
}

void Vocab::BuildSpecialTables() {
  // End-of-turn / end-of-message ids by text when the file does not name them; such tokens
  // are control tokens whatever the file says (as in llama.cpp).
  auto promote = [&](int32_t id) {
    if (id >= 0) tokens_[id].attr = TokenAttr::kControl;
  };
  if (eot_id < 0) {
    for (std::string_view text : kEotTexts) {
      const int32_t id = Find(text);
      if (id >= 0 && (eot_id < 0 || id < eot_id)) eot_id = id;
    }
    promote(eot_id);
  }
  if (eom_id < 0) {
    eom_id = Find("<|eom_id|>");
    promote(eom_id);
  }
  eog_.assign(tokens_.size(), false);
  for (int32_t id : {eos_id, eot_id, eom_id, fim_pad_id, fim_rep_id, fim_sep_id}) {
    if (id >= 0) eog_[id] = true;
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = Find(text);
    if (id >= 0) {
      eog_[id] = true;
      promote(id);
    }
  }
  for (int32_t id = 0; id < n_vocab(); ++id) {
    const TokenAttr a = tokens_[id].attr;
    const bool special = a == TokenAttr::kControl || a == TokenAttr::kUserDefined ||
                         a == TokenAttr::kUnknown;
    if (special && !tokens_[id].text.empty()) special_match_order_.push_back(id);
  }
  std::stable_sort(special_match_order_.begin(), special_match_order_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].text.size() > tokens_[b].text.size(); });
}

void Vocab::BuildPieces() {
  for (TokenData& t : tokens_) {
    switch (t.attr) {
      case TokenAttr::kNormal:
        t.piece = kind_ == VocabKind::kSpm ? ReplaceAll(t.text, kSpaceMarker, " ") : ByteDecode(t.text);
        break;
      case TokenAttr::kUserDefined:
        t.piece = t.text;
        break;
      case TokenAttr::kByte:
        t.piece = std::string(1, static_cast<char>(ParseByteToken(t.text)));
        break;
      case TokenAttr::kControl:
      case TokenAttr::kUnknown:
      case TokenAttr::kUnused:
        break;  // render nothing (control/unknown text is shown only on request)
    }
  }
}

}  // namespace lifeline::tokenizer_internal
