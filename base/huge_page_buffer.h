// HugePageBuffer: a large anonymous, page-aligned allocation that asks the kernel for
// transparent huge pages (madvise MADV_HUGEPAGE; honoured where THP is "always" or
// "madvise", ignored elsewhere). For big read-mostly arrays streamed by compute kernels
// (repacked weights): 2 MiB pages cut page faults on first touch and TLB misses while
// streaming. Memory is zero-filled, released on destruction.
//
// Thread-safety: none (move-only value). Failure: Allocate returns ResourceExhausted naming
// the size when the mapping fails.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace lifeline {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& o) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  // size_bytes > 0; the mapping is rounded up to a whole number of 2 MiB.
  static Result<HugePageBuffer> Allocate(uint64_t size_bytes);

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void Reset();

  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;         // as asked
  uint64_t mapped_bytes_ = 0;  // as mapped
};

}  // namespace lifeline
