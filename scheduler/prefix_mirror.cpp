#include "scheduler/prefix_mirror.h"

#include <mutex>

namespace lifeline {

void PrefixMirror::Add(uint64_t hash) {
  std::unique_lock lock(mu_);
  ++count_[hash];
}

void PrefixMirror::Remove(uint64_t hash) {
  std::unique_lock lock(mu_);
  auto it = count_.find(hash);
  if (it == count_.end()) return;
  if (--it->second <= 0) count_.erase(it);
}

int64_t PrefixMirror::LeadingHits(std::span<const int32_t> tokens, HashFn hash_fn,
                                  uint64_t root) const {
  if (tokens.empty()) return 0;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(kKvBlockTokens);
  std::shared_lock lock(mu_);
  uint64_t parent = root;
  int64_t hits = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    const uint64_t h = hash_fn(parent, tokens.subspan(i * static_cast<size_t>(kKvBlockTokens),
                                                      static_cast<size_t>(kKvBlockTokens)));
    if (count_.find(h) == count_.end()) break;
    hits += kKvBlockTokens;
    parent = h;
  }
  return hits;
}

int64_t PrefixMirror::size() const {
  std::shared_lock lock(mu_);
  return static_cast<int64_t>(count_.size());
}

}  // namespace lifeline
