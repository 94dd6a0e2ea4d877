#include "serving/kv_disk_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "base/kv_block.h"
#include "serving/kv_tier.h"

namespace lifeline::serving {
namespace {

constexpr char kMagic[8] = {'L', 'L', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxQueued = 256;

// The file's layout, in order: header, tokens (int32 x n_tokens), bytes, checksum (u64 over
// everything before it).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t n_tokens;
  uint64_t identity;
  uint64_t hash;
  uint64_t block_bytes;
};
static_assert(sizeof(Header) == 40);

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

bool ParseHexName(const std::filesystem::path& p, uint64_t* hash) {
  const std::string stem = p.stem().string();
  if (p.extension() != ".kvb" || stem.size() != 16) return false;
  uint64_t v = 0;
  for (char c : stem) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *hash = v;
  return true;
}

}  // namespace

uint64_t ModelFileIdentity(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  constexpr uint64_t kSample = 1 << 20;
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(size, kSample)));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  uint64_t h = KvBlockChecksum(buf) ^ (size * 0x9E3779B97F4A7C15ull);
  if (size > kSample) {
    in.seekg(static_cast<std::streamoff>(size - kSample));
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    h = h * 31 + KvBlockChecksum(buf);
  }
  return in ? h : 0;
}

uint64_t ModelKvIdentity(uint64_t file_identity, int kv_type, uint64_t block_bytes) {
  uint64_t h = file_identity;
  for (uint64_t v : {static_cast<uint64_t>(kv_type) + 1, block_bytes}) {
    h = (h ^ v) * 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

Result<std::unique_ptr<KvDiskStore>> KvDiskStore::Open(const std::filesystem::path& dir,
                                                       uint64_t model_identity,
                                                       uint64_t block_bytes,
                                                       uint64_t capacity_bytes) {
  const std::filesystem::path folder = dir / Hex(model_identity);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec || !std::filesystem::is_directory(folder)) {
    return InvalidArgument("--prefix-cache-dir: cannot create '" + folder.string() +
                           "': " + (ec ? ec.message() : std::string("not a directory")));
  }
  std::unique_ptr<KvDiskStore> s(
      new KvDiskStore(folder, model_identity, block_bytes, capacity_bytes));
  s->IndexExisting();
  s->writer_ = std::thread([p = s.get()] { p->WriterLoop(); });
  return s;
}

KvDiskStore::KvDiskStore(std::filesystem::path folder, uint64_t identity, uint64_t block_bytes,
                         uint64_t capacity_bytes)
    : folder_(std::move(folder)),
      identity_(identity),
      block_bytes_(block_bytes),
      capacity_bytes_(capacity_bytes),
      file_bytes_(sizeof(Header) + kKvBlockTokens * sizeof(int32_t) + block_bytes +
                  sizeof(uint64_t)) {
  stats_.capacity_bytes = capacity_bytes;
}

KvDiskStore::~KvDiskStore() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::filesystem::path KvDiskStore::PathOf(uint64_t hash) const {
  return folder_ / (Hex(hash) + ".kvb");
}

void KvDiskStore::IndexExisting() {
  // Oldest files first, so the LRU order after a restart follows the files' ages.
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(folder_, ec)) {
    uint64_t hash = 0;
    if (!e.is_regular_file(ec) || !ParseHexName(e.path(), &hash)) {
      // Leftover temporary files of an interrupted write.
      if (e.path().extension() == ".tmp") std::filesystem::remove(e.path(), ec);
      continue;
    }
    files.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(files.begin(), files.end());
  std::lock_guard lock(mu_);
  for (const auto& [t, path] : files) {
    uint64_t hash = 0;
    ParseHexName(path, &hash);
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec || size != file_bytes_) {  // another block size, or truncated: never loadable
      std::filesystem::remove(path, ec);
      ++stats_.rejected;
      continue;
    }
    Insert(hash, size);
    ++stats_.found_at_start;
  }
}

void KvDiskStore::Insert(uint64_t hash, uint64_t size) {
  if (index_.count(hash)) return;
  Entry e;
  e.size = size;
  e.lru_pos = lru_.insert(lru_.end(), hash);
  index_.emplace(hash, e);
  stats_.bytes += size;
  ++stats_.files;
  while (stats_.bytes > capacity_bytes_ && !lru_.empty()) {
    Forget(lru_.front(), /*delete_file=*/true);
    ++stats_.dropped;
  }
}

