// Quantize -> dequantize round trips on seeded random data, with error bounds derived from
// each format (comments give the derivation), plus ordering sanity: more bits, less error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/fp16.h"
#include "engine/kernels/ggml_type.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

constexpr int64_t kN = 256 * 32;  // 32 super-blocks, 256 legacy blocks

std::vector<float> Gaussian(uint32_t seed, int64_t n, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(type, n).value() + 16, 0xA5);  // + guard bytes
  EXPECT_EQ(ref::QuantizeRow(type, x.data(), q.data(), n), RowBytes(type, n).value());
  for (size_t i = q.size() - 16; i < q.size(); ++i) EXPECT_EQ(q[i], 0xA5) << "overrun";
  std::vector<float> y(x.size());
  ref::DequantizeRow(type, q.data(), y.data(), n);
  return y;
}

// RMS of (y - x) divided by RMS of x.
double RelRmsError(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

double BlockAbsMax(const std::vector<float>& x, size_t start, size_t len) {
  double m = 0;
  for (size_t i = start; i < start + len; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
  return m;
}

// Relative RMS error bounds for N(0, 1) data. A uniform quantizer with step D has RMS error
// D / sqrt(12) ~= 0.29 D. Typical steps (sigma = 1):
//   Q8_0: amax(32 values) ~= 2.1, D = amax / 127 ~= 0.017            -> ~0.005
//   Q8_K: one scale per 256 values, amax ~= 3.3, D ~= 0.026           -> ~0.0075
//   Q5_0: D = amax / 16 ~= 0.13 -> ~0.038;  Q4_0: D = amax / 8 ~= 0.26 -> ~0.076
//   IQ4_NL: 16 levels packed near zero plus a least-squares scale: below Q4_0 (~0.07)
//   Q5_1: D = range(32) / 31 ~= 0.13 -> ~0.038; Q4_1: range / 15 ~= 0.27 -> ~0.08
//   Q6_K: 16-value groups, D ~= amax(16) / 32 ~= 0.055                 -> ~0.016
//   Q5_K / Q4_K: like Q5_1 / Q4_1 on 32 values, but 6-bit quantized sub-block scales and the
//     least-squares search trade max error for RMS                     -> ~0.035 / ~0.075
//   Q3_K: 8 levels for 16 values, D ~= amax(16) / 4 ~= 0.45           -> ~0.13 (search: less)
//   Q2_K: 4 levels, D ~= range(16) / 3 ~= 1.1                          -> ~0.32 (search: less)
//   F16 / BF16: rounding to 11 / 8 significant bits, relative RMS 2^-11/sqrt(3) / 2^-8/sqrt(3)
// Each bound leaves ~40% headroom over the estimate; a layout or scale bug lands far above.
const std::map<GgmlType, double>& RmsBounds() {
  static const std::map<GgmlType, double> kBounds = {
      {GgmlType::kF32, 0.0},       {GgmlType::kF16, 4e-4},     {GgmlType::kBF16, 3e-3},
      {GgmlType::kQ8_0, 0.008},    {GgmlType::kQ8_K, 0.011},   {GgmlType::kQ5_0, 0.055},
      {GgmlType::kQ5_1, 0.055},    {GgmlType::kQ4_0, 0.11},    {GgmlType::kQ4_1, 0.11},
      {GgmlType::kQ6_K, 0.025},    {GgmlType::kQ5_K, 0.05},    {GgmlType::kQ4_K, 0.10},
      {GgmlType::kQ3_K, 0.19},     {GgmlType::kQ2_K, 0.42},     {GgmlType::kIQ4_NL, 0.10},
  };
  return kBounds;
}

TEST(QuantRoundTrip, RelativeRmsErrorWithinFormatBound) {
  const auto x = Gaussian(1234, kN);
  for (const auto& [type, bound] : RmsBounds()) {
    const double err = RelRmsError(x, RoundTrip(type, x));
    EXPECT_LE(err, bound) << TypeTraits(type).name;
    // Lossy types must actually lose something: a quantizer that wrote the input through
    // unchanged (or wrote nothing and read stale data) would fail here or above.
    if (type != GgmlType::kF32) {
      EXPECT_GT(err, 0.0) << TypeTraits(type).name;
    }
  }
}

TEST(QuantRoundTrip, MoreBitsLessError) {
  const auto x = Gaussian(99, kN);
  std::map<GgmlType, double> err;
  for (const auto& [type, bound] : RmsBounds()) err[type] = RelRmsError(x, RoundTrip(type, x));
  const GgmlType k_chain[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                              GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_0,
                              GgmlType::kBF16, GgmlType::kF16,  GgmlType::kF32};
  for (size_t i = 0; i + 1 < std::size(k_chain); ++i) {
    EXPECT_GT(err[k_chain[i]], err[k_chain[i + 1]])
        << TypeTraits(k_chain[i]).name << " vs " << TypeTraits(k_chain[i + 1]).name;
  }
  EXPECT_GT(err[GgmlType::kQ4_0], err[GgmlType::kQ5_0]);
  EXPECT_GT(err[GgmlType::kQ4_1], err[GgmlType::kQ5_1]);
  EXPECT_GT(err[GgmlType::kQ5_0], err[GgmlType::kQ8_0]);
  EXPECT_GT(err[GgmlType::kQ5_1], err[GgmlType::kQ8_0]);
  // The K-quants spend their extra bits per super-block on finer scales: at equal level
  // counts they must not be worse than the 32-value legacy types.
  EXPECT_LT(err[GgmlType::kQ4_K], err[GgmlType::kQ4_0]);
  EXPECT_LT(err[GgmlType::kQ5_K], err[GgmlType::kQ5_0]);
  // IQ4_NL's grid is denser where Gaussian weights lie: better than Q4_0 at the same size.
  EXPECT_LT(err[GgmlType::kIQ4_NL], err[GgmlType::kQ4_0]);
}

// Q8_0: d = amax / 127 and q = round(x / d), so |q d - x| <= d / 2 before d is stored. The
// stored f16 d differs by at most 2^-11 relative, adding |q| d 2^-11 <= 127 d 2^-11 ~= 0.062 d.
TEST(QuantRoundTrip, Q8_0ErrorWithinHalfStepPerBlock) {
  const auto x = Gaussian(7, kN, 3.0f);
  const auto y = RoundTrip(GgmlType::kQ8_0, x);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const double d = BlockAbsMax(x, 32 * b, 32) / 127;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), d * (0.5 + 0.0625)) << i;
    }
  }
}

