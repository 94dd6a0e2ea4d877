// Parity of the dispatched half -> float row conversion with its scalar twin, over every
// 16-bit pattern, at lengths that exercise the 8-wide body and the tail.
#include "engine/kernels/fp16_row.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

TEST(Fp16Row, DispatchedMatchesScalarOnEveryPattern) {
  std::vector<uint16_t> src(65536);
  for (uint32_t i = 0; i < 65536; ++i) src[i] = static_cast<uint16_t>(i);
  for (int64_t n : {int64_t{65536}, int64_t{65533}, int64_t{7}, int64_t{1}}) {
    std::vector<float> fast(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    Fp16ToFp32Row(src.data(), fast.data(), n);
    Fp16ToFp32RowScalar(src.data(), ref.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(ref[i])) {
        EXPECT_TRUE(std::isnan(fast[i])) << "pattern " << i;
        continue;
      }
      uint32_t a, b;
      std::memcpy(&a, &fast[i], 4);
      std::memcpy(&b, &ref[i], 4);
      ASSERT_EQ(a, b) << "pattern 0x" << std::hex << i;
    }
  }
}

TEST(Fp16Row, KnownValues) {
  // 0x3C00 = 1.0, 0xC000 = -2.0, 0x7BFF = 65504 (largest finite), 0x0001 = 2^-24.
  const uint16_t src[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
  float dst[4];
  Fp16ToFp32Row(src, dst, 4);
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_EQ(dst[1], -2.0f);
  EXPECT_EQ(dst[2], 65504.0f);
  EXPECT_EQ(dst[3], std::ldexp(1.0f, -24));
}

}  // namespace
}  // namespace lifeline
