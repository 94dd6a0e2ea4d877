// Parity of the dispatched half <-> float row conversions with their scalar twins: half ->
// float over every 16-bit pattern; float -> half over every half value's float, the rounding
// midpoints between neighbouring halves and one float ulp either side of them (ties to even,
// both directions), the subnormal / overflow / infinity / NaN edges, and a million random bit
// patterns; at lengths that exercise the 8-wide body and the tail.
#include "engine/kernels/fp16_row.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
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

float FromBits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

std::vector<float> Fp32Cases() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 65536; ++h) {
    float ref;
    const uint16_t hh = static_cast<uint16_t>(h);
    Fp16ToFp32RowScalar(&hh, &ref, 1);
    if (std::isnan(ref)) continue;
    v.push_back(ref);
    const uint16_t next = static_cast<uint16_t>(h + 1);
    float up;
    Fp16ToFp32RowScalar(&next, &up, 1);
    if (!std::isfinite(up) || !std::isfinite(ref) || (h & 0x7fff) == 0x7fff) continue;
    // Midpoint towards the next half (exact in float: halves have 11 significant bits).
    const float mid = ref + (up - ref) / 2;
    v.push_back(mid);
    v.push_back(FromBits(Bits(mid) + 1));
    v.push_back(FromBits(Bits(mid) - 1));
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f, -1e-10f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -24),
                  std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -14)}) {
    v.push_back(f);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0xff812345u, 0x7fffffffu}) {
    v.push_back(FromBits(nan));
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 1000000; ++i) v.push_back(FromBits(rng()));
  return v;
}

TEST(Fp16Row, FloatToHalfDispatchedMatchesScalarBitForBit) {
  const std::vector<float> src = Fp32Cases();
  const int64_t all = static_cast<int64_t>(src.size());
  for (int64_t n : {all, all - 3, int64_t{7}, int64_t{1}}) {
    std::vector<uint16_t> fast(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    Fp32ToFp16Row(src.data(), fast.data(), n);
    Fp32ToFp16RowScalar(src.data(), ref.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(fast[i], ref[i]) << "float bits 0x" << std::hex << Bits(src[i]);
    }
  }
}

TEST(Fp16Row, FloatToHalfKnownValues) {
  // Ties to even: 1 + 2^-11 lies halfway between 1.0 (0x3C00) and 1 + 2^-10 (0x3C01).
  const float src[6] = {1.0f, -2.0f, 65504.0f, 1.0f + std::ldexp(1.0f, -11),
                        1.0f + 3 * std::ldexp(1.0f, -11), 65520.0f};
  uint16_t dst[6];
  Fp32ToFp16Row(src, dst, 6);
  EXPECT_EQ(dst[0], 0x3C00);
  EXPECT_EQ(dst[1], 0xC000);
  EXPECT_EQ(dst[2], 0x7BFF);
  EXPECT_EQ(dst[3], 0x3C00);  // tie -> even
  EXPECT_EQ(dst[4], 0x3C02);  // tie -> even (up)
  EXPECT_EQ(dst[5], 0x7C00);  // rounds past the largest finite half: infinity
}

}  // namespace
}  // namespace lifeline
