// Activation quantization: hand-computed blocks for each format, agreement of the Q8_K
// quantizer with the independent reference quantizer (ref::QuantizeRow(kQ8_K), ggml's
// quantize_row_q8_K_ref), and byte-identical output from every ISA level's quantizers.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/ref/quant_blocks.h"
#include "engine/kernels/ref/quants_ref.h"
#include "kernels/matmul_test_util.h"

namespace lifeline {
namespace {

QuantizedActs QuantizeScalar(ActFormat f, const std::vector<float>& x, int64_t n_tokens) {
  QuantizedActs a;
  const int64_t cols = static_cast<int64_t>(x.size()) / n_tokens;
  a.Reset(f, n_tokens, cols, x.data());
  for (int64_t t = 0; t < n_tokens; ++t) ref::QuantizeToken(x.data() + t * cols, a, t);
  return a;
}

TEST(QuantizeAct, FormatPerWeightType) {
  EXPECT_EQ(ActFormatFor(GgmlType::kQ4_0), ActFormat::kQ8_0);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ5_0), ActFormat::kQ8_0);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ8_0), ActFormat::kQ8_0);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ4_1), ActFormat::kQ8_1);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ5_1), ActFormat::kQ8_1);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ2_K), ActFormat::kQ8_K);
  EXPECT_EQ(ActFormatFor(GgmlType::kQ6_K), ActFormat::kQ8_K);
  EXPECT_EQ(ActFormatFor(GgmlType::kF16), ActFormat::kF16);
  EXPECT_EQ(ActFormatFor(GgmlType::kBF16), ActFormat::kBf16);
  EXPECT_EQ(ActFormatFor(GgmlType::kF32), ActFormat::kF32);
}

// amax = 127 makes d = 1 and id = 1, so q is x rounded half to even.
TEST(QuantizeAct, Q8_0RoundsHalfToEven) {
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -1.5f, 0.49f, -126.6f};
  const int8_t want[] = {127, 2, 4, -2, 0, 0, 2, -2, 0, -127};
  std::memcpy(x.data(), in, sizeof(in));
  const QuantizedActs a = QuantizeScalar(ActFormat::kQ8_0, x, 1);
  const ActRow r = a.Row(0);
  EXPECT_EQ(r.d[0], 1.0f);
  for (int j = 0; j < 10; ++j) EXPECT_EQ(r.qs[j], want[j]) << j;
  for (int j = 10; j < 32; ++j) EXPECT_EQ(r.qs[j], 0) << j;
}

// amax = 1: d = 1/127 = 2^-7 * 1.00787..., stored as f16 with 10 mantissa bits:
// 1.00787 * 1024 = 1032.06 -> 1032, so d = 1032 / 2^17 = 0.00787353515625.
TEST(QuantizeAct, Q8_0ScaleIsF16Rounded) {
  std::vector<float> x(64, 0.25f);
  x[3] = -1.0f;
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;  // second block all zero
  const QuantizedActs a = QuantizeScalar(ActFormat::kQ8_0, x, 1);
  const ActRow r = a.Row(0);
  EXPECT_EQ(r.d[0], 0.00787353515625f);
  EXPECT_EQ(r.qs[3], -127);
  EXPECT_EQ(r.qs[0], 32);  // 0.25 * 127 = 31.75 -> 32
  EXPECT_EQ(r.d[1], 0.0f);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(r.qs[j], 0);
}

// Q8_1 adds s = f16(d * sum(q)): here q = {127, 127, -64, 0...} (x = {2, 2, -1}), sum = 190,
// d = 2/127; d * sum = 2.99212... -> f16 (10 mantissa bits, step 2^-9 in [2, 4)):
// 2.99212 * 512 = 1531.97 -> 1532 / 512 = 2.9921875.
TEST(QuantizeAct, Q8_1StoresRoundedSum) {
  std::vector<float> x(32, 0.0f);
  x[0] = 2.0f;
  x[1] = 2.0f;
  x[2] = -1.0f;  // -1 * 63.5 = -63.5 -> -64 (half to even)
  const QuantizedActs a = QuantizeScalar(ActFormat::kQ8_1, x, 1);
  const ActRow r = a.Row(0);
  EXPECT_EQ(r.qs[0], 127);
  EXPECT_EQ(r.qs[2], -64);
  EXPECT_EQ(r.s[0], 2.9921875f);
  EXPECT_EQ(r.isum[0], 190);
}

