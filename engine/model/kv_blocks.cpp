#include "engine/model/kv_blocks.h"

#include <string>

#include "base/check.h"

namespace lifeline {

KvBlockPool::KvBlockPool(int32_t n_blocks) {
  LL_CHECK(n_blocks >= 0);
  in_use_.assign(static_cast<size_t>(n_blocks), 0);
  free_.reserve(static_cast<size_t>(n_blocks));
  // Pushed in reverse so the first allocations return 0, 1, 2, ... (easier to read in tests).
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> KvBlockPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvBlockPool::Free(int32_t block) {
  LL_CHECK(block >= 0 && block < n_blocks());
  LL_CHECK(in_use_[static_cast<size_t>(block)] == 1);
  in_use_[static_cast<size_t>(block)] = 0;
  free_.push_back(block);
}

SeqId KvSequenceTable::Create() {
  // Ids are never reused while the table lives, so a stale handle cannot alias a new sequence
  // (wrapping after 2^31 creations is far beyond any process lifetime here).
  const SeqId id = next_id_;
  next_id_ = next_id_ == INT32_MAX ? 0 : next_id_ + 1;
  seqs_[id] = KvSequence{};
  return id;
}

Status KvSequenceTable::Release(SeqId seq) {
  KvSequence* s = FindMutable(seq);
  if (s == nullptr) return InvalidArgument("kv: unknown sequence id " + std::to_string(seq));
  for (int32_t b : s->blocks) pool_.Free(b);
  seqs_.erase(seq);
  return Status::Ok();
}

const KvSequence* KvSequenceTable::Find(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

KvSequence* KvSequenceTable::FindMutable(SeqId seq) {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

int64_t KvSequenceTable::BlocksNeeded(SeqId seq, int64_t n_positions) const {
  const KvSequence* s = Find(seq);
  LL_CHECK(s != nullptr);
  const int64_t have = static_cast<int64_t>(s->blocks.size());
  const int64_t want = KvBlocksFor(n_positions);
  return want > have ? want - have : 0;
}

bool KvSequenceTable::Reserve(SeqId seq, int64_t n_positions) {
  KvSequence* s = FindMutable(seq);
  LL_CHECK(s != nullptr);
  const int64_t need = BlocksNeeded(seq, n_positions);
  if (need > pool_.n_free()) return false;
  for (int64_t i = 0; i < need; ++i) s->blocks.push_back(*pool_.Allocate());
  return true;
}

void KvSequenceTable::SetLength(SeqId seq, int64_t n_tokens) {
  KvSequence* s = FindMutable(seq);
  LL_CHECK(s != nullptr);
  LL_CHECK(n_tokens >= 0 && KvBlocksFor(n_tokens) <= static_cast<int64_t>(s->blocks.size()));
  s->n_tokens = n_tokens;
}

Status KvSequenceTable::Truncate(SeqId seq, int64_t n_tokens) {
  KvSequence* s = FindMutable(seq);
  if (s == nullptr) return InvalidArgument("kv: unknown sequence id " + std::to_string(seq));
  if (n_tokens < 0 || n_tokens > s->n_tokens) {
    return OutOfRange("kv: truncate sequence " + std::to_string(seq) + " to " +
                      std::to_string(n_tokens) + " tokens outside [0, " +
                      std::to_string(s->n_tokens) + "]");
  }
  const size_t keep = static_cast<size_t>(KvBlocksFor(n_tokens));
  while (s->blocks.size() > keep) {
    pool_.Free(s->blocks.back());
    s->blocks.pop_back();
  }
  s->n_tokens = n_tokens;
  return Status::Ok();
}

SeqKv KvSequenceTable::View(SeqId seq) const {
  const KvSequence* s = Find(seq);
  LL_CHECK(s != nullptr);
  return SeqKv{seq, s->blocks, s->n_tokens};
}

// The first logical block a query at position `pos` reads under the window.
int64_t KvWindowTable::AttnFirstVisibleBlock(int64_t pos) const {
  const int64_t first = pos - window_ + 1;
  return first > 0 ? first / kKvBlockTokens : 0;
}

KvWindowTable::KvWindowTable(int32_t n_blocks, int64_t window)
    : pool_(n_blocks), window_(window) {
  LL_CHECK(window >= 1);
}

KvWindowTable::Seq& KvWindowTable::Get(SeqId seq) {
  auto it = seqs_.find(seq);
  LL_CHECK(it != seqs_.end());
  return it->second;
}

const KvWindowTable::Seq& KvWindowTable::Get(SeqId seq) const {
  auto it = seqs_.find(seq);
  LL_CHECK(it != seqs_.end());
  return it->second;
}

void KvWindowTable::Create(SeqId seq) { seqs_[seq] = Seq{}; }

void KvWindowTable::Release(SeqId seq) {
  Seq& s = Get(seq);
  for (int32_t b : s.blocks) {
    if (b >= 0) pool_.Free(b);
  }
  seqs_.erase(seq);
}

int64_t KvWindowTable::BlocksNeeded(SeqId seq, int64_t n_positions) const {
  const Seq& s = Get(seq);
  const int64_t want = KvBlocksFor(n_positions);
  const int64_t have = static_cast<int64_t>(s.blocks.size());
  return want > have ? want - have : 0;
}

bool KvWindowTable::Reserve(SeqId seq, int64_t n_positions) {
  const int64_t need = BlocksNeeded(seq, n_positions);
  if (need > pool_.n_free()) return false;
  Seq& s = Get(seq);
  for (int64_t i = 0; i < need; ++i) s.blocks.push_back(*pool_.Allocate());
  return true;
}

void KvWindowTable::Advance(SeqId seq, int64_t n_tokens) {
  Seq& s = Get(seq);
  LL_CHECK(n_tokens >= s.n_tokens && KvBlocksFor(n_tokens) <= static_cast<int64_t>(s.blocks.size()));
  s.n_tokens = n_tokens;
  // The next position, n_tokens, reads from n_tokens - window + 1 on: earlier blocks go.
  const int64_t first_needed = AttnFirstVisibleBlock(n_tokens);
  for (; s.first_held < first_needed; ++s.first_held) {
    int32_t& b = s.blocks[static_cast<size_t>(s.first_held)];
    if (b >= 0) pool_.Free(b);
    b = -1;
  }
}

Status KvWindowTable::Truncate(SeqId seq, int64_t n_tokens) {
  Seq& s = Get(seq);
  if (n_tokens < 0 || n_tokens > s.n_tokens) {
    return OutOfRange("kv: truncate sequence " + std::to_string(seq) + " to " +
                      std::to_string(n_tokens) + " tokens outside [0, " +
                      std::to_string(s.n_tokens) + "]");
  }
  if (n_tokens > 0 && AttnFirstVisibleBlock(n_tokens) < s.first_held) {
    return InvalidArgument(
        "kv: sequence " + std::to_string(seq) + " cannot rewind to " + std::to_string(n_tokens) +
        " tokens: its sliding-window layers released the positions before " +
        std::to_string(s.first_held * kKvBlockTokens) + " (recompute from the start)");
  }
  const size_t keep = static_cast<size_t>(KvBlocksFor(n_tokens));
  while (s.blocks.size() > keep) {
    if (s.blocks.back() >= 0) pool_.Free(s.blocks.back());
    s.blocks.pop_back();
  }
  if (n_tokens == 0) s.first_held = 0;
  s.n_tokens = n_tokens;
  return Status::Ok();
}

const int32_t* KvWindowTable::blocks(SeqId seq) const { return Get(seq).blocks.data(); }
int64_t KvWindowTable::length(SeqId seq) const { return Get(seq).n_tokens; }
int64_t KvWindowTable::first_held(SeqId seq) const { return Get(seq).first_held; }

}  // namespace lifeline
