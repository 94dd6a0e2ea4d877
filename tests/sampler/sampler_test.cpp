#include "engine/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Test-side logits generator, independent of the sampler's RNG.
std::vector<float> RandomLogits(int n, uint32_t seed, float scale = 4.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = (static_cast<float>(x >> 8) / static_cast<float>(1u << 24) - 0.5f) * 2.0f * scale;
  }
  return v;
}

// Parameters with every filter off, so each test enables only what it checks.
SamplerParams Plain(float temperature, uint64_t seed = 42) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.seed = seed;
  return p;
}

// Softmax at temperature t, computed here in double.
std::vector<double> Softmax(const std::vector<float>& logits, double t = 1.0) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float l : logits) mx = std::max(mx, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((logits[i] - mx) / t);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  return p;
}

// Draws n samples from a fresh copy of `logits` each time; returns id -> count.
std::map<int32_t, int> Histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    ++h[s.Sample(row.data(), static_cast<int32_t>(row.size()))];
  }
  return h;
}

// Pearson chi-square of observed counts against expected probabilities.
double ChiSquare(const std::map<int32_t, int>& h, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const auto it = h.find(static_cast<int32_t>(i));
    const double obs = it == h.end() ? 0.0 : it->second;
    const double exp = p[i] * n;
    chi += (obs - exp) * (obs - exp) / exp;
  }
  return chi;
}

TEST(Sampler, GreedyIsArgmax) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::vector<float> logits = RandomLogits(1000, seed);
    const int32_t want = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    Sampler s(Plain(0.0f));
    EXPECT_EQ(s.Sample(logits.data(), 1000), want) << "seed " << seed;
  }
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  std::vector<float> logits = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  Sampler s(Plain(0.0f));
  EXPECT_EQ(s.Sample(logits.data(), 5), 1);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::vector<float> a = RandomLogits(500, seed);
    a[static_cast<size_t>(seed * 7)] = a[static_cast<size_t>(seed * 11)] = 100.0f;  // a tie at the top
    std::vector<float> b = a;
    SamplerParams p = Plain(1.3f, seed);
    p.top_k = 1;
    Sampler k1(p);
    Sampler greedy(Plain(0.0f));
    EXPECT_EQ(k1.Sample(a.data(), 500), greedy.Sample(b.data(), 500)) << "seed " << seed;
    EXPECT_EQ(greedy.Sample(b.data(), 500), static_cast<int32_t>(seed * 7));
  }
}

TEST(Sampler, SameSeedSameSequence) {
  SamplerParams p = Plain(1.0f, 1234);
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.01f;
  p.repeat_penalty = 1.1f;
  Sampler a(p), b(p);
  for (int step = 0; step < 300; ++step) {
    std::vector<float> la = RandomLogits(2000, static_cast<uint32_t>(step), 2.0f);
    std::vector<float> lb = la;
    const int32_t ta = a.Sample(la.data(), 2000);
    const int32_t tb = b.Sample(lb.data(), 2000);
    ASSERT_EQ(ta, tb) << "step " << step;
    a.Accept(ta);
    b.Accept(tb);
  }
}

TEST(Sampler, DifferentSeedsDiverge) {
  const std::vector<float> flat(50, 0.0f);  // uniform: every draw is decided by the RNG
  Sampler a(Plain(1.0f, 1)), b(Plain(1.0f, 2));
  int same = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<float> la = flat, lb = flat;
    same += a.Sample(la.data(), 50) == b.Sample(lb.data(), 50);
  }
  // Independent streams agree with probability 1/50 per draw (~8 of 400).
  EXPECT_LT(same, 40);
}

TEST(Sampler, RandomSeedIsReportedAndReproducible) {
  Sampler a(Plain(1.0f, kSamplerRandomSeed));
  Sampler b(Plain(1.0f, kSamplerRandomSeed));
  EXPECT_NE(a.seed(), kSamplerRandomSeed);
  EXPECT_NE(a.seed(), b.seed());
  Sampler replay(Plain(1.0f, a.seed()));
  const std::vector<float> flat(64, 0.0f);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l1 = flat, l2 = flat;
    ASSERT_EQ(a.Sample(l1.data(), 64), replay.Sample(l2.data(), 64));
  }
}

TEST(Sampler, TopKNeverLeavesTheKHighest) {
  const std::vector<float> logits = RandomLogits(300, 7, 1.0f);  // flat-ish: tail has real mass
  std::vector<int32_t> order(300);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return logits[x] > logits[y]; });
  const std::set<int32_t> top10(order.begin(), order.begin() + 10);

  SamplerParams p = Plain(2.0f);
  p.top_k = 10;
  Sampler s(p);
  const auto h = Histogram(s, logits, 5000);
  for (const auto& [id, count] : h) EXPECT_TRUE(top10.count(id)) << "sampled id " << id;
  EXPECT_EQ(h.size(), 10u);  // with T=2 over a flat top, every one of the 10 shows up
}

