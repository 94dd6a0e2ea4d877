#include "base/huge_page_buffer.h"

#include <sys/mman.h>

#include <string>
#include <utility>

namespace lifeline {

namespace {
constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;
}  // namespace

HugePageBuffer::~HugePageBuffer() { Reset(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_bytes_(std::exchange(o.mapped_bytes_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
  }
  return *this;
}

void HugePageBuffer::Reset() {
  if (data_ != nullptr) ::munmap(data_, mapped_bytes_);
  data_ = nullptr;
  size_ = mapped_bytes_ = 0;
}

Result<HugePageBuffer> HugePageBuffer::Allocate(uint64_t size_bytes) {
  if (size_bytes == 0 || size_bytes > (uint64_t{1} << 46)) {
    return InvalidArgument("HugePageBuffer: size " + std::to_string(size_bytes) +
                           " bytes outside (0, 2^46]");
  }
  const uint64_t mapped = (size_bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // Huge pages need 2 MiB aligned addresses: map one huge page more, trim head and tail.
  void* raw = ::mmap(nullptr, mapped + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return ResourceExhausted("cannot map " + std::to_string(size_bytes) +
                             " bytes of anonymous memory");
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t tail = aligned + mapped;
  const uintptr_t end = start + mapped + kHugePageBytes;
  if (end > tail) ::munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
#if defined(MADV_HUGEPAGE)
  (void)::madvise(p, mapped, MADV_HUGEPAGE);  // a hint: fine if refused
#endif
  HugePageBuffer b;
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size_bytes;
  b.mapped_bytes_ = mapped;
  return b;
}

}  // namespace lifeline