void KvDiskStore::Forget(uint64_t hash, bool delete_file) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  stats_.bytes -= it->second.size;
  --stats_.files;
  lru_.erase(it->second.lru_pos);
  index_.erase(it);
  if (delete_file) {
    std::error_code ec;
    std::filesystem::remove(PathOf(hash), ec);
  }
}

void KvDiskStore::Touch(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  lru_.erase(it->second.lru_pos);
  it->second.lru_pos = lru_.insert(lru_.end(), hash);
}

void KvDiskStore::Write(uint64_t hash, std::span<const int32_t> tokens,
                        std::span<const uint8_t> bytes, bool wait_for_room) {
  if (bytes.size() != block_bytes_ || tokens.size() != static_cast<size_t>(kKvBlockTokens) ||
      file_bytes_ > capacity_bytes_) {
    return;
  }
  {
    std::unique_lock lock(mu_);
    if (index_.count(hash)) {
      Touch(hash);
      return;
    }
    if (wait_for_room) idle_cv_.wait(lock, [&] { return queue_.size() < kMaxQueued || stop_; });
    if (queue_.size() >= kMaxQueued) {
      ++stats_.queue_full;
      return;
    }
    Pending p{hash, std::vector<int32_t>(tokens.begin(), tokens.end()),
              std::make_unique_for_overwrite<uint8_t[]>(bytes.size())};
    std::memcpy(p.bytes.get(), bytes.data(), bytes.size());
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void KvDiskStore::WriterLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, every queued write done
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    WriteFile(p);
    lock.lock();
    writing_ = false;
    idle_cv_.notify_all();
  }
}

void KvDiskStore::WriteFile(const Pending& p) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.n_tokens = kKvBlockTokens;
  h.identity = identity_;
  h.hash = p.hash;
  h.block_bytes = block_bytes_;
  std::vector<uint8_t> file(file_bytes_);
  uint8_t* w = file.data();
  std::memcpy(w, &h, sizeof h);
  w += sizeof h;
  std::memcpy(w, p.tokens.data(), p.tokens.size() * sizeof(int32_t));
  w += p.tokens.size() * sizeof(int32_t);
  std::memcpy(w, p.bytes.get(), block_bytes_);
  w += block_bytes_;
  const uint64_t sum = KvBlockChecksum({file.data(), static_cast<size_t>(w - file.data())});
  std::memcpy(w, &sum, sizeof sum);
  const std::filesystem::path final_path = PathOf(p.hash);
  std::filesystem::path tmp = final_path;
  tmp += ".tmp";
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
    out.flush();
    ok = static_cast<bool>(out);
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, final_path, ec);
  std::lock_guard lock(mu_);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    ++stats_.write_errors;
    return;
  }
  Insert(p.hash, file_bytes_);
  ++stats_.written;
}

bool KvDiskStore::Holds(uint64_t hash) const {
  std::lock_guard lock(mu_);
  return index_.count(hash) != 0;
}

bool KvDiskStore::Read(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) {
  if (!Holds(hash) || out.size() != block_bytes_) return false;
  std::vector<uint8_t> file(file_bytes_);
  bool whole = false;
  {
    std::ifstream in(PathOf(hash), std::ios::binary);
    in.read(reinterpret_cast<char*>(file.data()), static_cast<std::streamsize>(file.size()));
    whole = in.gcount() == static_cast<std::streamsize>(file.size()) && in.peek() == EOF;
  }
  Header h{};
  std::memcpy(&h, file.data(), sizeof h);
  const uint8_t* tok = file.data() + sizeof h;
  const uint8_t* bytes = tok + kKvBlockTokens * sizeof(int32_t);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes + block_bytes_, sizeof sum);
  const bool valid =
      whole && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kVersion &&
      h.n_tokens == static_cast<uint32_t>(kKvBlockTokens) && h.identity == identity_ &&
      h.hash == hash && h.block_bytes == block_bytes_ &&
      KvBlockChecksum({file.data(), static_cast<size_t>(bytes + block_bytes_ - file.data())}) ==
          sum;
  std::lock_guard lock(mu_);
  if (!valid) {
    Forget(hash, /*delete_file=*/true);
    ++stats_.rejected;
    return false;
  }
  if (tokens.size() != static_cast<size_t>(kKvBlockTokens) ||
      std::memcmp(tok, tokens.data(), tokens.size() * sizeof(int32_t)) != 0) {
    return false;  // a hash collision: another chain's block, not this one (kept)
  }
  std::memcpy(out.data(), bytes, block_bytes_);
  Touch(hash);
  ++stats_.read;
  return true;
}

void KvDiskStore::Flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

KvDiskStats KvDiskStore::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace lifeline::serving
