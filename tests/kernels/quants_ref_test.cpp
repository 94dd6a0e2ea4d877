// Hand-built blocks for every type DequantizeRow accepts. Each test writes a block's bytes
// from the format description (scale bits, packed levels) and computes the expected values
// from the format's formula; none of the expectations come from running the code under
// test. Scales are powers of two and levels small integers, so every expected value is
// exact in f32 and the comparisons are exact.
#include "engine/kernels/ref/quants_ref.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/ggml_type.h"

namespace lifeline {
namespace {

// IEEE binary16 bit patterns of the scales used below.
constexpr uint16_t kHalf_0_0625 = 0x2C00;  // 2^-4
constexpr uint16_t kHalf_0_125 = 0x3000;   // 2^-3
constexpr uint16_t kHalf_0_25 = 0x3400;    // 2^-2
constexpr uint16_t kHalf_0_5 = 0x3800;     // 2^-1
constexpr uint16_t kHalf_2 = 0x4000;       // 2^1
constexpr uint16_t kHalf_neg1 = 0xBC00;    // -1

void PutU16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xff);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> Dequantize(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  EXPECT_EQ(bytes.size(), RowBytes(type, n).value());
  std::vector<float> out(static_cast<size_t>(n), std::nanf(""));
  ref::DequantizeRow(type, bytes.data(), out.data(), n);
  return out;
}

void ExpectAllEq(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t e = 0; e < want.size(); ++e) {
    EXPECT_EQ(got[e], static_cast<float>(want[e])) << "element " << e;
  }
}

// A level pattern that differs between elements j and j + 16 (and between neighbours), so a
// nibble or bit placed at the wrong element shows up.
int Level(int e, int modulus) { return (7 * e + 3 + e / 5) % modulus; }

TEST(DequantHand, FloatTypes) {
  {
    const float v[2] = {1.5f, -0.0078125f};
    std::vector<uint8_t> b(8);
    std::memcpy(b.data(), v, 8);
    ExpectAllEq(Dequantize(GgmlType::kF32, b, 2), {1.5, -0.0078125});
  }
  {
    std::vector<uint8_t> b(8);
    PutU16(b, 0, 0x3C00);  // 1
    PutU16(b, 2, 0xC100);  // -(1 + 1/4) * 2 = -2.5
    PutU16(b, 4, 0x7BFF);  // largest finite half: (2 - 2^-10) * 2^15 = 65504
    PutU16(b, 6, 0x0001);  // smallest subnormal: 2^-24
    ExpectAllEq(Dequantize(GgmlType::kF16, b, 4), {1.0, -2.5, 65504.0, std::ldexp(1.0, -24)});
  }
  {
    std::vector<uint8_t> b(6);
    PutU16(b, 0, 0x3F80);  // 1
    PutU16(b, 2, 0x4049);  // 2 * (1 + 0x49 / 128) = 3.140625
    PutU16(b, 4, 0xC2F7);  // -(1 + 0x77/128) * 2^6 = -123.5
    ExpectAllEq(Dequantize(GgmlType::kBF16, b, 3), {1.0, 3.140625, -123.5});
  }
}

