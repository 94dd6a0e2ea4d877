// Memory growth per input, for the harnesses of what a client sends (http, openai): the bytes
// one input makes the process hold at its peak may be at most kBytesPerInputByte x its size
// plus kBaseBytes, or the harness aborts (a libFuzzer crash; a failure of the corpus replay,
// Fuzz.<name>.Corpus). A limit on the largest single allocation (-malloc_limit_mb) misses
// growth made of many small pieces: a chunk extension or a schema held and expanded piece by
// piece, which took the server to 810 MB for two 300 MB inputs.
//
// Counts what goes through operator new / delete (every container, string and JSON value of
// the code under test), with the size kept in a header before each block. Include this file in
// exactly one translation unit of a harness binary: it replaces the global operators.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace lifeline::fuzz {

inline constexpr size_t kBytesPerInputByte = 64;   // JSON values and parse trees: ~16-40x
inline constexpr size_t kBaseBytes = 4u << 20;     // fixed tables, buffers, route maps

inline std::atomic<size_t> g_live_bytes{0};
inline std::atomic<size_t> g_peak_bytes{0};

// Resets the peak to what is live now; at the end of the input, aborts when the peak grew by
// more than the bound for `input_bytes`.
class GrowthScope {
 public:
  GrowthScope(size_t input_bytes, const char* harness)
      : input_bytes_(input_bytes), harness_(harness), start_(g_live_bytes.load()) {
    g_peak_bytes.store(start_);
  }
  ~GrowthScope() {
    const size_t peak = g_peak_bytes.load();
    const size_t grew = peak > start_ ? peak - start_ : 0;
    const size_t bound = kBytesPerInputByte * input_bytes_ + kBaseBytes;
    if (grew > bound) {
      std::fprintf(stderr,
                   "fuzz invariant broken: %s: one input of %zu bytes made the process hold "
                   "%zu bytes more at its peak (bound %zu = %zu x input + %zu)\n",
                   harness_, input_bytes_, grew, bound, kBytesPerInputByte, kBaseBytes);
      std::abort();
    }
  }
  GrowthScope(const GrowthScope&) = delete;
  GrowthScope& operator=(const GrowthScope&) = delete;

 private:
  size_t input_bytes_;
  const char* harness_;
  size_t start_;
};

namespace detail {
// The header before each block: its size, padded to the strictest fundamental alignment.
inline constexpr size_t kHeader = alignof(std::max_align_t);

inline void* Allocate(size_t n) {
  void* p = std::malloc(n + kHeader);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  const size_t live = g_live_bytes.fetch_add(n) + n;
  size_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return static_cast<char*>(p) + kHeader;
}

inline void Release(void* q) {
  if (q == nullptr) return;
  void* p = static_cast<char*>(q) - kHeader;
  g_live_bytes.fetch_sub(*static_cast<size_t*>(p));
  std::free(p);
}
}  // namespace detail

}  // namespace lifeline::fuzz

// Over-aligned allocations (alignas > max_align_t) keep the library's own operators.
void* operator new(std::size_t n) { return lifeline::fuzz::detail::Allocate(n); }
void* operator new[](std::size_t n) { return lifeline::fuzz::detail::Allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return lifeline::fuzz::detail::Allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return lifeline::fuzz::detail::Allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { lifeline::fuzz::detail::Release(p); }
void operator delete[](void* p) noexcept { lifeline::fuzz::detail::Release(p); }
void operator delete(void* p, std::size_t) noexcept { lifeline::fuzz::detail::Release(p); }
void operator delete[](void* p, std::size_t) noexcept { lifeline::fuzz::detail::Release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { lifeline::fuzz::detail::Release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { lifeline::fuzz::detail::Release(p); }
