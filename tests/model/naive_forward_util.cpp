// A second, deliberately simple transformer implementation used as an independent oracle:
// whole matrices dequantized up front, f64 sums, full causal softmax per query, no cache,
// no batching, no paging. Written from the Llama / Qwen2 papers' equations.
#include <cmath>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/kernels/ref/quants_ref.h"
#include "model/model_test_util.h"

namespace lifeline {
namespace {

using Vec = std::vector<double>;

struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;  // [rows, cols]
  Vec Apply(const Vec& x) const {
    Vec y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[r * cols + c]) * x[c];
      y[r] = s;
    }
    return y;
  }
};

Mat LoadMat(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  LL_CHECK(t != nullptr);
  Mat m;
  m.cols = t->ne[0];
  m.rows = t->ne[1];
  m.w.resize(static_cast<size_t>(m.rows * m.cols));
  const uint64_t row_bytes = *RowBytes(t->type, m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    ref::DequantizeRow(t->type, t->data + r * row_bytes, m.w.data() + r * m.cols, m.cols);
  }
  return m;
}

Vec LoadVec(const GgufFile& f, const std::string& name) {
  const Mat m = LoadMat(f, name);
  return Vec(m.w.begin(), m.w.end());
}

Vec RmsNorm(const Vec& x, const Vec& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

void Rope(Vec& v, int64_t n_heads, int64_t hd, int64_t pos, const TinyModelSpec& s) {
  const int64_t half = hd / 2;
  const double scale = s.rope_scaling_factor != 0.0f ? 1.0 / s.rope_scaling_factor : 1.0;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      double theta = pos * scale * std::pow(static_cast<double>(s.rope_freq_base), -2.0 * i / hd);
      if (!s.rope_freqs.empty()) theta /= s.rope_freqs[i];
      // llama rotates interleaved pairs, qwen2 (NeoX style) the two halves of the head.
      const bool neox = s.arch == "qwen2";
      const int64_t a = h * hd + (neox ? i : 2 * i);
      const int64_t b = neox ? a + half : a + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

}  // namespace

std::vector<float> NaiveForward(const GgufFile& f, const TinyModelSpec& s,
                                const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t hd = s.n_embd / s.n_head;
  const Mat emb = LoadMat(f, "token_embd.weight");
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    x[t].assign(emb.w.begin() + tokens[t] * s.n_embd, emb.w.begin() + (tokens[t] + 1) * s.n_embd);
  }
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const Mat wq = LoadMat(f, p + "attn_q.weight"), wk = LoadMat(f, p + "attn_k.weight"),
              wv = LoadMat(f, p + "attn_v.weight"), wo = LoadMat(f, p + "attn_output.weight");
    const Mat wg = LoadMat(f, p + "ffn_gate.weight"), wu = LoadMat(f, p + "ffn_up.weight"),
              wd = LoadMat(f, p + "ffn_down.weight");
    const Vec an = LoadVec(f, p + "attn_norm.weight"), fn = LoadVec(f, p + "ffn_norm.weight");
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec xn = RmsNorm(x[t], an);
      q[t] = wq.Apply(xn);
      k[t] = wk.Apply(xn);
      v[t] = wv.Apply(xn);
      if (s.with_qkv_bias) {
        const Vec bq = LoadVec(f, p + "attn_q.bias"), bk = LoadVec(f, p + "attn_k.bias"),
                  bv = LoadVec(f, p + "attn_v.bias");
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[i];
        for (size_t i = 0; i < v[t].size(); ++i) v[t][i] += bv[i];
      }
      Rope(q[t], s.n_head, hd, t, s);
      Rope(k[t], s.n_head_kv, hd, t, s);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(s.n_head * hd), 0.0);
      for (int64_t h = 0; h < s.n_head; ++h) {
        const int64_t g = h / (s.n_head / s.n_head_kv);  // shared KV head
        Vec sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += q[t][h * hd + e] * k[j][g * hd + e];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double den = 0;
        for (double& e : sc) den += (e = std::exp(e - mx));
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t e = 0; e < hd; ++e) att[h * hd + e] += sc[j] / den * v[j][g * hd + e];
        }
      }
      const Vec o = wo.Apply(att);
      for (int64_t i = 0; i < s.n_embd; ++i) x[t][i] += o[i];
      const Vec xn = RmsNorm(x[t], fn);
      const Vec gate = wg.Apply(xn), up = wu.Apply(xn);
      Vec hbuf(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) hbuf[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const Vec d = wd.Apply(hbuf);
      for (int64_t i = 0; i < s.n_embd; ++i) x[t][i] += d[i];
    }
  }
  const Vec on = LoadVec(f, "output_norm.weight");
  const Mat out = LoadMat(f, s.tied_output ? "token_embd.weight" : "output.weight");
  std::vector<float> logits;
  for (int64_t t = 0; t < T; ++t) {
    const Vec y = out.Apply(RmsNorm(x[t], on));
    for (double e : y) logits.push_back(static_cast<float>(e));
  }
  return logits;
}

}  // namespace lifeline
