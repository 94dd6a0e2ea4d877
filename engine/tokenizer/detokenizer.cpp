// IncrementalDetokenizer: token pieces in, whole UTF-8 characters out.
#include <algorithm>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace lifeline {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok) : tok_(tok) {}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, std::vector<int32_t> render_ids)
    : tok_(tok), render_ids_(std::move(render_ids)) {
  std::sort(render_ids_.begin(), render_ids_.end());
}

std::string IncrementalDetokenizer::Push(int32_t id) {
  const bool render = std::binary_search(render_ids_.begin(), render_ids_.end(), id);
  pending_ += tok_.TokenToPiece(id, render);
  // Everything up to a trailing, still-completable character prefix can go out now;
  // invalid bytes in that part will never complete and are replaced.
  const size_t ready = utf8::CompletePrefixLength(pending_);
  std::string out;
  utf8::AppendWithReplacement(std::string_view(pending_).substr(0, ready), &out);
  pending_.erase(0, ready);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  utf8::AppendWithReplacement(pending_, &out);  // a truncated character becomes one U+FFFD
  pending_.clear();
  return out;
}

}  // namespace lifeline