// The nucleus computed here: sort by probability, take the shortest prefix with mass >= p.
std::set<int32_t> Nucleus(const std::vector<float>& logits, double top_p) {
  const std::vector<double> prob = Softmax(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return prob[x] > prob[y]; });
  std::set<int32_t> keep;
  double cum = 0;
  for (int32_t id : order) {
    keep.insert(id);
    cum += prob[id];
    if (cum >= top_p) break;
  }
  return keep;
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.05, 0.4, 0.1, 0.3, 0.15 (ids shuffled): p=0.8 needs 0.4+0.3+0.15 = 0.85.
  const std::vector<float> logits = {std::log(0.05f), std::log(0.4f), std::log(0.1f),
                                     std::log(0.3f), std::log(0.15f)};
  const std::set<int32_t> want = Nucleus(logits, 0.8);
  ASSERT_EQ(want, (std::set<int32_t>{1, 3, 4}));
  SamplerParams p = Plain(1.0f);
  p.top_p = 0.8f;
  Sampler s(p);
  const auto h = Histogram(s, logits, 6000);
  std::set<int32_t> seen;
  for (const auto& [id, count] : h) seen.insert(id);
  EXPECT_EQ(seen, want);
  // Survivors keep their relative weights: 0.4/0.85 of the draws for id 1 (loose band).
  EXPECT_NEAR(h.at(1) / 6000.0, 0.4 / 0.85, 0.03);
}

TEST(Sampler, TopPOnLargeVocabWithoutTopK) {
  // 150K vocab, 1000 "hot" tokens: the nucleus spans hundreds of tokens, so the sampler must
  // grow its partially sorted prefix several times.
  const int n = 150000;
  std::vector<float> logits(n, -10.0f);
  const std::vector<float> hot = RandomLogits(1000, 99, 1.0f);
  for (int i = 0; i < 1000; ++i) logits[static_cast<size_t>(i) * 149] = hot[i];
  const std::set<int32_t> want = Nucleus(logits, 0.9);
  ASSERT_GT(want.size(), 500u);
  SamplerParams p = Plain(1.0f);
  p.top_p = 0.9f;
  Sampler s(p);
  const auto h = Histogram(s, logits, 600);
  for (const auto& [id, count] : h) ASSERT_TRUE(want.count(id)) << "sampled id " << id;
  EXPECT_GT(h.size(), 300u);
}

TEST(Sampler, TopPMidSizeVocabGrowsItsSortedPrefix) {
  // 4000 candidates (the fully sorting path) with a nucleus of thousands of tokens.
  const std::vector<float> logits = RandomLogits(4000, 5, 1.0f);
  const std::set<int32_t> want = Nucleus(logits, 0.9);
  ASSERT_GT(want.size(), 1024u);
  SamplerParams p = Plain(1.0f);
  p.top_p = 0.9f;
  Sampler s(p);
  const auto h = Histogram(s, logits, 1500);
  for (const auto& [id, count] : h) ASSERT_TRUE(want.count(id)) << "sampled id " << id;
  EXPECT_GT(h.size(), 600u);
}

TEST(Sampler, TopPBreaksTiesTowardLowerIds) {
  // 10000 equal logits: each token has mass 1e-4, so p = 0.50055 needs 5006 tokens, and ties
  // are resolved toward lower ids, i.e. the nucleus is exactly ids 0..5005.
  const std::vector<float> logits(10000, 0.25f);
  SamplerParams p = Plain(1.0f);
  p.top_p = 0.50055f;
  Sampler s(p);
  const auto h = Histogram(s, logits, 800);
  EXPECT_LE(h.rbegin()->first, 5005);
  EXPECT_GE(h.rbegin()->first, 4900);  // the upper part of the nucleus is reached
}

TEST(Sampler, TopPZeroKeepsOnlyTheTopToken) {
  std::vector<float> logits = RandomLogits(100, 3);
  const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  SamplerParams p = Plain(1.0f);
  p.top_p = 0.0f;
  Sampler s(p);
  const auto h = Histogram(s, logits, 200);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h.begin()->first, best);
}

