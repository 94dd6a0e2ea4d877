// The initialisation keeps activations O(1) through depth (model_plan.h). Checked with a
// one-token forward pass computed here from the file's f32 weights: with a single position,
// attention returns that position's V (softmax over one key is 1), so each block is
//   h += Wo * expand(Wv * norm(h));  h += Wdown * (silu(Wg * norm(h)) * (Wu * norm(h)))
// (norm weights are 1). Without the 1/sqrt(2 * layers) residual scaling the stream's RMS
// grows like sqrt(1 + layers * c) and the check fails at this depth.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "modelgen/make_model.h"
#include "modelgen/modelgen_test_util.h"

namespace lifeline::modelgen {
namespace {

using Vec = std::vector<float>;

// y = W x for a ggml [cols, rows] f32 tensor (row r is W[r * cols ...]).
Vec MatVec(const GgufTensorInfo& w, const Vec& x) {
  const int64_t cols = w.ne[0], rows = w.ne[1];
  const auto* p = reinterpret_cast<const float*>(w.data);
  Vec y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += double(p[r * cols + c]) * x[size_t(c)];
    y[size_t(r)] = float(s);
  }
  return y;
}

double Rms(const Vec& x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return std::sqrt(s / double(x.size()));
}

Vec RmsNorm(const Vec& x) {
  const float k = float(1.0 / std::sqrt(Rms(x) * Rms(x) + 1e-5));
  Vec y(x);
  for (auto& v : y) v *= k;
  return y;
}

TEST(InitScale, ResidualStreamAndLogitsStayOrderOne) {
  constexpr int64_t kDim = 128, kHeads = 8, kKvHeads = 2, kFfn = 352, kLayers = 24;
  MakeModelOptions o;
  o.shape = ModelShape{"llama", kDim, kLayers, kHeads, kKvHeads, kFfn, 300, 512, 0, false};
  o.ftype = FileType::kAllF32;
  o.seed = 11;
  o.threads = 2;
  o.out_path = testing::ScratchPath("depth.gguf");
  ASSERT_TRUE(MakeModel(o).ok());
  auto opened = GgufFile::Open(o.out_path);
  ASSERT_TRUE(opened.ok());
  const GgufFile& f = **opened;
  auto T = [&](const std::string& n) -> const GgufTensorInfo& { return *f.FindTensor(n); };

  const int64_t head = kDim / kHeads, group = kHeads / kKvHeads;
  const auto* emb = reinterpret_cast<const float*>(T("token_embd.weight").data);
  for (int token : {5, 77, 299}) {
    Vec h(emb + token * kDim, emb + (token + 1) * kDim);  // [dim]
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const Vec v = MatVec(T(p + "attn_v.weight"), RmsNorm(h));  // [kv_dim]
      Vec heads(static_cast<size_t>(kDim));                      // [dim]: KV head per query head
      for (int64_t i = 0; i < kDim; ++i) {
        heads[size_t(i)] = v[size_t(i / head / group * head + i % head)];
      }
      const Vec a = MatVec(T(p + "attn_output.weight"), heads);
      for (int64_t i = 0; i < kDim; ++i) h[size_t(i)] += a[size_t(i)];
      const Vec n = RmsNorm(h);
      Vec g = MatVec(T(p + "ffn_gate.weight"), n);
      const Vec u = MatVec(T(p + "ffn_up.weight"), n);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const Vec down = MatVec(T(p + "ffn_down.weight"), g);
      for (int64_t i = 0; i < kDim; ++i) h[size_t(i)] += down[size_t(i)];
      ASSERT_GT(Rms(h), 0.5) << "token " << token << " layer " << l;
      ASSERT_LT(Rms(h), 2.0) << "token " << token << " layer " << l;
    }
    // Logits ~ N(0, 1): spread enough to be non-uniform, far from a one-hot softmax.
    const double logits_rms = Rms(MatVec(T("output.weight"), RmsNorm(h)));
    EXPECT_GT(logits_rms, 0.5) << token;
    EXPECT_LT(logits_rms, 2.0) << token;
  }
  std::remove(o.out_path.c_str());
}

}  // namespace
}  // namespace lifeline::modelgen
