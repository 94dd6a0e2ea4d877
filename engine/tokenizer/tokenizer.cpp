#include "engine/tokenizer/tokenizer.h"

#include <string>
#include <unordered_map>
#include <utility>

#include "engine/tokenizer/encoders.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"

namespace lifeline {

using tokenizer_internal::BpeEncodeWord;
using tokenizer_internal::PreTokenizer;
using tokenizer_internal::SpmEncode;
using tokenizer_internal::Vocab;
using tokenizer_internal::VocabKind;

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

// A run of input text, or a special token already recognised in it.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t off;
  size_t len;
};

// Splits raw fragments on every occurrence of each special token text, longest texts
// first (llama.cpp's tokenizer_st_partition): an earlier, longer token claims its text
// before a shorter one can match inside it.
std::vector<Fragment> PartitionSpecial(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : vocab.special_match_order()) {
    const TokenAttr attr = vocab.token(id).attr;
    if (!parse_special && attr != TokenAttr::kUserDefined) continue;
    const std::string_view needle = vocab.token(id).text;
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0 || f.len < needle.size()) {
        next.push_back(f);
        continue;
      }
      const std::string_view hay = text.substr(f.off, f.len);
      size_t pos = 0;
      while (true) {
        const size_t hit = hay.find(needle, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, f.off + pos, hit - pos});
        next.push_back({id, 0, 0});
        pos = hit + needle.size();
        changed = true;
      }
      if (pos < f.len) next.push_back({-1, f.off + pos, f.len - pos});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(VocabSpec spec, const TokenizerLimits& limits) {
  // Resolve the pre-tokenizer first: an unsupported one is the more useful error.
  std::unique_ptr<PreTokenizer> pre;
  if (spec.model == "gpt2") {
    LL_ASSIGN_OR_RETURN(pre, PreTokenizer::Create(spec.pre.value_or("default")));
    if (!spec.add_bos.has_value()) spec.add_bos = pre->config().add_bos;
  }
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  LL_ASSIGN_OR_RETURN(tok->vocab_, Vocab::Build(std::move(spec), limits));
  tok->pre_ = std::move(pre);
  return tok;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_->bos_id >= 0) out.push_back(vocab_->bos_id);
  bool after_special = true;  // the start of the input counts as "after a special token"
  for (const Fragment& f : PartitionSpecial(*vocab_, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      EncodeFragment(text.substr(f.off, f.len), after_special, &out);
      after_special = false;
    }
  }
  return out;
}

void Tokenizer::EncodeFragment(std::string_view text, bool after_special,
                               std::vector<int32_t>* out) const {
  if (vocab_->kind() == VocabKind::kSpm) {
    std::string escaped;
    escaped.reserve(text.size() + 16);
    if (vocab_->add_space_prefix && after_special) escaped.append(kSpaceMarker);
    for (char c : text) {
      if (c == ' ') {
        escaped.append(kSpaceMarker);
      } else {
        escaped.push_back(c);
      }
    }
    SpmEncode(*vocab_, escaped, out);
    return;
  }
  // Byte-level BPE: PCRE2 needs valid UTF-8; undecodable bytes become U+FFFD (llama.cpp).
  const std::string clean = utf8::SanitizeUtf8(text);
  std::vector<std::pair<size_t, size_t>> words;
  pre_->Split(clean, &words);
  const bool ignore_merges = pre_->config().ignore_merges;
  // Natural text repeats its words a lot; merging each distinct word once is the main
  // saving on long inputs. The cache is per call, so Encode stays lock-free.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;  // word -> ids range
  std::vector<int32_t> cached_ids;
  for (const auto& [b, e] : words) {
    const std::string_view word = std::string_view(clean).substr(b, e - b);
    auto it = cache.find(word);
    if (it == cache.end()) {
      const size_t start = cached_ids.size();
      BpeEncodeWord(*vocab_, word, ignore_merges, &cached_ids);
      it = cache.emplace(word, std::make_pair(start, cached_ids.size())).first;
    }
    out->insert(out->end(), cached_ids.begin() + it->second.first,
                cached_ids.begin() + it->second.second);
  }
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (!vocab_->InRange(id)) return {};
  const tokenizer_internal::TokenData& t = vocab_->token(id);
  if (render_special && (t.attr == TokenAttr::kControl || t.attr == TokenAttr::kUnknown)) {
    return t.text;
  }
  return t.piece;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (!vocab_->InRange(id)) continue;
    const tokenizer_internal::TokenData& t = vocab_->token(id);
    if (render_special && (t.attr == TokenAttr::kControl || t.attr == TokenAttr::kUnknown)) {
      out += t.text;
    } else {
      out += t.piece;
    }
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return vocab_->n_vocab(); }
int32_t Tokenizer::bos_id() const { return vocab_->bos_id; }
int32_t Tokenizer::eos_id() const { return vocab_->eos_id; }
int32_t Tokenizer::unk_id() const { return vocab_->unk_id; }
int32_t Tokenizer::eot_id() const { return vocab_->eot_id; }
int32_t Tokenizer::pad_id() const { return vocab_->pad_id; }
int32_t Tokenizer::sep_id() const { return vocab_->sep_id; }

namespace {

// The first of `spellings` that is a token of the vocabulary, else -1.
int32_t FindAny(const tokenizer_internal::Vocab& v, std::initializer_list<std::string_view> spellings) {
  for (std::string_view s : spellings) {
    if (int32_t id = v.Find(s); id >= 0) return id;
  }
  return -1;
}

}  // namespace

// The spellings llama.cpp's vocabulary loader recognises when the GGUF has no FIM keys.
int32_t Tokenizer::fim_pre_id() const {
  if (vocab_->fim_pre_id >= 0) return vocab_->fim_pre_id;
  return FindAny(*vocab_, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                           "<|fim▁begin|>", "<PRE>", "▁<PRE>", "<|code_prefix|>"});
}
int32_t Tokenizer::fim_suf_id() const {
  if (vocab_->fim_suf_id >= 0) return vocab_->fim_suf_id;
  return FindAny(*vocab_, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                           "<|fim▁hole|>", "<SUF>", "▁<SUF>", "<|code_suffix|>"});
}
int32_t Tokenizer::fim_mid_id() const {
  if (vocab_->fim_mid_id >= 0) return vocab_->fim_mid_id;
  return FindAny(*vocab_, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                           "<|fim▁end|>", "<MID>", "▁<MID>", "<|code_middle|>"});
}
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::add_eos() const { return vocab_->add_eos; }
bool Tokenizer::add_space_prefix() const { return vocab_->add_space_prefix; }
bool Tokenizer::IsEndOfGeneration(int32_t id) const { return vocab_->IsEog(id); }

bool Tokenizer::IsControl(int32_t id) const {
  return vocab_->InRange(id) && vocab_->token(id).attr == TokenAttr::kControl;
}

std::string_view Tokenizer::model_name() const { return vocab_->model(); }
std::string_view Tokenizer::pre_name() const { return vocab_->pre(); }

std::string_view Tokenizer::TokenText(int32_t id) const {
  return vocab_->InRange(id) ? std::string_view(vocab_->token(id).text) : std::string_view();
}

TokenAttr Tokenizer::token_attr(int32_t id) const {
  return vocab_->InRange(id) ? vocab_->token(id).attr : TokenAttr::kUnused;
}

float Tokenizer::token_score(int32_t id) const {
  return vocab_->InRange(id) ? vocab_->token(id).score : 0.0f;
}

int32_t Tokenizer::FindToken(std::string_view text) const { return vocab_->Find(text); }

}  // namespace lifeline