TEST(Sampler, MinPDropsTokensBelowTheThreshold) {
  // p = 0.5, 0.2, 0.1, 0.09, 0.05, 0.06; min_p 0.19 -> threshold 0.095 keeps ids 0, 1, 2.
  const std::vector<double> prob = {0.5, 0.2, 0.1, 0.09, 0.05, 0.06};
  std::vector<float> logits;
  for (double q : prob) logits.push_back(static_cast<float>(std::log(q)));
  const double min_p = 0.19;
  std::set<int32_t> want;
  for (size_t i = 0; i < prob.size(); ++i) {
    if (prob[i] >= min_p * 0.5) want.insert(static_cast<int32_t>(i));
  }
  ASSERT_EQ(want, (std::set<int32_t>{0, 1, 2}));
  SamplerParams p = Plain(1.0f);
  p.min_p = static_cast<float>(min_p);
  Sampler s(p);
  const auto h = Histogram(s, logits, 5000);
  std::set<int32_t> seen;
  for (const auto& [id, count] : h) seen.insert(id);
  EXPECT_EQ(seen, want);
}

TEST(Sampler, TemperatureShapesTheEmpiricalDistribution) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f};
  const int n = 20000;
  for (double t : {0.5, 1.0, 2.0}) {
    Sampler s(Plain(static_cast<float>(t), 77));
    const auto h = Histogram(s, logits, n);
    // 4 degrees of freedom: P(chi2 > 30) < 1e-5, so a correct sampler essentially never fails.
    EXPECT_LT(ChiSquare(h, Softmax(logits, t), n), 30.0) << "T=" << t;
    if (t == 2.0) {
      // The check has teeth: the T=2 draws are far from the T=0.5 distribution.
      EXPECT_GT(ChiSquare(h, Softmax(logits, 0.5), n), 1000.0);
    }
  }
}

TEST(Sampler, PenaltiesFollowTheFormula) {
  SamplerParams p = Plain(0.0f);
  p.repeat_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.repeat_last_n = 64;
  Sampler s(p);
  for (int32_t id : {3, 3, 4, 2, 1000 /* outside this vocab: ignored */}) s.Accept(id);
  std::vector<float> logits = {2.0f, -1.0f, 3.0f, 1.5f, -0.5f, 0.8f};
  s.Sample(logits.data(), 6);
  // By hand: positive logits are divided by 1.5, negative multiplied, then
  // count*0.5 + 0.25 is subtracted.
  EXPECT_FLOAT_EQ(logits[0], 2.0f);                       // not in history
  EXPECT_FLOAT_EQ(logits[1], -1.0f);                      // not in history
  EXPECT_FLOAT_EQ(logits[2], 3.0f / 1.5f - 0.75f);        // count 1 -> 1.25
  EXPECT_FLOAT_EQ(logits[3], 1.5f / 1.5f - 1.25f);        // count 2 -> -0.25
  EXPECT_FLOAT_EQ(logits[4], -0.5f * 1.5f - 0.75f);       // count 1 -> -1.5
  EXPECT_FLOAT_EQ(logits[5], 0.8f);
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  SamplerParams p = Plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.repeat_last_n = 2;
  Sampler s(p);
  for (int32_t id : {0, 1, 1, 2}) s.Accept(id);  // window now holds {1, 2}
  std::vector<float> logits = {4.0f, 4.0f, 4.0f, 4.0f};
  s.Sample(logits.data(), 4);
  EXPECT_FLOAT_EQ(logits[0], 4.0f);  // evicted
  EXPECT_FLOAT_EQ(logits[1], 4.0f / 2.0f - 1.0f);  // one copy left in the window
  EXPECT_FLOAT_EQ(logits[2], 4.0f / 2.0f - 1.0f);
  EXPECT_FLOAT_EQ(logits[3], 4.0f);

  s.ResetHistory();
  std::vector<float> fresh = {4.0f, 4.0f, 4.0f, 4.0f};
  s.Sample(fresh.data(), 4);
  EXPECT_EQ(fresh, (std::vector<float>{4.0f, 4.0f, 4.0f, 4.0f}));
}

TEST(Sampler, PenaltiesChangeTheGreedyChoice) {
  SamplerParams p = Plain(0.0f);
  p.presence_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> logits = {1.0f, 2.5f, 1.5f};
  EXPECT_EQ(s.Sample(logits.data(), 3), 1);
  s.Accept(1);
  logits = {1.0f, 2.5f, 1.5f};
  EXPECT_EQ(s.Sample(logits.data(), 3), 2);  // 2.5 - 2 = 0.5 < 1.5
}

TEST(Sampler, NaNIsNeverSampled) {
  std::vector<float> base = {kNaN, 1.0f, kNaN, 0.5f, kNaN};
  Sampler greedy(Plain(0.0f));
  std::vector<float> g = base;
  EXPECT_EQ(greedy.Sample(g.data(), 5), 1);
  EXPECT_FALSE(greedy.last_sample_degenerate());

  SamplerParams p = Plain(1.0f);
  p.top_k = 4;
  p.top_p = 0.99f;
  Sampler s(p);
  const auto h = Histogram(s, base, 2000);
  for (const auto& [id, count] : h) EXPECT_TRUE(id == 1 || id == 3) << "sampled id " << id;
  EXPECT_EQ(h.size(), 2u);
}

