#include "modelgen/rng.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline::modelgen {
namespace {

// Published splitmix64 outputs for state 0 (Vigna's reference splitmix64.c).
TEST(Rng, SplitMix64KnownAnswers) {
  uint64_t s = 0;
  EXPECT_EQ(SplitMix64(&s), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64(&s), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(SplitMix64(&s), 0x06c45d188009454full);
}

TEST(Rng, FnvHashKnownAnswers) {
  EXPECT_EQ(HashName(""), 0xcbf29ce484222325ull);   // FNV-1a 64 offset basis
  EXPECT_EQ(HashName("a"), 0xaf63dc4c8601ec8cull);  // published FNV-1a 64 test vector
}

TEST(Rng, StreamsDependOnlyOnTheirSeed) {
  Xoshiro256pp a(RowSeed(7, HashName("x"), 3)), b(RowSeed(7, HashName("x"), 3));
  Xoshiro256pp c(RowSeed(7, HashName("x"), 4)), d(RowSeed(8, HashName("x"), 3));
  Xoshiro256pp e(RowSeed(7, HashName("y"), 3));
  const uint64_t va = a.Next();
  EXPECT_EQ(va, b.Next());
  EXPECT_NE(va, c.Next());
  EXPECT_NE(va, d.Next());
  EXPECT_NE(va, e.Next());
}

// 200k samples of N(0, 0.5^2): sample mean within 5 standard errors of 0, variance within 5
// standard errors (sd of the sample variance ~ sigma^2 * sqrt(2/n)), and the share inside one
// sigma close to 0.6827. A sampler with the wrong scale or a biased uniform fails these.
TEST(Rng, FillNormalHasTheRequestedDistribution) {
  constexpr int64_t kN = 200001;  // odd: exercises the single trailing sample
  constexpr double kSigma = 0.5;
  std::vector<float> x(kN);
  Xoshiro256pp rng(12345);
  FillNormal(&rng, static_cast<float>(kSigma), x.data(), kN);
  double sum = 0, sumsq = 0;
  int64_t inside = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sumsq += static_cast<double>(v) * v;
    inside += std::fabs(v) < kSigma;
  }
  const double mean = sum / kN;
  const double var = sumsq / kN - mean * mean;
  EXPECT_LT(std::fabs(mean), 5 * kSigma / std::sqrt(double(kN)));
  EXPECT_LT(std::fabs(var - kSigma * kSigma), 5 * kSigma * kSigma * std::sqrt(2.0 / kN));
  EXPECT_NEAR(double(inside) / kN, 0.682689, 5 * std::sqrt(0.6827 * 0.3173 / kN));
}

}  // namespace
}  // namespace lifeline::modelgen
