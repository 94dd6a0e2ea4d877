// The gated units (glu.h) at every ISA level give the scalar twin's bits: random values of
// every magnitude the exp's clamps and overflow treat differently, NaN, +-inf and +-0, and
// every length up to three vectors plus a tail. (The twin itself is checked against a double
// precision SiLU / GELU in tests/model/ops_test.cpp.)
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/dispatch.h"
#include "engine/kernels/glu.h"

namespace lifeline {
namespace {

std::vector<float> Inputs(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> small(-6.0f, 6.0f);
  std::uniform_real_distribution<float> large(-200.0f, 200.0f);
  const float specials[] = {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 88.5f, -88.5f, 1e30f,
                            -1e30f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t pick = rng() % 8;
    v[i] = pick == 0 ? specials[rng() % std::size(specials)] : pick < 3 ? large(rng) : small(rng);
  }
  return v;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

void ExpectSameBits(void (*want_fn)(float*, const float*, int64_t),
                    void (*got_fn)(float*, const float*, int64_t), const char* what) {
  for (int64_t n = 0; n <= 3 * 16 + 7; ++n) {
    const std::vector<float> gate = Inputs(static_cast<uint32_t>(n) * 7 + 1, n);
    const std::vector<float> up = Inputs(static_cast<uint32_t>(n) * 7 + 2, n);
    std::vector<float> want = gate, got = gate;
    want_fn(want.data(), up.data(), n);
    got_fn(got.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const bool both_nan = std::isnan(want[i]) && std::isnan(got[i]);
      ASSERT_TRUE(both_nan || Bits(want[i]) == Bits(got[i]))
          << what << " n=" << n << " i=" << i << " gate=" << gate[i] << " up=" << up[i]
          << ": want " << want[i] << " got " << got[i];
    }
  }
}

TEST(GluParity, EveryIsaLevelGivesTheScalarTwinsBits) {
  const KernelTable& scalar = ReferenceKernels();
  ASSERT_NE(scalar.silu_glu, nullptr);
  ASSERT_NE(scalar.gelu_glu, nullptr);
  int levels = 0;
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    const KernelTable& t = KernelsFor(level);
    if (t.isa != level) continue;  // the CPU lacks it
    ++levels;
    SCOPED_TRACE(std::string(IsaLevelName(level)));
    ASSERT_NE(t.silu_glu, nullptr);
    ASSERT_NE(t.gelu_glu, nullptr);
    ExpectSameBits(scalar.silu_glu, t.silu_glu, "silu");
    ExpectSameBits(scalar.gelu_glu, t.gelu_glu, "gelu");
  }
  EXPECT_GE(levels, 1);
}

// The SIMD bodies are really different code from the twin: a long row goes through them.
TEST(GluParity, LongRowsMatchElementByElement) {
  const std::vector<float> gate = Inputs(99, 5632), up = Inputs(100, 5632);
  std::vector<float> want = gate;
  ref::SiluGlu(want.data(), up.data(), 5632);
  const KernelTable& best = BestKernels();
  std::vector<float> got = gate;
  best.silu_glu(got.data(), up.data(), 5632);
  for (int64_t i = 0; i < 5632; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(Bits(want[i]), Bits(got[i])) << i;
    }
  }
}

}  // namespace
}  // namespace lifeline
