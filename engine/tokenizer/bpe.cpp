// Byte-level BPE encoder for one pre-tokenized word: merges by rank (llama.cpp's order).
#include <queue>
#include <string>

#include "engine/tokenizer/encoders.h"
#include "engine/tokenizer/utf8.h"

namespace lifeline::tokenizer_internal {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t off;  // byte range of the raw word; n == 0 once merged away
  size_t n;
  int32_t id;  // token for this range, -1 if the range is not a token
};

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  int32_t left_id;   // ids when queued; a change later means the entry is stale
  int32_t right_id;
  int32_t result;
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BigramGreater {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

std::string ToAlphabet(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) utf8::AppendUtf8(utf8::ByteToCodepoint()[static_cast<uint8_t>(c)], &out);
  return out;
}

class BpeSession {
 public:
  BpeSession(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void Run(std::vector<int32_t>* out) {
    const auto n = static_cast<int32_t>(word_.size());
    symbols_.reserve(word_.size());
    for (int32_t i = 0; i < n; ++i) {
      symbols_.push_back({i - 1, i + 1 == n ? -1 : i + 1, static_cast<size_t>(i), 1,
                          vocab_.bpe_byte_token(static_cast<uint8_t>(word_[i]))});
    }
    for (int32_t i = 1; i < n; ++i) TryAddBigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[b.left];
      Symbol& r = symbols_[b.right];
      if (l.n == 0 || r.n == 0 || l.next != b.right || l.id != b.left_id || r.id != b.right_id) {
        continue;
      }
      l.n += r.n;
      l.id = b.result;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      TryAddBigram(l.prev, b.left);
      TryAddBigram(b.left, l.next);
    }
    for (int32_t i = 0; i != -1 && i < n; i = symbols_[i].next) Emit(symbols_[i], out);
  }

 private:
  void TryAddBigram(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t lid = symbols_[left].id;
    const int32_t rid = symbols_[right].id;
    if (lid < 0 || rid < 0) return;  // merges only name tokens (checked at load)
    const MergeRule* rule = vocab_.FindMerge(lid, rid);
    if (rule == nullptr) return;
    queue_.push({left, right, rule->rank, lid, rid, rule->result});
  }

  void Emit(const Symbol& s, std::vector<int32_t>* out) const {
    if (s.id >= 0) {
      out->push_back(s.id);
      return;
    }
    // Not a token (a merge whose result is not in the vocab, or a byte missing from the
    // alphabet): llama.cpp then looks up each byte of the alphabet text on its own.
    const std::string alpha = ToAlphabet(word_.substr(s.off, s.n));
    for (char c : alpha) {
      const int32_t id = vocab_.Find(std::string_view(&c, 1));
      if (id >= 0) out->push_back(id);
    }
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue_;
};

}  // namespace

void BpeEncodeWord(const Vocab& vocab, std::string_view word, bool ignore_merges,
                   std::vector<int32_t>* out) {
  if (word.empty()) return;
  if (ignore_merges) {
    const int32_t id = vocab.Find(ToAlphabet(word));
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // Symbol indices are 32-bit; a (never realistic) word of 1 GiB or more is merged in
  // chunks, so it only differs at the seams.
  constexpr size_t kMaxChunkBytes = size_t{1} << 30;
  while (word.size() >= kMaxChunkBytes) {
    BpeSession(vocab, word.substr(0, kMaxChunkBytes)).Run(out);
    word.remove_prefix(kMaxChunkBytes);
  }
  BpeSession(vocab, word).Run(out);
}

}  // namespace lifeline::tokenizer_internal
