// Q8_0 KV cache: storage round trip against the quantization bound, per-head scales, sizes,
// flag spelling, and a whole forward pass on stories260K within a stated tolerance of the
// F16 cache, on every kernel level the CPU supports.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/model/kv_storage.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"
#include "test_paths.h"

namespace lifeline {
namespace {

// Q8_0 with an f16 scale: |x - dequant(x)| <= d / 2 + 127 * |d - f16(d)| <= d * (0.5 + 127 *
// 2^-11) for d = amax / 127 of the 32-value block.
constexpr double kQ8StepFraction = 0.5 + 127.0 / 2048.0;
// stories260K logits with a Q8_0 cache vs an F16 cache, over a 40-token prompt: max
// |difference| as a fraction of the F16 row's logit range (max - min). Measured 1-2 % on
// this model; the top-1 token must agree wherever F16's top-1 margin exceeds twice that.
constexpr double kQ8VsF16RangeFraction = 0.04;

TEST(KvQ8, RoundTripWithinQuantizationStepPerHead) {
  // 3 heads of 40 values (one full and one partial block each); head 1 is 1000x larger, so a
  // scale shared across heads would wipe out heads 0 and 2.
  const int64_t n_head = 3, hd = 40;
  KvStorageShape shape{1, 2, n_head * hd, n_head * hd, KvType::kQ8_0, n_head};
  auto kv = KvStorage::Create(shape, 1 << 20);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ((*kv)->k_head_bytes(), 68);
  EXPECT_EQ((*kv)->k_row_bytes(), 3u * 68u);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_head * hd)), y(x.size());
  for (int64_t i = 0; i < n_head * hd; ++i) x[i] = nd(rng) * (i / hd == 1 ? 1000.0f : 1.0f);
  (*kv)->StoreK(0, 1, 3, x.data());
  (*kv)->LoadK(0, 1, 3, y.data());
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t b = 0; b * 32 < hd; ++b) {
      const int64_t lo = h * hd + b * 32, hi = h * hd + std::min<int64_t>(hd, b * 32 + 32);
      double amax = 0;
      for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(double(x[i])));
      for (int64_t i = lo; i < hi; ++i) {
        EXPECT_LE(std::fabs(double(x[i]) - y[i]), kQ8StepFraction * amax / 127.0 + 1e-30)
            << "head " << h << " value " << i;
      }
    }
  }
  // Zero rows stay exactly zero (scale 0, no division by zero).
  std::vector<float> z(x.size(), 0.0f);
  (*kv)->StoreV(0, 0, 0, z.data());
  (*kv)->LoadV(0, 0, 0, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(KvQ8, SizesAndNames) {
  EXPECT_EQ(KvHeadBytes(KvType::kF16, 64), 128);
  EXPECT_EQ(KvHeadBytes(KvType::kF32, 64), 256);
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 64), 68);
  EXPECT_EQ(KvHeadBytes(KvType::kQ8_0, 8), 34);
  // 2 layers x 16 positions x 4 heads x (K 64 + V 64 values).
  EXPECT_EQ(KvBlockBytes(KvType::kF16, 2, 4, 64, 64), 2u * 16u * 4u * 256u);
  EXPECT_EQ(KvBlockBytes(KvType::kQ8_0, 2, 4, 64, 64), 2u * 16u * 4u * 136u);
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kQ8_0}) {
    EXPECT_EQ(ParseKvType(KvTypeName(t)), t);
  }
  EXPECT_FALSE(ParseKvType("q4_0").has_value());
  EXPECT_FALSE(ParseKvType("F16").has_value());
  // Rows that do not split into the stated heads are refused with the field named.
  KvStorageShape bad{1, 1, 10, 10, KvType::kQ8_0, 3};
  auto kv = KvStorage::Create(bad, 1 << 20);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("n_head_kv"), std::string::npos);
}

std::vector<float> Prefill(const LlamaModel& m, const std::vector<int32_t>& tokens, KvType type,
                           ComputePool& pool) {
  ContextOptions opts;
  opts.kv_type = type;
  auto ctx = LlamaContext::Create(m.config(), opts);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (!ctx.ok()) return {};
  const SeqId seq = (*ctx)->NewSequence();
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.push_back({tokens[i], static_cast<int64_t>(i), seq, true});
  }
  std::vector<float> logits(tokens.size() * static_cast<size_t>(m.config().n_vocab));
  const Status st = m.Eval(batch, **ctx, pool, logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return logits;
}

TEST(KvQ8, Stories260KForwardCloseToF16Cache) {
  const std::vector<int32_t> tokens = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376,
                                       298, 315, 421, 395, 317, 426, 338, 401, 396, 267,
                                       337, 385, 410, 317, 274, 368, 301, 261, 376, 298,
                                       403, 407, 261, 378, 432, 383, 286, 315, 421, 395};
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (level > DetectIsa()) continue;
    SCOPED_TRACE(std::string(IsaLevelName(level)));
    auto f = GgufFile::Open(testing::SharedPath("models/stories260K.gguf"));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto m = LlamaModel::Load(std::move(*f), KernelsFor(level));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ComputePool pool(2);
    const std::vector<float> f16 = Prefill(**m, tokens, KvType::kF16, pool);
    const std::vector<float> q8 = Prefill(**m, tokens, KvType::kQ8_0, pool);
    ASSERT_EQ(f16.size(), q8.size());
    const int64_t n_vocab = (*m)->config().n_vocab;
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const float* a = f16.data() + t * n_vocab;
      const float* b = q8.data() + t * n_vocab;
      const auto [mn, mx] = std::minmax_element(a, a + n_vocab);
      const double range = *mx - *mn;
      double err = 0;
      for (int64_t i = 0; i < n_vocab; ++i) err = std::max(err, std::fabs(double(a[i]) - b[i]));
      worst = std::max(worst, err / range);
      EXPECT_LE(err, kQ8VsF16RangeFraction * range) << "position " << t;
      // Top-1 agrees where F16's margin is clear of the error bound.
      std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
      for (int64_t i = 0; i < n_vocab; ++i) ids[i] = static_cast<int32_t>(i);
      std::partial_sort(ids.begin(), ids.begin() + 2, ids.end(),
                        [&](int32_t x, int32_t y) { return a[x] > a[y]; });
      if (a[ids[0]] - a[ids[1]] > 2 * kQ8VsF16RangeFraction * range) {
        EXPECT_EQ(std::max_element(b, b + n_vocab) - b, ids[0]) << "position " << t;
      }
    }
    std::printf("[kv-q8] %s: max |q8 - f16| logit = %.2f %% of the row's range (bound %.0f %%)\n",
                std::string(IsaLevelName(level)).c_str(), 100 * worst,
                100 * kQ8VsF16RangeFraction);
  }
}

}  // namespace
}  // namespace lifeline