// Q8_K: the largest-magnitude value is -4, so iscale = -127 / -4 = 31.75, d = 1 / 31.75.
TEST(QuantizeAct, Q8KUsesSignedMax) {
  std::vector<float> x(256, 0.0f);
  x[5] = -4.0f;
  x[6] = 1.0f;    // 31.75 -> 32
  x[17] = 0.5f;   // 15.875 -> 16
  x[255] = 4.0f;  // same magnitude as the max but later: 127
  const QuantizedActs a = QuantizeScalar(ActFormat::kQ8_K, x, 1);
  const ActRow r = a.Row(0);
  EXPECT_EQ(r.d[0], 1.0f / 31.75f);
  EXPECT_EQ(r.qs[5], -127);
  EXPECT_EQ(r.qs[6], 32);
  EXPECT_EQ(r.qs[17], 16);
  EXPECT_EQ(r.qs[255], 127);
  EXPECT_EQ(r.bsums[0], -127 + 32);
  EXPECT_EQ(r.bsums[1], 16);
  EXPECT_EQ(r.bsums[15], 127);
}

TEST(QuantizeAct, Q8KMatchesReferenceQuantizer) {
  const int64_t n = 4 * 256;
  std::vector<float> x = testing::RandomNormal(5, n, 3.0f);
  for (int j = 512; j < 768; ++j) x[j] = 0.0f;  // an all-zero block
  const QuantizedActs a = QuantizeScalar(ActFormat::kQ8_K, x, 1);
  std::vector<ref::BlockQ8K> blocks(4);
  ref::QuantizeRow(GgmlType::kQ8_K, x.data(), blocks.data(), n);
  const ActRow r = a.Row(0);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(r.d[b], blocks[b].d) << b;
    for (int j = 0; j < 256; ++j) ASSERT_EQ(r.qs[b * 256 + j], blocks[b].qs[j]) << b << " " << j;
    if (b == 2) continue;  // the reference leaves bsums of an all-zero block unwritten
    for (int j = 0; j < 16; ++j) EXPECT_EQ(r.bsums[b * 16 + j], blocks[b].bsums[j]) << b << " " << j;
  }
}

TEST(QuantizeAct, F16AndBf16Rounding) {
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16: even mantissa wins (1).
  // 1 + 3 * 2^-11 ties between 1 + 2^-10 and 1 + 2^-9: rounds up to the even 1 + 2^-9.
  const std::vector<float> x = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11)};
  const QuantizedActs h = QuantizeScalar(ActFormat::kF16, x, 1);
  EXPECT_EQ(h.Row(0).f[0], 1.0f);
  EXPECT_EQ(h.Row(0).f[1], 1.0f + std::ldexp(1.0f, -9));
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 ties -> 1 (0x3f80); 1 + 3 * 2^-8 -> 1 + 2^-6 (0x3f82).
  const std::vector<float> xb = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)};
  const QuantizedActs b = QuantizeScalar(ActFormat::kBf16, xb, 1);
  EXPECT_EQ(b.Row(0).bf[0], 0x3f80);
  EXPECT_EQ(b.Row(0).bf[1], 0x3f82);
}

// Every level's quantizers must write the same bytes as the scalar ones (the kernels' integer
// parts depend on it). Inputs include exact ties (k + 0.5 after scaling) and zero blocks.
TEST(QuantizeAct, AllLevelsProduceIdenticalBytes) {
  const int64_t n_tokens = 5, cols = 1024;
  std::vector<float> x = testing::RandomNormal(9, n_tokens * cols, 2.0f);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) + 0.5f;  // amax 15.5
  x[31] = 127.0f;  // block 0: d = 1, ties at every other value
  for (int j = 256; j < 512; ++j) x[j] = 0.0f;
  ComputePool pool(2);
  for (ActFormat f : {ActFormat::kQ8_0, ActFormat::kQ8_1, ActFormat::kQ8_K, ActFormat::kF16,
                      ActFormat::kBf16}) {
    const QuantizedActs want = QuantizeScalar(f, x, n_tokens);
    for (IsaLevel l : {IsaLevel::kAvx2, IsaLevel::kAvx512}) {
      if (l > DetectIsa()) continue;
      QuantizedActs got;
      kernels::QuantizeActs(kernels::MatmulImplFor(l), f, x.data(), n_tokens, cols, got, pool);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const ActRow a = want.Row(t), b = got.Row(t);
        const int64_t nb = want.n_blocks();
        auto same = [](const auto* p, const auto* q, int64_t n) {
          return (p == nullptr && q == nullptr) ||
                 (p && q && std::memcmp(p, q, static_cast<size_t>(n) * sizeof(*p)) == 0);
        };
        const std::string where = std::string(IsaLevelName(l)) + " format " +
                                  std::to_string(static_cast<int>(f)) + " t " + std::to_string(t);
        EXPECT_TRUE(same(a.qs, b.qs, cols)) << where;
        EXPECT_TRUE(same(a.d, b.d, nb)) << where;
        EXPECT_TRUE(same(a.s, b.s, nb)) << where;
        EXPECT_TRUE(same(a.isum, b.isum, nb)) << where;
        EXPECT_TRUE(same(a.bsums, b.bsums, nb * 16)) << where;
        EXPECT_TRUE(same(a.f, b.f, cols)) << where;
        EXPECT_TRUE(same(a.bf, b.bf, cols)) << where;
      }
    }
  }
}

}  // namespace
}  // namespace lifeline
