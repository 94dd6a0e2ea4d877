// IncrementalDetokenizer: token pieces in, whole UTF-8 characters out.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace lifeline {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok) : tok_(tok) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  pending_ += tok_.TokenToPiece(id);
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