// IQ4_NL: value = d * grid[q] with ggml's grid {-127, -104, -83, -65, -49, -35, -22, -10, 1,
// 13, 25, 38, 53, 69, 89, 113} (written out here, not taken from the code under test).
TEST(DequantHand, IQ4_NL) {
  const double grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<uint8_t> b(18);
  PutU16(b, 0, kHalf_0_5);
  std::vector<double> want(32);
  for (int j = 0; j < 16; ++j) {
    const int lo = j, hi = 15 - j;
    b[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    want[j] = 0.5 * grid[lo];
    want[j + 16] = 0.5 * grid[hi];
  }
  ExpectAllEq(Dequantize(GgmlType::kIQ4_NL, b, 32), want);
}

// Values on the grid (times a power of two) quantize back to themselves: the first scale
// guess from the largest magnitude is exact and no trial scale beats a zero error.
TEST(QuantHand, IQ4_NLGridValuesRoundTripExactly) {
  const float grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * grid[(i * 7) % 16];
  std::vector<uint8_t> q(2 * 18);
  ref::QuantizeRow(GgmlType::kIQ4_NL, x.data(), q.data(), 64);
  std::vector<float> y(64);
  ref::DequantizeRow(GgmlType::kIQ4_NL, q.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(DequantHand, Q4_0) {
  // Literal bytes: d = 0.5; byte 0 = 0x3B -> element 0 has q = 0xB, element 16 has q = 3.
  {
    std::vector<uint8_t> b(18, 0x88);  // every other element q = 8 -> 0
    PutU16(b, 0, kHalf_0_5);
    b[2] = 0x3B;
    const auto y = Dequantize(GgmlType::kQ4_0, b, 32);
    EXPECT_EQ(y[0], (11 - 8) * 0.5f);   // 1.5
    EXPECT_EQ(y[16], (3 - 8) * 0.5f);   // -2.5
    for (int e : {1, 15, 17, 31}) EXPECT_EQ(y[e], 0.0f);
  }
  // Two blocks, every level used: value = d * (q - 8).
  std::vector<uint8_t> b(36);
  std::vector<double> want(64);
  const double d[2] = {0.5, 0.0625};
  PutU16(b, 0, kHalf_0_5);
  PutU16(b, 18, kHalf_0_0625);
  for (int blk = 0; blk < 2; ++blk) {
    for (int j = 0; j < 16; ++j) {
      const int lo = Level(32 * blk + j, 16), hi = Level(32 * blk + j + 16, 16);
      b[18 * blk + 2 + j] = static_cast<uint8_t>(lo | (hi << 4));
      want[32 * blk + j] = d[blk] * (lo - 8);
      want[32 * blk + j + 16] = d[blk] * (hi - 8);
    }
  }
  ExpectAllEq(Dequantize(GgmlType::kQ4_0, b, 64), want);
}

TEST(DequantHand, Q4_1) {
  // value = d * q + m with d = 0.25, m = -1.
  std::vector<uint8_t> b(20);
  PutU16(b, 0, kHalf_0_25);
  PutU16(b, 2, kHalf_neg1);
  std::vector<double> want(32);
  for (int j = 0; j < 16; ++j) {
    const int lo = Level(j, 16), hi = Level(j + 16, 16);
    b[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
    want[j] = 0.25 * lo - 1;
    want[j + 16] = 0.25 * hi - 1;
  }
  ExpectAllEq(Dequantize(GgmlType::kQ4_1, b, 32), want);
}

// Q5_0 / Q5_1: 5-bit q; low 4 bits as Q4_0, bit 4 of element e is bit e of the
// little-endian uint32 at qh.
void PackQ5(const int* q, uint8_t* qh, uint8_t* qs) {
  uint32_t bits = 0;
  for (int e = 0; e < 32; ++e) bits |= static_cast<uint32_t>(q[e] >> 4) << e;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
}

TEST(DequantHand, Q5_0) {
  // value = d * (q - 16), d = 0.125.
  std::vector<uint8_t> b(22);
  PutU16(b, 0, kHalf_0_125);
  int q[32];
  std::vector<double> want(32);
  for (int e = 0; e < 32; ++e) {
    q[e] = Level(e, 32);
    want[e] = 0.125 * (q[e] - 16);
  }
  PackQ5(q, &b[2], &b[6]);
  ExpectAllEq(Dequantize(GgmlType::kQ5_0, b, 32), want);

  // Literal: only qh bit 20 set (byte 2, bit 4), all nibbles 0 -> element 20 is
  // (16 - 16) * d = 0, all others (0 - 16) * d = -2.
  std::vector<uint8_t> lit(22, 0);
  PutU16(lit, 0, kHalf_0_125);
  lit[2 + 2] = 0x10;
  const auto y = Dequantize(GgmlType::kQ5_0, lit, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], e == 20 ? 0.0f : -2.0f) << e;
}

TEST(DequantHand, Q5_1) {
  // value = d * q + m, d = 0.5, m = 2.
  std::vector<uint8_t> b(24);
  PutU16(b, 0, kHalf_0_5);
  PutU16(b, 2, kHalf_2);
  int q[32];
  std::vector<double> want(32);
  for (int e = 0; e < 32; ++e) {
    q[e] = Level(e + 5, 32);
    want[e] = 0.5 * q[e] + 2;
  }
  PackQ5(q, &b[4], &b[8]);
  ExpectAllEq(Dequantize(GgmlType::kQ5_1, b, 32), want);
}

TEST(DequantHand, Q8_0AndQ8_1) {
  // value = d * q, q a signed byte, d = 0.0625.
  std::vector<uint8_t> b0(34), b1(36);
  PutU16(b0, 0, kHalf_0_0625);
  PutU16(b1, 0, kHalf_0_0625);
  PutU16(b1, 2, 0x7BFF);  // s is not used by dequantization
  std::vector<double> want(32);
  for (int e = 0; e < 32; ++e) {
    const int q = e == 0 ? -128 : (e == 1 ? 127 : (Level(e, 256) - 128));
    b0[2 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
    b1[4 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
    want[e] = 0.0625 * q;
  }
  ExpectAllEq(Dequantize(GgmlType::kQ8_0, b0, 32), want);
  ExpectAllEq(Dequantize(GgmlType::kQ8_1, b1, 32), want);
}

// ---- K-quants -------------------------------------------------------------------------

// 2-bit fields of Q2_K / Q3_K: within each 128-value half (32 bytes), value 32*g + l sits in
// bits 2g..2g+1 of byte l.
void Put2Bit(uint8_t* qs, int e, int v) {
  qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(v << (2 * ((e % 128) / 32)));
}

TEST(DequantHand, Q2_K) {
  // Layout: scales[16] | qs[64] | d | dmin. value = d * sc * q - dmin * m, where sub-block
  // s = e / 16 has sc = low nibble, m = high nibble of scales[s].
  std::vector<uint8_t> b(84, 0);
  PutU16(b, 80, kHalf_0_5);
  PutU16(b, 82, kHalf_0_25);
  std::vector<double> want(256);
  for (int s = 0; s < 16; ++s) {
    const int sc = (5 * s + 1) % 16, m = (3 * s + 2) % 16;
    b[s] = static_cast<uint8_t>(sc | (m << 4));
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const int q = Level(e, 4);
      Put2Bit(&b[16], e, q);
      want[e] = 0.5 * sc * q - 0.25 * m;
    }
  }
  ExpectAllEq(Dequantize(GgmlType::kQ2_K, b, 256), want);

  // Literal: scales[12] = 0x21 (sc 1, m 2); qs byte 32 + 8 = 0x30 -> value 128 + 64 + 8 = 200
  // (sub-block 12) has q = 3: 0.5 * 1 * 3 - 0.25 * 2 = 1.
  std::vector<uint8_t> lit(84, 0);
  PutU16(lit, 80, kHalf_0_5);
  PutU16(lit, 82, kHalf_0_25);
  lit[12] = 0x21;
  lit[16 + 40] = 0x30;
  const auto y = Dequantize(GgmlType::kQ2_K, lit, 256);
  EXPECT_EQ(y[200], 1.0f);
  EXPECT_EQ(y[199], -0.5f);  // q = 0 in the same sub-block
  EXPECT_EQ(y[0], 0.0f);     // sub-block 0: sc = m = 0
}

// Q3_K scales: 16 six-bit values stored as sc + 32. Low 4 bits: sub-block j < 8 in the low
// nibble of byte j, j >= 8 in the high nibble of byte j - 8; top 2 bits: bits 2*(j/4) of byte
// 8 + j % 4.
void PackQ3Scales(const int* sc, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int u = sc[j] + 32;
    out[j % 8] |= static_cast<uint8_t>((u & 15) << (j < 8 ? 0 : 4));
    out[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
}

TEST(DequantHand, Q3_K) {
  // Layout: hmask[32] | qs[64] | scales[12] | d. value = d * sc * q, q in [-4, 3] stored as
  // q + 4: low 2 bits as Q2_K, bit 2 in hmask (value e: bit e / 32 of byte e % 32).
  std::vector<uint8_t> b(110, 0);
  PutU16(b, 108, kHalf_0_25);
  int sc[16];
  for (int j = 0; j < 16; ++j) sc[j] = (j * 13 + 7) % 64 - 32;  // covers -32..31 range
  sc[3] = -32;
  sc[9] = 31;
  PackQ3Scales(sc, &b[96]);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) {
    const int q = Level(e, 8) - 4;
    const int u = q + 4;
    if (u & 4) b[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
    Put2Bit(&b[32], e, u & 3);
    want[e] = 0.25 * sc[e / 16] * q;
  }
  ExpectAllEq(Dequantize(GgmlType::kQ3_K, b, 256), want);

  // Literal: all bytes zero except d -> every q = 0 - 4 = -4 and every sc = 0 - 32 = -32:
  // value = 0.25 * -32 * -4 = 32.
  std::vector<uint8_t> lit(110, 0);
  PutU16(lit, 108, kHalf_0_25);
  for (float v : Dequantize(GgmlType::kQ3_K, lit, 256)) EXPECT_EQ(v, 32.0f);
}

// Q4_K / Q5_K scales: 8 (scale, min) pairs of 6 bits in 12 bytes. j < 4: scale in bits 0..5
// of byte j, min in bits 0..5 of byte j + 4. j >= 4: low 4 bits of scale / min in the low /
// high nibble of byte j + 4; top 2 bits in bits 6..7 of byte j - 4 (scale) and byte j (min).
void PackK4Scales(const int* sc, const int* mn, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] |= static_cast<uint8_t>(sc[j]);
      out[j + 4] |= static_cast<uint8_t>(mn[j]);
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((mn[j] & 15) << 4));
      out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

// Nibbles of Q4_K / Q5_K: each 64-value chunk uses 32 bytes, value l of the chunk in the
// low nibble of byte l, value 32 + l in the high nibble.
void Put4Bit(uint8_t* qs, int e, int v) {
  qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(v << (4 * ((e / 32) % 2)));
}

TEST(DequantHand, Q4_K) {
  // Layout: d | dmin | scales[12] | qs[128]. value = d * sc * q - dmin * m, sub-block e / 32.
  std::vector<uint8_t> b(144, 0);
  PutU16(b, 0, kHalf_0_5);
  PutU16(b, 2, kHalf_0_125);
  const int sc[8] = {1, 63, 17, 30, 48, 45, 5, 33};
  const int mn[8] = {0, 2, 63, 40, 9, 58, 31, 16};
  PackK4Scales(sc, mn, &b[4]);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) {
    const int q = Level(e, 16);
    Put4Bit(&b[16], e, q);
    want[e] = 0.5 * sc[e / 32] * q - 0.125 * mn[e / 32];
  }
  ExpectAllEq(Dequantize(GgmlType::kQ4_K, b, 256), want);

  // Literal: sub-block 5 alone, scale 45 = 0b10'1101, min 58 = 0b11'1010. Its low bits go to
  // byte 9 = 0xAD, the scale's top bits (2) to bits 6..7 of byte 1 and the min's top bits (3)
  // to bits 6..7 of byte 5. Its values (160..191) are the high nibbles of qs[64..95]; q = 1.
  std::vector<uint8_t> lit(144, 0);
  PutU16(lit, 0, kHalf_0_5);
  PutU16(lit, 2, kHalf_0_125);
  lit[4 + 9] = 0xAD;
  lit[4 + 1] = 0x80;
  lit[4 + 5] = 0xC0;
  for (int l = 0; l < 32; ++l) lit[16 + 64 + l] = 0x10;
  const auto y = Dequantize(GgmlType::kQ4_K, lit, 256);
  for (int e = 160; e < 192; ++e) EXPECT_EQ(y[e], 0.5f * 45 - 0.125f * 58) << e;  // 15.25
  for (int e = 128; e < 160; ++e) EXPECT_EQ(y[e], 0.0f) << e;  // sub-block 4 untouched
  // Sub-blocks 1 and 5's low 6 bits of bytes 1 / 5 are still 0: scale 0, min 0.
  EXPECT_EQ(y[32], 0.0f);
}

TEST(DequantHand, Q5_K) {
  // Layout: d | dmin | scales[12] | qh[32] | qs[128]. q = nibble + 16 * (bit e / 32 of
  // qh[e % 32]); value = d * sc * q - dmin * m.
  std::vector<uint8_t> b(176, 0);
  PutU16(b, 0, kHalf_0_25);
  PutU16(b, 2, kHalf_0_0625);
  const int sc[8] = {63, 1, 22, 0, 51, 36, 19, 40};
  const int mn[8] = {5, 63, 0, 44, 21, 60, 12, 33};
  PackK4Scales(sc, mn, &b[4]);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) {
    const int q = Level(e, 32);
    Put4Bit(&b[48], e, q & 15);
    if (q & 16) b[16 + e % 32] |= static_cast<uint8_t>(1 << (e / 32));
    want[e] = 0.25 * sc[e / 32] * q - 0.0625 * mn[e / 32];
  }
  ExpectAllEq(Dequantize(GgmlType::kQ5_K, b, 256), want);
}

TEST(DequantHand, Q6_K) {
  // Layout: ql[128] | qh[64] | scales[16] (int8) | d. value = d * sc * (q - 32), q 6 bits.
  // Each 128-value half uses 64 ql and 32 qh bytes; value 32*g + l of the half: low 4 bits in
  // ql[32*(g%2) + l] (low nibble for g < 2, high for g >= 2), top 2 bits in bits 2g..2g+1
  // of qh[l].
  std::vector<uint8_t> b(210, 0);
  PutU16(b, 208, kHalf_0_125);
  int sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = (s * 37 + 11) % 256 - 128;
  sc[0] = -128;
  sc[15] = 127;
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(sc[s]));
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) {
    const int q = Level(e, 64);
    const int half = e / 128, g = (e % 128) / 32, l = e % 32;
    b[64 * half + 32 * (g % 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (g / 2)));
    b[128 + 32 * half + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
    want[e] = 0.125 * sc[e / 16] * (q - 32);
  }
  ExpectAllEq(Dequantize(GgmlType::kQ6_K, b, 256), want);
}

TEST(DequantHand, Q8_K) {
  // Layout: d (f32) | qs[256] (int8) | bsums[16] (int16, unused by dequantization).
  std::vector<uint8_t> b(292, 0);
  const float d = 0.03125f;
  std::memcpy(b.data(), &d, 4);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) {
    const int q = Level(e, 255) - 127;
    b[4 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
    want[e] = 0.03125 * q;
  }
  ExpectAllEq(Dequantize(GgmlType::kQ8_K, b, 256), want);
}

TEST(QuantsRef, SupportedTypeLists) {
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0,
                     GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                     GgmlType::kIQ4_NL, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K}) {
    EXPECT_TRUE(ref::CanDequantize(t)) << TypeTraits(t).name;
    EXPECT_TRUE(ref::CanQuantize(t)) << TypeTraits(t).name;
  }
  for (GgmlType t : {GgmlType::kI8, GgmlType::kI16, GgmlType::kI32, GgmlType::kI64,
                     GgmlType::kF64}) {
    EXPECT_FALSE(ref::CanDequantize(t)) << TypeTraits(t).name;
    EXPECT_FALSE(ref::CanQuantize(t)) << TypeTraits(t).name;
  }
}

}  // namespace
}  // namespace lifeline
