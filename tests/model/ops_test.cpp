#include "engine/model/ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/fp16.h"
#include "engine/model/attention.h"
#include "engine/model/kv_storage.h"

namespace lifeline {
namespace {

TEST(Ops, RmsNormByHand) {
  const float x[4] = {1, 2, 3, 4};
  const float w[4] = {1, 1, 1, 2};
  float out[4];
  ops::RmsNorm(x, w, 4, 0.0f, out);
  // mean(x^2) = 30 / 4 = 7.5, 1/sqrt(7.5) = 0.3651484
  EXPECT_NEAR(out[0], 0.3651484f, 1e-6f);
  EXPECT_NEAR(out[1], 0.7302967f, 1e-6f);
  EXPECT_NEAR(out[2], 1.0954451f, 1e-6f);
  EXPECT_NEAR(out[3], 2.9211870f, 1e-6f);
  // eps enters under the root: x = [0, 0] stays finite.
  const float z[2] = {0, 0};
  ops::RmsNorm(z, w, 2, 1e-5f, out);
  EXPECT_EQ(out[0], 0.0f);
}

// A long row (2051: the eight-way partial sums and the tail) against the formula in long
// double, one sum: within ~3 f32 ulps (the f32 scale and two f32 products round).
TEST(Ops, RmsNormLongRowMatchesLongDouble) {
  const int64_t n = 2051;
  std::vector<float> x(n), w(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::sin(0.37 * i) * (1 + i % 7));
    w[i] = static_cast<float>(0.5 + (i % 5) * 0.25);
  }
  ops::RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
  long double sumsq = 0;
  for (int64_t i = 0; i < n; ++i) sumsq += static_cast<long double>(x[i]) * x[i];
  const long double scale = 1.0L / std::sqrt(sumsq / n + 1e-5L);
  for (int64_t i = 0; i < n; ++i) {
    const double want = static_cast<double>(x[i] * scale * w[i]);
    EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-30) << "i=" << i;
  }
}

ops::RopeParams Params(int64_t rope_dim, RopeLayout layout) {
  ops::RopeParams p;
  p.rope_dim = rope_dim;
  p.freq_base = 10000.0f;
  p.layout = layout;
  return p;
}

void Rotate(float* x, int64_t pos, const ops::RopeParams& p, int64_t head_dim, int64_t n_heads) {
  std::vector<float> c(static_cast<size_t>(p.rope_dim / 2)), s(c.size());
  ops::RopeAngles(pos, p, c.data(), s.data());
  ops::ApplyRope(x, n_heads, head_dim, p, c.data(), s.data());
}

TEST(Ops, RopeNormalLayoutRotatesAdjacentPairs) {
  // head_dim 4: theta_0 = pos, theta_1 = pos * 10000^(-1/2) = pos / 100.
  float x[4] = {1, 0, 1, 0};
  Rotate(x, 1, Params(4, RopeLayout::kNormal), 4, 1);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
}

TEST(Ops, RopeNeoxLayoutRotatesHalves) {
  float x[4] = {1, 0, 0, 0};
  Rotate(x, 1, Params(4, RopeLayout::kNeox), 4, 1);
  // Pair (0, 2) by theta_0 = 1; dims 1 and 3 (pair (1, 3)) stay 0.
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
}

TEST(Ops, RopePositionZeroIsIdentityAndRotationPreservesNorm) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(2 * 8), y;
  for (float& v : x) v = u(rng);
  y = x;
  Rotate(y.data(), 0, Params(8, RopeLayout::kNormal), 8, 2);
  EXPECT_EQ(x, y);
  Rotate(y.data(), 1234, Params(8, RopeLayout::kNormal), 8, 2);
  for (int h = 0; h < 2; ++h) {
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 8; ++i) {
      n0 += x[h * 8 + i] * x[h * 8 + i];
      n1 += y[h * 8 + i] * y[h * 8 + i];
    }
    EXPECT_NEAR(n0, n1, 1e-5);
  }
}

TEST(Ops, RopePartialDimsLeaveTheRestAlone) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Rotate(x, 7, Params(4, RopeLayout::kNormal), 8, 1);
  EXPECT_EQ(x[4], 5.0f);
  EXPECT_EQ(x[7], 8.0f);
  EXPECT_NE(x[0], 1.0f);
}

TEST(Ops, RopeLinearScalingAndFreqFactors) {
  ops::RopeParams p = Params(4, RopeLayout::kNormal);
  p.freq_scale = 0.5f;  // linear scaling factor 2: position 6 behaves like position 3
  float c[2], s[2], c3[2], s3[2];
  ops::RopeAngles(6, p, c, s);
  ops::RopeAngles(3, Params(4, RopeLayout::kNormal), c3, s3);
  EXPECT_NEAR(c[0], c3[0], 1e-6);
  EXPECT_NEAR(s[1], s3[1], 1e-6);
  const float factors[2] = {1.0f, 4.0f};
  ops::RopeParams q = Params(4, RopeLayout::kNormal);
  q.freq_factors = factors;  // theta_1 = pos / 100 / 4
  ops::RopeAngles(8, q, c, s);
  EXPECT_NEAR(s[1], std::sin(8.0 / 100.0 / 4.0), 1e-6);
  EXPECT_NEAR(s[0], std::sin(8.0), 1e-6);
}

