// No allocation larger than the file's bytes justify: while a hostile image is parsed, the
// largest single operator-new request must stay within 4 x the image size (plus a small
// constant for messages and empty-container overhead), whatever counts the image claims.
//
// This replaces the global operator new/delete of the gguf test binary; the counters are the
// one piece of mutable global state here, and they only record while a parse is in progress.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "gguf/gguf_test_util.h"

namespace {

std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest{0};

void Record(size_t n) {
  if (!g_tracking.load(std::memory_order_relaxed)) return;
  size_t cur = g_largest.load(std::memory_order_relaxed);
  while (n > cur && !g_largest.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

}  // namespace

// GCC sees free() after inlining these into callers and warns about a mismatch; they are a
// matched pair (malloc/free) by construction.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  Record(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace lifeline {
namespace {

constexpr size_t kSlackBytes = 1024;

size_t LargestAllocationWhileParsing(const std::vector<uint8_t>& bytes, size_t size) {
  g_largest = 0;
  g_tracking = true;
  auto f = GgufFile::FromMemory(bytes.data(), size);
  g_tracking = false;
  return g_largest.load();
}

TEST(GgufAlloc, TrackerSeesParserAllocations) {
  // Guards the test itself: a valid vocab of 1000 strings must show its string-view vector.
  GgufWriter w;
  w.AddStringArray("t", std::vector<std::string>(1000, "x"));
  const std::string path = testing::TempPath("alloc.gguf");
  ASSERT_TRUE(w.Write(path, testing::FillSmall).ok());
  const std::vector<uint8_t> bytes = testing::ReadFileBytes(path);
  std::remove(path.c_str());
  EXPECT_GE(LargestAllocationWhileParsing(bytes, bytes.size()), 1000 * sizeof(std::string_view));
}

TEST(GgufAlloc, HostileImagesAllocateNoMoreThanTheirBytesJustify) {
  for (const auto& c : testing::CorruptionMatrix()) {
    SCOPED_TRACE(c.name);
    EXPECT_LE(LargestAllocationWhileParsing(c.bytes, c.bytes.size()),
              4 * c.bytes.size() + kSlackBytes);
  }
  const std::vector<uint8_t> small = testing::WriteSmallWithWriter();
  for (size_t len = 0; len <= small.size(); ++len) {
    ASSERT_LE(LargestAllocationWhileParsing(small, len), 4 * len + kSlackBytes) << len;
  }
}

TEST(GgufAlloc, CountsUnderTheCapsButBeyondTheBytesAreRejectedBeforeReserving) {
  // 60000 KVs and 60000 tensors claimed (under the 65536 caps) by a 40-byte file.
  testing::RawGguf r;
  r.Put("GGUF", 4).U32(3).U64(60000).U64(60000).Zeros(16);
  EXPECT_LE(LargestAllocationWhileParsing(r.bytes(), r.size()), kSlackBytes);
  // A string array claiming 2^26 - 1 elements (under the cap) in a few bytes.
  testing::RawGguf s;
  s.Put("GGUF", 4).U32(3).U64(0).U64(1).Str("a").U32(9).U32(8).U64((1ull << 26) - 1).Zeros(64);
  EXPECT_LE(LargestAllocationWhileParsing(s.bytes(), s.size()), kSlackBytes);
}

}  // namespace
}  // namespace lifeline
