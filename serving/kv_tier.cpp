#include "serving/kv_tier.h"

#include <algorithm>
#include <cstring>

#include "engine/kernels/fp16_row.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline::serving {

namespace {
constexpr int64_t kQ8Values = 32;      // values per Q8_0 block
constexpr int64_t kQ8BlockBytes = 34;  // f16 scale + 32 int8
}  // namespace

uint64_t KvBlockChecksum(std::span<const uint8_t> bytes) {
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes.size(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

HostKvTier::HostKvTier(KvStorage* storage, uint64_t capacity_bytes,
                       std::unique_ptr<KvDiskStore> disk, bool q8_copies)
    : storage_(storage),
      capacity_bytes_(capacity_bytes),
      disk_(std::move(disk)),
      block_bytes_(storage->block_bytes()),
      copy_bytes_(storage->block_bytes()) {
  const KvType type = storage->type();
  if (q8_copies && (type == KvType::kF16 || type == KvType::kF32)) {
    const int64_t value_bytes = type == KvType::kF16 ? 2 : 4;
    const int64_t values = static_cast<int64_t>(block_bytes_) / value_bytes;
    q8_values_ = (values + kQ8Values - 1) / kQ8Values * kQ8Values;  // padded to whole blocks
    copy_bytes_ = static_cast<uint64_t>(q8_values_ / kQ8Values * kQ8BlockBytes);
    floats_.assign(static_cast<size_t>(q8_values_), 0.0f);
  }
  stats_.capacity_bytes = capacity_bytes;
  scratch_ = std::make_unique_for_overwrite<uint8_t[]>(block_bytes_);
}

void HostKvTier::Pack(const uint8_t* raw, uint8_t* copy) {
  if (q8_values_ == 0) {
    std::memcpy(copy, raw, block_bytes_);
    return;
  }
  if (storage_->type() == KvType::kF16) {
    Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(raw), floats_.data(),
                  static_cast<int64_t>(block_bytes_ / 2));
  } else {
    std::memcpy(floats_.data(), raw, block_bytes_);
  }
  ref::QuantizeRow(GgmlType::kQ8_0, floats_.data(), copy, q8_values_);
}

void HostKvTier::Unpack(const uint8_t* copy, uint8_t* raw) {
  if (q8_values_ == 0) {
    std::memcpy(raw, copy, block_bytes_);
    return;
  }
  ref::DequantizeRow(GgmlType::kQ8_0, copy, floats_.data(), q8_values_);
  if (storage_->type() == KvType::kF16) {
    Fp32ToFp16Row(floats_.data(), reinterpret_cast<uint16_t*>(raw),
                  static_cast<int64_t>(block_bytes_ / 2));
  } else {
    std::memcpy(raw, floats_.data(), block_bytes_);
  }
}

namespace {

bool SameTokens(const std::vector<int32_t>& held, std::span<const int32_t> tokens) {
  return std::equal(tokens.begin(), tokens.end(), held.begin(), held.end());
}

}  // namespace

const HostKvTier::Entry* HostKvTier::Find(uint64_t hash, std::span<const int32_t> tokens) const {
  auto it = entries_.find(hash);
  return it != entries_.end() && SameTokens(it->second.tokens, tokens) ? &it->second : nullptr;
}

void HostKvTier::Touch(Entry& e, uint64_t hash) {
  lru_.erase(e.lru_pos);
  e.lru_pos = lru_.insert(lru_.end(), hash);
}

void HostKvTier::Drop(std::unordered_map<uint64_t, Entry>::iterator it) {
  lru_.erase(it->second.lru_pos);
  entries_.erase(it);
  stats_.bytes -= copy_bytes_;
  --stats_.entries;
}

void HostKvTier::OnEvict(BlockId block, uint64_t hash, std::span<const int32_t> tokens) {
  if (block_bytes_ == 0) return;
  if (disk_ != nullptr) Persist(block, hash, tokens);
  if (copy_bytes_ > capacity_bytes_) return;
  if (auto it = entries_.find(hash); it != entries_.end()) {
    // Already held (restored earlier and evicted again): same chain, same contents.
    if (SameTokens(it->second.tokens, tokens)) {
      Touch(it->second, hash);
      return;
    }
    Drop(it);  // a hash collision with other tokens: the newer one wins
  }
  storage_->CopyBlockOut(block, scratch_.get());
  Keep(hash, tokens, scratch_.get());
  ++stats_.stored;
}

void HostKvTier::Keep(uint64_t hash, std::span<const int32_t> tokens, const uint8_t* raw) {
  if (copy_bytes_ > capacity_bytes_ || entries_.count(hash)) return;
  while (stats_.bytes + copy_bytes_ > capacity_bytes_ && !lru_.empty()) {
    Drop(entries_.find(lru_.front()));
    ++stats_.dropped;
  }
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.bytes = std::make_unique_for_overwrite<uint8_t[]>(copy_bytes_);
  Pack(raw, e.bytes.get());
  e.checksum = KvBlockChecksum({e.bytes.get(), copy_bytes_});
  e.lru_pos = lru_.insert(lru_.end(), hash);
  entries_.emplace(hash, std::move(e));
  stats_.bytes += copy_bytes_;
  ++stats_.entries;
}

void HostKvTier::Persist(BlockId block, uint64_t hash, std::span<const int32_t> tokens,
                         bool wait_for_room) {
  if (disk_ == nullptr || disk_->Holds(hash)) return;
  storage_->CopyBlockOut(block, scratch_.get());
  disk_->Write(hash, tokens, {scratch_.get(), block_bytes_}, wait_for_room);
}

void HostKvTier::Flush() {
  if (disk_ != nullptr) disk_->Flush();
}

bool HostKvTier::Holds(uint64_t hash, std::span<const int32_t> tokens) const {
  return Find(hash, tokens) != nullptr || (disk_ != nullptr && disk_->Holds(hash));
}

bool HostKvTier::Restore(uint64_t hash, std::span<const int32_t> tokens, BlockId into) {
  auto it = entries_.find(hash);
  if (it == entries_.end() || !SameTokens(it->second.tokens, tokens)) {
    // Not in RAM: from disk (verified there), and kept in RAM again.
    if (disk_ == nullptr || !disk_->Read(hash, tokens, {scratch_.get(), block_bytes_})) {
      return false;
    }
    storage_->CopyBlockIn(into, scratch_.get());
    Keep(hash, tokens, scratch_.get());
    ++stats_.restored;
    ++stats_.restored_from_disk;
    return true;
  }
  Entry& e = it->second;
  if (KvBlockChecksum({e.bytes.get(), copy_bytes_}) != e.checksum) {
    Drop(it);
    ++stats_.corrupt;
    return false;
  }
  Unpack(e.bytes.get(), scratch_.get());
  storage_->CopyBlockIn(into, scratch_.get());
  Touch(e, hash);
  ++stats_.restored;
  return true;
}

KvTierStats HostKvTier::Stats() const {
  KvTierStats s = stats_;
  if (disk_ != nullptr) {
    const KvDiskStats d = disk_->Stats();
    s.disk_capacity_bytes = d.capacity_bytes;
    s.disk_bytes = d.bytes;
    s.disk_found_at_start = d.found_at_start;
    s.disk_written = d.written;
    s.disk_dropped = d.dropped;
    s.disk_rejected = d.rejected;
    s.disk_write_errors = d.write_errors;
    s.disk_queue_full = d.queue_full;
  }
  return s;
}

bool HostKvTier::CorruptForTest(uint64_t hash) {
  auto it = entries_.find(hash);
  if (it == entries_.end() || copy_bytes_ == 0) return false;
  it->second.bytes[copy_bytes_ / 2] ^= 0x5A;
  return true;
}

}  // namespace lifeline::serving