// Q8_K keeps d in f32, so the bound is d / 2 up to f32 rounding of d and of q * d.
TEST(QuantRoundTrip, Q8_KErrorWithinHalfStepPerBlock) {
  const auto x = Gaussian(8, kN, 0.01f);
  const auto y = RoundTrip(GgmlType::kQ8_K, x);
  for (size_t b = 0; b < x.size() / 256; ++b) {
    const double d = BlockAbsMax(x, 256 * b, 256) / 127;
    for (size_t i = 256 * b; i < 256 * b + 256; ++i) {
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), d * (0.5 + 1e-5)) << i;
    }
  }
}

// Q4_0 / Q5_0 map the largest-magnitude value to the most negative level exactly, so values
// round to within d / 2 except on the far side where the top level is one short (value
// +|max| would need level 8 / 16): there the error reaches one full step. Bound: d plus the
// f16 rounding of d (at most 16 d 2^-11).
TEST(QuantRoundTrip, SymmetricLegacyErrorWithinOneStep) {
  const auto x = Gaussian(11, kN);
  for (auto [type, levels] : {std::pair{GgmlType::kQ4_0, 8.0}, std::pair{GgmlType::kQ5_0, 16.0}}) {
    const auto y = RoundTrip(type, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      const double d = BlockAbsMax(x, 32 * b, 32) / levels;
      for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), d * (1 + 0.01))
            << TypeTraits(type).name << " " << i;
      }
    }
  }
}

// The extreme value of each block is represented exactly up to f16 rounding of d: Q8_0 maps
// it to +-127 d, Q4_0 to -8 d.
TEST(QuantRoundTrip, BlockExtremeIsNearlyExact) {
  const auto x = Gaussian(21, 32 * 16);
  for (auto type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0}) {
    const auto y = RoundTrip(type, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      size_t arg = 32 * b;
      for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
        if (std::fabs(x[i]) > std::fabs(x[arg])) arg = i;
      }
      EXPECT_NEAR(y[arg], x[arg], std::fabs(x[arg]) * 1e-3) << TypeTraits(type).name;
    }
  }
}

TEST(QuantRoundTrip, ZeroRowsStayZero) {
  const std::vector<float> x(kN, 0.0f);
  for (const auto& [type, bound] : RmsBounds()) {
    const auto y = RoundTrip(type, x);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 0.0f) << TypeTraits(type).name << i;
  }
}

// A constant positive block: the asymmetric types represent it through the min alone (or
// through a level times d); all types must land close and stay finite.
TEST(QuantRoundTrip, ConstantRowsAreRepresented) {
  for (float c : {0.75f, -3.0f}) {
    const std::vector<float> x(kN, c);
    for (const auto& [type, bound] : RmsBounds()) {
      const auto y = RoundTrip(type, x);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], c, std::fabs(c) * 0.02) << TypeTraits(type).name << " " << i;
      }
    }
  }
}

// Block independence: changing one block's input changes only that block's output.
TEST(QuantRoundTrip, BlocksAreIndependent) {
  for (const auto& [type, bound] : RmsBounds()) {
    const int64_t blk = TypeTraits(type).block_elems == 1 ? 32 : TypeTraits(type).block_elems;
    auto x = Gaussian(5, 4 * blk);
    const auto y0 = RoundTrip(type, x);
    for (int64_t i = blk; i < 2 * blk; ++i) x[static_cast<size_t>(i)] *= 10.0f;
    const auto y1 = RoundTrip(type, x);
    for (int64_t i = 0; i < 4 * blk; ++i) {
      if (i >= blk && i < 2 * blk) continue;
      ASSERT_EQ(y0[static_cast<size_t>(i)], y1[static_cast<size_t>(i)])
          << TypeTraits(type).name << " " << i;
    }
  }
}

// Q8_1 (activation type, not in the supported weight list): value = d q with s = d sum(q).
TEST(QuantRoundTrip, Q8_1StoresBlockSum) {
  const auto x = Gaussian(3, 64);
  std::vector<uint8_t> q(RowBytes(GgmlType::kQ8_1, 64).value());
  ref::QuantizeRow(GgmlType::kQ8_1, x.data(), q.data(), 64);
  for (int b = 0; b < 2; ++b) {
    const uint8_t* blk = q.data() + 36 * b;
    const float d = Fp16ToFp32(static_cast<uint16_t>(blk[0] | (blk[1] << 8)));
    const float s = Fp16ToFp32(static_cast<uint16_t>(blk[2] | (blk[3] << 8)));
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = static_cast<int8_t>(blk[4 + j]);
      sum += v;
      EXPECT_NEAR(v * d, x[32 * b + j], d * 0.6);
    }
    EXPECT_NEAR(s, sum * d, std::fabs(sum * d) * 2e-3 + 1e-6);
  }
}

}  // namespace
}  // namespace lifeline
