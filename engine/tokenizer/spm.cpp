// SentencePiece-style encoder: greedy bigram merging by score (llama.cpp's SPM algorithm).
#include <queue>

#include "engine/tokenizer/encoders.h"
#include "engine/tokenizer/utf8.h"

namespace lifeline::tokenizer_internal {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t off;  // byte range [off, off + n) of the text; n == 0 once merged away
  uint32_t n;
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  uint32_t size;  // bytes of left + right when queued; a mismatch later means stale
};

// Highest score first; among equal scores the leftmost pair (llama.cpp's order).
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void Run(std::vector<int32_t>* out) {
    if (text_.empty()) return;
    for (uint32_t off = 0; off < text_.size();) {
      // One symbol per UTF-8 character; a byte that does not start a valid character is a
      // symbol of its own. (llama.cpp trusts the lead byte instead, so an invalid byte can
      // swallow the next character, e.g. half of a U+2581; for valid UTF-8 both agree.)
      uint32_t cp;
      size_t len;
      const auto n = static_cast<uint32_t>(utf8::DecodeUtf8(text_, off, &cp, &len) ? len : 1);
      const auto index = static_cast<int32_t>(symbols_.size());
      symbols_.push_back({index - 1, off + n == text_.size() ? -1 : index + 1, off, n});
      off += n;
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) TryAddBigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[b.left];
      Symbol& r = symbols_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      TryAddBigram(l.prev, b.left);
      TryAddBigram(b.left, l.next);
    }
    for (int32_t i = 0; i != -1; i = symbols_[i].next) Resegment(symbols_[i].off, symbols_[i].n, out);
  }

 private:
  void TryAddBigram(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const uint32_t size = l.n + symbols_[right].n;
    const std::string_view piece = text_.substr(l.off, size);
    const int32_t id = vocab_.Find(piece);
    if (id < 0) return;
    queue_.push({left, right, vocab_.token(id).score, size});
  }

  // A symbol is a token unless it is a single character that no merge touched (merges are
  // only queued when their result is a token). Such a character falls back to its bytes.
  // (llama.cpp also keeps a map to split merged pieces back, which can never trigger.)
  void Resegment(uint32_t off, uint32_t n, std::vector<int32_t>* out) const {
    const std::string_view piece = text_.substr(off, n);
    const int32_t id = vocab_.Find(piece);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
    for (char c : piece) {
      const int32_t byte_id = vocab_.byte_token(static_cast<uint8_t>(c));
      if (byte_id >= 0) out->push_back(byte_id);  // no byte token and no unk: dropped
    }
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
};

}  // namespace

void SpmEncode(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out) {
  // Offsets are 32-bit; a (never realistic) fragment of 1 GiB or more is encoded in chunks
  // cut at character starts, so it only differs at the seams.
  constexpr size_t kMaxChunkBytes = size_t{1} << 30;
  while (text.size() >= kMaxChunkBytes) {
    size_t cut = kMaxChunkBytes - 4;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
    SpmSession(vocab, text.substr(0, cut)).Run(out);
    text.remove_prefix(cut);
  }
  SpmSession(vocab, text).Run(out);
}

}  // namespace lifeline::tokenizer_internal
