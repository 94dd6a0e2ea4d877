#include "scheduler/draft.h"

#include <algorithm>

namespace lifeline {

std::vector<int32_t> PromptLookupDraft(std::span<const int32_t> tokens, const DraftOptions& o) {
  std::vector<int32_t> draft;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (o.max_tokens < 1 || o.min_ngram < 1 || n < 2) return draft;
  const int64_t begin = std::max<int64_t>(0, n - o.window_tokens);
  for (int64_t g = std::min<int64_t>(o.max_ngram, n - 1); g >= o.min_ngram; --g) {
    const auto tail = tokens.subspan(static_cast<size_t>(n - g));
    // Occurrences starting at s with s + g < n (strictly earlier than the tail itself), the
    // most recent first: it is the likeliest to continue the same way.
    for (int64_t s = n - g - 1; s >= begin; --s) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + s)) continue;
      const int64_t from = s + g;
      const int64_t count = std::min<int64_t>(o.max_tokens, n - from);
      draft.assign(tokens.begin() + from, tokens.begin() + from + count);
      return draft;
    }
  }
  return draft;
}

}  // namespace lifeline
