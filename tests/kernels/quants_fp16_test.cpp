// IEEE binary16 and bfloat16 conversions (engine/kernels/fp16.h): exact values worked out by
// hand from the formats (binary16: 1 sign, 5 exponent bits biased by 15, 10 mantissa bits;
// bfloat16: the top 16 bits of a binary32), edge cases (subnormals, infinities, NaN, overflow)
// and round-to-nearest-even ties.
#include "engine/kernels/fp16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

TEST(Fp16, DecodesNormalsByHand) {
  EXPECT_EQ(Fp16ToFp32(0x3C00), 1.0f);            // exponent 15 -> 2^0
  EXPECT_EQ(Fp16ToFp32(0xBC00), -1.0f);
  EXPECT_EQ(Fp16ToFp32(0x4000), 2.0f);
  EXPECT_EQ(Fp16ToFp32(0x3555), 0.333251953125f);  // 2^-2 * (1 + 0x155 / 1024)
  EXPECT_EQ(Fp16ToFp32(0x7BFF), 65504.0f);         // 2^15 * (2 - 2^-10), largest finite
  EXPECT_EQ(Fp16ToFp32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
}

TEST(Fp16, DecodesSubnormalsAndZeros) {
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));  // 2^-14 * 1/1024
  EXPECT_EQ(Fp16ToFp32(0x0002), std::ldexp(1.0f, -23));
  EXPECT_EQ(Fp16ToFp32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(Fp16ToFp32(0x8155), -std::ldexp(341.0f, -24));
  EXPECT_EQ(ToBits(Fp16ToFp32(0x0000)), 0u);
  EXPECT_EQ(ToBits(Fp16ToFp32(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(Fp16, DecodesInfAndNaN) {
  EXPECT_EQ(Fp16ToFp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp16ToFp32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7E00)));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7C01)));  // signalling pattern: still NaN, not inf
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0xFFFF)));
}

TEST(Fp16, EncodesExactValues) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.5f), 0xC100);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
}

TEST(Fp16, RoundsToNearestEvenInNormalRange) {
  // Around 1.0 the half spacing is 2^-10; halfway points are odd multiples of 2^-11.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even (...00)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (...10)
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -20)), 0x3C00);
  // Rounding up carries into the exponent: (2 - 2^-11) is a tie between 0x3BFF and 2.0.
  EXPECT_EQ(Fp32ToFp16(2.0f - std::ldexp(1.0f, -11)), 0x4000);
  EXPECT_EQ(Fp32ToFp16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xBC02);
}

TEST(Fp16, RoundsToNearestEvenInSubnormalRange) {
  const float unit = std::ldexp(1.0f, -24);  // subnormal spacing
  EXPECT_EQ(Fp32ToFp16(0.5f * unit), 0x0000);               // tie with 0 -> even (0)
  EXPECT_EQ(Fp32ToFp16(std::nextafter(0.5f * unit, 1.0f)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(0.49f * unit), 0x0000);
  EXPECT_EQ(Fp32ToFp16(1.5f * unit), 0x0002);               // tie 1 / 2 -> even (2)
  EXPECT_EQ(Fp32ToFp16(2.5f * unit), 0x0002);               // tie 2 / 3 -> even (2)
  EXPECT_EQ(Fp32ToFp16(1023.5f * unit), 0x0400);  // tie 0x3FF / 0x400 -> even, now normal
  EXPECT_EQ(Fp32ToFp16(-1.5f * unit), 0x8002);
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-std::ldexp(1.0f, -30)), 0x8000);  // underflow keeps the sign
}

TEST(Fp16, OverflowAndSpecials) {
  // Halfway between 65504 and 65536 (the next step, not representable) is 65520: ties go to
  // even, and 0x7BFF is odd, so 65520 becomes infinity while anything below stays finite.
  EXPECT_EQ(Fp32ToFp16(65519.996f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(1e10f), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(-1e10f), 0xFC00);
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = Fp32ToFp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);  // still a NaN, not an infinity
  const uint16_t tiny_nan = Fp32ToFp16(FromBits(0x7F800001u));  // payload only in low bits
  EXPECT_EQ(tiny_nan & 0x7C00, 0x7C00);
  EXPECT_NE(tiny_nan & 0x03FF, 0);
}

TEST(Fp16, EveryNonNaNHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (is_nan) continue;
    ASSERT_EQ(Fp32ToFp16(Fp16ToFp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Bf16, DecodesByHand) {
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFp32(0xC000), -2.0f);
  EXPECT_EQ(Bf16ToFp32(0x4049), 3.140625f);
  EXPECT_EQ(Bf16ToFp32(0x0001), FromBits(0x00010000u));  // subnormal passes through
  EXPECT_EQ(Bf16ToFp32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToFp32(0x7FC0)));
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F808000u)), 0x3F80);  // tie, 0x3F80 even -> down
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F818000u)), 0x3F82);  // tie, 0x3F81 odd -> up
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(Fp32ToBf16(FromBits(0x3F807FFFu)), 0x3F80);  // below the tie
  EXPECT_EQ(Fp32ToBf16(FromBits(0xBF818000u)), 0xBF82);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(Fp32ToBf16(FromBits(0x00008000u)), 0x0000);
  EXPECT_EQ(Fp32ToBf16(-0.0f), 0x8000);
}

TEST(Bf16, OverflowAndSpecials) {
  // The largest float is above the last bf16 tie (0x7F7F8000): rounds to infinity.
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(Fp32ToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // A NaN whose payload lives only in the low 16 bits must not truncate to infinity.
  const uint16_t nan = Fp32ToBf16(FromBits(0x7F800001u));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(Fp32ToBf16(FromBits(0xFFC00000u)) & 0x8000, 0x8000);  // NaN keeps its sign
}

TEST(Bf16, EveryNonNaNBf16RoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const bool is_nan = (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0;
    if (is_nan) continue;
    ASSERT_EQ(Fp32ToBf16(Bf16ToFp32(static_cast<uint16_t>(b))), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace lifeline