TEST(Sampler, PositiveInfinityTokensShareTheMass) {
  std::vector<float> base = {0.0f, kInf, 3.0f, kInf, kNaN};
  Sampler s(Plain(0.7f));
  const auto h = Histogram(s, base, 2000);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_NEAR(h.at(1) / 2000.0, 0.5, 0.05);
  EXPECT_NEAR(h.at(3) / 2000.0, 0.5, 0.05);
}

TEST(Sampler, AllUnusableLogitsFallBackToZero) {
  for (float bad : {kNaN, -kInf}) {
    for (float t : {0.0f, 1.0f}) {
      std::vector<float> logits(10, bad);
      SamplerParams p = Plain(t);
      p.top_k = 3;
      Sampler s(p);
      EXPECT_EQ(s.Sample(logits.data(), 10), 0);
      EXPECT_TRUE(s.last_sample_degenerate());
      std::vector<float> ok = {0.0f, 9.0f};
      EXPECT_EQ(Sampler(Plain(0.0f)).Sample(ok.data(), 2), 1);
    }
  }
}

TEST(Sampler, LargeVocabWithTopKStaysFast) {
  // 150K vocab with the default chain; 300 tokens must finish well within a test budget
  // (a full sort per token would still pass here, but the selection path is exercised).
  SamplerParams p;  // defaults: T 0.8, top_k 40, top_p 0.95, min_p 0.05
  p.seed = 5;
  Sampler s(p);
  const std::vector<float> base = RandomLogits(150000, 11);
  std::vector<int32_t> order(base.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                    [&](int32_t a, int32_t b) { return base[a] > base[b]; });
  const std::set<int32_t> top40(order.begin(), order.begin() + 40);
  for (int i = 0; i < 300; ++i) {
    std::vector<float> row = base;
    const int32_t id = s.Sample(row.data(), 150000);
    ASSERT_TRUE(top40.count(id));
  }
}

TEST(SamplerRng, UniformAndDeterministic) {
  SamplerRng a(9), b(9), c(10);
  int buckets[16] = {};
  bool differs = false;
  for (int i = 0; i < 32000; ++i) {
    const double u = a.Uniform01();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, b.Uniform01());
    differs |= c.Uniform01() != u;
    ++buckets[static_cast<int>(u * 16)];
  }
  EXPECT_TRUE(differs);
  double chi = 0;
  for (int k : buckets) chi += (k - 2000.0) * (k - 2000.0) / 2000.0;
  EXPECT_LT(chi, 50.0);  // 15 dof: P(chi2 > 50) ~ 1e-5
}

TEST(SamplerParamsValidation, DefaultsAreValid) {
  EXPECT_TRUE(ValidateSamplerParams(SamplerParams{}).ok());
}

TEST(SamplerParamsValidation, MessagesNameFieldValueAndRange) {
  struct Case {
    SamplerParams p;
    const char* field;
    const char* value;
    const char* range;
  };
  std::vector<Case> cases;
  auto add = [&](auto mutate, const char* field, const char* value, const char* range) {
    SamplerParams p;
    mutate(p);
    cases.push_back({p, field, value, range});
  };
  add([](SamplerParams& p) { p.temperature = -1.0f; }, "temperature", "-1", "[0, 100]");
  add([](SamplerParams& p) { p.temperature = kNaN; }, "temperature", "nan", "[0, 100]");
  add([](SamplerParams& p) { p.top_p = 1.5f; }, "top_p", "1.5", "[0, 1]");
  add([](SamplerParams& p) { p.min_p = -0.1f; }, "min_p", "-0.1", "[0, 1]");
  add([](SamplerParams& p) { p.repeat_penalty = 0.0f; }, "repeat_penalty", "0", "(0, 100]");
  add([](SamplerParams& p) { p.presence_penalty = 3.0f; }, "presence_penalty", "3", "[-2, 2]");
  add([](SamplerParams& p) { p.frequency_penalty = -2.5f; }, "frequency_penalty", "-2.5", "[-2, 2]");
  add([](SamplerParams& p) { p.repeat_last_n = -1; }, "repeat_last_n", "-1", "[0, 65536]");
  add([](SamplerParams& p) { p.repeat_last_n = 70000; }, "repeat_last_n", "70000", "[0, 65536]");
  for (const Case& c : cases) {
    const Status st = ValidateSamplerParams(c.p);
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.value), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.range), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace lifeline