TEST(Ops, SwiGluByHand) {
  float g[3] = {0.0f, 1.0f, -2.0f};
  const float up[3] = {5.0f, 2.0f, 1.0f};
  ops::SwiGlu(g, up, 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(g[2], -2.0 / (1.0 + std::exp(2.0)), 1e-6);
}

// SwiGLU's exp is computed inline (vectorizable); against silu in f64 over the whole useful
// range and the clamp regions, relative error below 1e-6 (f32 rounding is 6e-8; the
// polynomial's own error ~2e-7), exact limits far out, NaN kept.
TEST(Ops, SwiGluMatchesF64Silu) {
  std::vector<float> g, up;
  for (int i = -200000; i <= 200000; ++i) g.push_back(static_cast<float>(i) * 1e-3f);  // [-200, 200]
  for (float v : {-1e30f, -1000.0f, -88.5f, -87.5f, 87.5f, 88.5f, 1000.0f, 1e30f, 1e-30f, -1e-30f}) {
    g.push_back(v);
  }
  up.assign(g.size(), 1.0f);
  std::vector<float> got = g;
  ops::SwiGlu(got.data(), up.data(), static_cast<int64_t>(got.size()));
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    const double z = g[i];
    const double want = z / (1.0 + std::exp(-z));
    const double tol = 1e-6 * std::fabs(want) + 1e-30;
    if (!(std::fabs(got[i] - want) <= tol)) {
      ++bad;
      ADD_FAILURE() << "silu(" << g[i] << "): got " << got[i] << " want " << want;
    }
  }
  // The 4-wide body and the scalar tail compute the same bits: each value alone (tail only)
  // against the same value inside the long run (vector body for all but the last few).
  int differ = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    float alone = g[i];
    const float one_up = 1.0f;
    ops::SwiGlu(&alone, &one_up, 1);
    if (std::memcmp(&alone, &got[i], sizeof(float)) != 0 && differ++ < 5) {
      ADD_FAILURE() << "silu(" << g[i] << "): vector " << got[i] << " scalar " << alone;
    }
  }
  float nan_gate = std::numeric_limits<float>::quiet_NaN();
  const float one = 1.0f;
  ops::SwiGlu(&nan_gate, &one, 1);
  EXPECT_TRUE(std::isnan(nan_gate));
}

// Online-softmax attention over a scattered block table vs a plain two-pass softmax.
void CheckAttention(KvType type) {
  const int64_t n_kv_heads = 2, n_group = 2, hdk = 3, hdv = 5, n_kv = 37;
  KvStorageShape shape{1, 4, n_kv_heads * hdk, n_kv_heads * hdv, type, n_kv_heads};
  auto kv = KvStorage::Create(shape, 1 << 20);
  ASSERT_TRUE(kv.ok());
  const int32_t blocks[3] = {2, 0, 3};  // positions 0-15 in block 2, 16-31 in 0, 32-36 in 3
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> K(n_kv * shape.k_row_elems), V(n_kv * shape.v_row_elems);
  for (float& v : K) v = nd(rng);
  for (float& v : V) v = nd(rng);
  for (int64_t p = 0; p < n_kv; ++p) {
    const int32_t b = blocks[p / 16];
    (*kv)->StoreK(0, b, p % 16, &K[p * shape.k_row_elems]);
    (*kv)->StoreV(0, b, p % 16, &V[p * shape.v_row_elems]);
  }
  auto stored = [&](float v) { return type == KvType::kF16 ? Fp16ToFp32(Fp32ToFp16(v)) : v; };
  std::vector<float> q(n_group * hdk);
  for (float& v : q) v = nd(rng);
  AttentionShape as{n_group, hdk, hdv, 1.0f / std::sqrt(3.0f)};
  AttentionScratch scratch;
  scratch.Resize(as);
  for (int64_t g = 0; g < n_kv_heads; ++g) {
    std::vector<float> out(n_group * hdv);
    AttendKvGroup(**kv, 0, blocks, n_kv, g, q.data(), out.data(), as, scratch);
    for (int64_t j = 0; j < n_group; ++j) {
      std::vector<double> sc(n_kv);
      double mx = -1e300, den = 0;
      for (int64_t p = 0; p < n_kv; ++p) {
        double d = 0;
        for (int64_t e = 0; e < hdk; ++e) d += q[j * hdk + e] * stored(K[p * shape.k_row_elems + g * hdk + e]);
        sc[p] = d / std::sqrt(3.0);
        mx = std::max(mx, sc[p]);
      }
      for (double& s : sc) den += (s = std::exp(s - mx));
      for (int64_t e = 0; e < hdv; ++e) {
        double want = 0;
        for (int64_t p = 0; p < n_kv; ++p) want += sc[p] / den * stored(V[p * shape.v_row_elems + g * hdv + e]);
        EXPECT_NEAR(out[j * hdv + e], want, 1e-5) << "kv head " << g << " q " << j << " dim " << e;
      }
    }
  }
}

TEST(Attention, OnlineSoftmaxOverBlocksMatchesTwoPassF32) { CheckAttention(KvType::kF32); }
TEST(Attention, OnlineSoftmaxOverBlocksMatchesTwoPassF16) { CheckAttention(KvType::kF16); }

}  // namespace
}  // namespace lifeline
