// HugePageBuffer: zero-filled, writable over its whole size, 2 MiB aligned (so the kernel can
// back it with huge pages), move-only ownership, and a clear error for a bad size.
#include "base/huge_page_buffer.h"

#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

TEST(HugePageBuffer, ZeroFilledWritableAligned) {
  const uint64_t n = (uint64_t{5} << 20) + 123;  // not a whole number of huge pages
  auto b = HugePageBuffer::Allocate(n);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_NE(b->data(), nullptr);
  EXPECT_EQ(b->size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % (uint64_t{2} << 20), 0u);
  for (uint64_t i = 0; i < n; i += 4096) EXPECT_EQ(b->data()[i], 0) << i;
  EXPECT_EQ(b->data()[n - 1], 0);
  for (uint64_t i = 0; i < n; i += 997) b->data()[i] = static_cast<uint8_t>(i);
  b->data()[n - 1] = 7;
  for (uint64_t i = 0; i < n; i += 997) ASSERT_EQ(b->data()[i], static_cast<uint8_t>(i)) << i;
  EXPECT_EQ(b->data()[n - 1], 7);
}

TEST(HugePageBuffer, MoveTransfersOwnership) {
  auto a = HugePageBuffer::Allocate(4096);
  ASSERT_TRUE(a.ok());
  uint8_t* p = a->data();
  p[10] = 42;
  HugePageBuffer b = std::move(*a);
  EXPECT_EQ(a->data(), nullptr);
  EXPECT_EQ(a->size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[10], 42);
  HugePageBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(HugePageBuffer, BadSizesAreErrors) {
  auto zero = HugePageBuffer::Allocate(0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("size 0"), std::string::npos) << zero.status().ToString();
  EXPECT_FALSE(HugePageBuffer::Allocate(uint64_t{1} << 50).ok());
}

}  // namespace
}  // namespace lifeline
