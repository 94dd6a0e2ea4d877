// The portable RNG against an independent implementation (values computed separately from the
// published xoshiro256** and splitmix64 algorithms), length distributions, arrival schedules
// (mean gap and variance from the gamma law) and the list parsers.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "bench/loadgen/distributions.h"

namespace lifeline::loadgen {
namespace {

TEST(Rng, MatchesReferenceXoshiro256StarStar) {
  // Reference values from a separate Python transcription of splitmix64 seeding + xoshiro256**.
  Rng a(0);
  EXPECT_EQ(a.Next(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(a.Next(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(a.Next(), 0x1a5f849d4933e6e0ULL);
  Rng b(42);
  EXPECT_EQ(b.Next(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(b.Next(), 0x6104d9866d113a7eULL);
}

TEST(Rng, UniformIntCoversTheClosedRange) {
  Rng r(7);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = r.UniformInt(10, 20);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 20);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 11u);
}

TEST(LengthDist, ParseAndSample) {
  auto fixed = ParseLengthDist("--prompt-len", "32");
  ASSERT_TRUE(fixed.ok());
  Rng r(1);
  EXPECT_EQ(fixed->Sample(r), 32);
  EXPECT_EQ(fixed->ToString(), "fixed:32");

  auto uni = ParseLengthDist("--prompt-len", "uniform:5:8");
  ASSERT_TRUE(uni.ok());
  std::set<int64_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(uni->Sample(r));
  EXPECT_EQ(seen, (std::set<int64_t>{5, 6, 7, 8}));

  auto norm = ParseLengthDist("--output-len", "normal:100:10");
  ASSERT_TRUE(norm.ok());
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(norm->Sample(r));
  // Standard error of the mean: 10 / sqrt(20000) = 0.07; rounding adds no bias.
  EXPECT_NEAR(sum / n, 100.0, 0.5);

  auto tiny = ParseLengthDist("--output-len", "normal:1:50");  // clamped at 1
  ASSERT_TRUE(tiny.ok());
  for (int i = 0; i < 200; ++i) EXPECT_GE(tiny->Sample(r), 1);
}

TEST(LengthDist, ErrorsNameTheFlagAndValue) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto d = ParseLengthDist("--prompt-len", text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find("--prompt-len"), std::string::npos);
    EXPECT_NE(d.status().message().find(needle), std::string::npos) << d.status().message();
  };
  expect_error("uniform:20:10", "high 10 must be in [low 20");
  expect_error("normal:5", "takes 2 number");
  expect_error("zipf:3", "expected N");
  expect_error("0", "outside [1, 1000000]");
  expect_error("1.5", "integers");
  expect_error("abc", "'abc' is not a number");
  expect_error("normal:10:-1", "stddev -1");
}

TEST(Arrivals, SameSeedSameScheduleAndCaps) {
  ArrivalSpec s;
  s.rate_rps = 10;
  s.max_requests = 50;
  const auto a = ArrivalTimes(s, 123);
  const auto b = ArrivalTimes(s, 123);
  const auto c = ArrivalTimes(s, 124);
  ASSERT_EQ(a.size(), 50u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.front(), 0.0);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);

  ArrivalSpec d;
  d.rate_rps = 100;
  d.duration_s = 2;
  const auto t = ArrivalTimes(d, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_LT(t.back(), 2.0);
  // About rate * duration = 200 arrivals; Poisson sd = sqrt(200) = 14.
  EXPECT_NEAR(static_cast<double>(t.size()), 200.0, 5 * 14.2);

  ArrivalSpec none;  // neither cap set: nothing planned
  EXPECT_TRUE(ArrivalTimes(none, 1).empty());
}

struct GapStats {
  double mean = 0;
  double cv2 = 0;  // variance / mean^2
};

GapStats Gaps(double rate, double burstiness, int n) {
  ArrivalSpec s;
  s.rate_rps = rate;
  s.burstiness = burstiness;
  s.max_requests = n + 1;
  const auto t = ArrivalTimes(s, 99);
  double sum = 0, sum2 = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    const double g = t[i] - t[i - 1];
    sum += g;
    sum2 += g * g;
  }
  GapStats out;
  out.mean = sum / n;
  out.cv2 = (sum2 / n - out.mean * out.mean) / (out.mean * out.mean);
  return out;
}

TEST(Arrivals, PoissonAndGammaMoments) {
  const int n = 40000;
  // Poisson at 4 req/s: mean gap 0.25 s, CV^2 = 1. Standard error of the mean gap:
  // 0.25 / sqrt(40000) = 0.00125.
  const GapStats p = Gaps(4, 1, n);
  EXPECT_NEAR(p.mean, 0.25, 5 * 0.00125);
  EXPECT_NEAR(p.cv2, 1.0, 0.1);
  // Gamma with shape 0.25 (bursty): same mean, CV^2 = 1 / 0.25 = 4. SE of the mean gap:
  // 0.25 * 2 / sqrt(40000) = 0.0025.
  const GapStats g = Gaps(4, 0.25, n);
  EXPECT_NEAR(g.mean, 0.25, 5 * 0.0025);
  EXPECT_NEAR(g.cv2, 4.0, 0.8);
  // Shape 4 (regular): CV^2 = 0.25.
  const GapStats r = Gaps(4, 4, n);
  EXPECT_NEAR(r.mean, 0.25, 5 * 0.25 * 0.5 / 200);
  EXPECT_NEAR(r.cv2, 0.25, 0.05);
}

TEST(LoadList, ParsesSortsAndRejects) {
  auto v = ParseLoadList("--sweep", "4,1,2,2");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<double>{1, 2, 4}));
  EXPECT_FALSE(ParseLoadList("--sweep", "1,0").ok());
  EXPECT_FALSE(ParseLoadList("--sweep", "1,,2").ok());
  auto bad = ParseLoadList("--sweep", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--sweep"), std::string::npos);
}

}  // namespace
}  // namespace lifeline::loadgen
