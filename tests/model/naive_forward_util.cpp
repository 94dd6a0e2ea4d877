// A second, deliberately simple transformer implementation used as an independent oracle:
// whole matrices dequantized up front, f64 sums, full causal softmax per query, no cache,
// no batching, no paging. Written from the Llama / Qwen2 / Qwen3 / Gemma 1-3 / Phi-3 papers'
// and reference implementations' equations (Gemma's norm weights as GGUF stores them: the
// converter already added HF's +1, so x * w here too).
#include <algorithm>
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
  m.rows = t->ne[1] * t->ne[2] * t->ne[3];  // a 3-D expert tensor: all experts' rows
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

// RMSNorm of each hd-wide head of v, in place.
void HeadNorm(Vec& v, int64_t hd, const Vec& w) {
  for (size_t h = 0; h * hd < v.size(); ++h) {
    const Vec head(v.begin() + h * hd, v.begin() + (h + 1) * hd);
    const Vec normed = RmsNorm(head, w);
    std::copy(normed.begin(), normed.end(), v.begin() + h * hd);
  }
}

// Rows [r0, r0 + n) of m.
Mat Rows(const Mat& m, int64_t r0, int64_t n) {
  Mat out;
  out.rows = n;
  out.cols = m.cols;
  out.w.assign(m.w.begin() + r0 * m.cols, m.w.begin() + (r0 + n) * m.cols);
  return out;
}

// What the spec's family does (written from the families' papers / reference code, not from
// the engine's switch table).
struct Family {
  bool neox = false;        // rotate (i, i + rope_dim/2) instead of (2i, 2i + 1)
  bool qk_norm = false;     // Qwen3, Gemma 3
  bool post_norms = false;  // Gemma 2 / 3
  bool gemma = false;       // sqrt(d) embedding scale, tanh-GELU, tied classifier
  int64_t swa_period = 0;   // Gemma 2: every other layer starting at 0; Gemma 3: 5 of 6
};

Family FamilyOf(const TinyModelSpec& s) {
  Family f;
  f.neox = s.arch != "llama";
  f.qk_norm = s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "gemma3";
  f.post_norms = s.arch == "gemma2" || s.arch == "gemma3";
  f.gemma = s.arch.rfind("gemma", 0) == 0;
  if (s.arch == "gemma2") f.swa_period = s.swa_pattern > 0 ? s.swa_pattern : 2;
  if (s.arch == "gemma3") f.swa_period = s.swa_pattern > 0 ? s.swa_pattern : 6;
  return f;
}

struct RopeSpec {
  double base = 10000, pos_scale = 1, attn_factor = 1;
  int64_t dim = 0;
  std::vector<float> factors;
};

void Rope(Vec& v, int64_t n_heads, int64_t hd, int64_t pos, const RopeSpec& r, bool neox) {
  const int64_t half = r.dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      double theta = pos * r.pos_scale * std::pow(r.base, -2.0 * i / r.dim);
      if (!r.factors.empty()) theta /= r.factors[i];
      // llama rotates interleaved pairs, the NeoX layout the two halves of the rotated dims.
      const int64_t a = h * hd + (neox ? i : 2 * i);
      const int64_t b = neox ? a + half : a + 1;
      const double x0 = v[a], x1 = v[b];
      const double c = std::cos(theta) * r.attn_factor, sn = std::sin(theta) * r.attn_factor;
      v[a] = x0 * c - x1 * sn;
      v[b] = x0 * sn + x1 * c;
    }
  }
}

double GeluTanh(double z) {
  return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
}

// A SwiGLU FFN: down(silu(gate x) * up x).
Vec SwiGluFfn(const Mat& g, const Mat& u, const Mat& d, const Vec& x) {
  const Vec a = g.Apply(x), b = u.Apply(x);
  Vec h(a.size());
  for (size_t i = 0; i < a.size(); ++i) h[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];
  return d.Apply(h);
}

// Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): softmax over the router's logits, the
// n_expert_used most probable experts weighted by their probabilities (renormalised to sum 1
// for Mixtral and Qwen3-MoE, as their reference code does), plus Qwen2-MoE's shared expert
// scaled by sigmoid(w . x).
Vec MixtureOfExperts(const GgufFile& f, const TinyModelSpec& s, const std::string& p,
                     const Vec& x) {
  const int64_t ff = s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff;
  const Vec logits = LoadMat(f, p + "ffn_gate_inp.weight").Apply(x);
  double mx = -1e300;
  for (double v : logits) mx = std::max(mx, v);
  Vec prob(logits.size());
  double sum = 0;
  for (size_t e = 0; e < logits.size(); ++e) sum += (prob[e] = std::exp(logits[e] - mx));
  for (double& v : prob) v /= sum;
  std::vector<int64_t> order(prob.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int64_t>(e);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
  order.resize(static_cast<size_t>(s.n_expert_used));
  double chosen = 0;
  for (int64_t e : order) chosen += prob[e];
  const bool renormalise = s.arch != "qwen2moe";
  Mat gate_all, up_all;
  if (s.merged_gate_up_exps) {
    const Mat gu = LoadMat(f, p + "ffn_gate_up_exps.weight");  // per expert: gate rows, up rows
    gate_all.cols = up_all.cols = gu.cols;
    for (int64_t e = 0; e < s.n_expert; ++e) {
      const Mat g = Rows(gu, 2 * ff * e, ff), u = Rows(gu, 2 * ff * e + ff, ff);
      gate_all.w.insert(gate_all.w.end(), g.w.begin(), g.w.end());
      up_all.w.insert(up_all.w.end(), u.w.begin(), u.w.end());
    }
    gate_all.rows = up_all.rows = ff * s.n_expert;
  } else {
    gate_all = LoadMat(f, p + "ffn_gate_exps.weight");  // [n_expert * ff rows]
    up_all = LoadMat(f, p + "ffn_up_exps.weight");
  }
  const Mat down_all = LoadMat(f, p + "ffn_down_exps.weight");  // [n_expert * n_embd rows]
  Vec out(static_cast<size_t>(s.n_embd), 0.0);
  for (int64_t e : order) {
    const Vec y = SwiGluFfn(Rows(gate_all, ff * e, ff), Rows(up_all, ff * e, ff),
                           Rows(down_all, s.n_embd * e, s.n_embd), x);
    const double weight = renormalise ? prob[e] / chosen : prob[e];
    for (int64_t i = 0; i < s.n_embd; ++i) out[i] += weight * y[i];
  }
  if (s.n_ff_shexp > 0) {
    const Vec y = SwiGluFfn(LoadMat(f, p + "ffn_gate_shexp.weight"),
                           LoadMat(f, p + "ffn_up_shexp.weight"),
                           LoadMat(f, p + "ffn_down_shexp.weight"), x);
    const Vec wg = LoadVec(f, p + "ffn_gate_inp_shexp.weight");
    double dot = 0;
    for (int64_t i = 0; i < s.n_embd; ++i) dot += wg[i] * x[i];
    const double g = 1.0 / (1.0 + std::exp(-dot));
    for (int64_t i = 0; i < s.n_embd; ++i) out[i] += g * y[i];
  }
  return out;
}

}  // namespace

std::vector<float> NaiveForward(const GgufFile& f, const TinyModelSpec& s,
                                const std::vector<int32_t>& tokens, int64_t n_ctx) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const Family fam = FamilyOf(s);
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * hd, kv_dim = s.n_head_kv * hd;
  if (n_ctx == 0) n_ctx = std::min<int64_t>(s.context_length, 4096);
  RopeSpec rope;
  rope.dim = s.rope_dim > 0 ? s.rope_dim : hd;
  rope.base = s.rope_freq_base;
  rope.pos_scale = s.rope_scaling_factor != 0.0f ? 1.0 / s.rope_scaling_factor : 1.0;
  rope.attn_factor = s.rope_attn_factor > 0 ? s.rope_attn_factor : 1.0;
  rope.factors = s.rope_freqs;
  if (rope.factors.empty() && !s.rope_factors_long.empty()) {
    // LongRoPE: the long factors once the context exceeds the original training context.
    const int64_t orig = s.rope_orig_ctx > 0 ? s.rope_orig_ctx : s.context_length;
    rope.factors = n_ctx > orig ? s.rope_factors_long : s.rope_factors_short;
  }
  RopeSpec rope_swa = rope;  // Gemma 3's local layers: their own base, no position scaling
  if (s.arch == "gemma3") {
    rope_swa.base = s.rope_freq_base_swa > 0 ? s.rope_freq_base_swa : 10000.0;
    rope_swa.pos_scale = 1.0;
  } else if (s.rope_freq_base_swa > 0) {
    rope_swa.base = s.rope_freq_base_swa;
  }
  const double window = static_cast<double>(
      fam.swa_period > 0 ? (s.sliding_window > 0 ? s.sliding_window
                                                 : (s.arch == "gemma2" ? 4096 : 0))
                         : 0);
  const double attn_cap = s.arch == "gemma2" ? (s.attn_softcap > 0 ? s.attn_softcap : 50.0) : 0;
  const double final_cap =
      s.arch == "gemma2" ? (s.final_softcap > 0 ? s.final_softcap : 30.0) : s.final_softcap;

  const Mat emb = LoadMat(f, "token_embd.weight");
  std::vector<Vec> x(static_cast<size_t>(T));
  const double embd_scale = fam.gemma ? std::sqrt(static_cast<double>(s.n_embd)) : 1.0;
  for (int64_t t = 0; t < T; ++t) {
    x[t].assign(emb.w.begin() + tokens[t] * s.n_embd, emb.w.begin() + (tokens[t] + 1) * s.n_embd);
    for (double& e : x[t]) e *= embd_scale;
  }
  for (int64_t il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Mat wq, wk, wv, wg, wu;
    if (s.fused_qkv) {
      const Mat qkv = LoadMat(f, p + "attn_qkv.weight");
      wq = Rows(qkv, 0, q_dim);
      wk = Rows(qkv, q_dim, kv_dim);
      wv = Rows(qkv, q_dim + kv_dim, kv_dim);
    } else {
      wq = LoadMat(f, p + "attn_q.weight");
      wk = LoadMat(f, p + "attn_k.weight");
      wv = LoadMat(f, p + "attn_v.weight");
    }
    if (s.n_expert > 0) {
      // experts: loaded below, per token
    } else if (s.fused_gate_up) {
      const Mat gu = LoadMat(f, p + "ffn_up.weight");
      wg = Rows(gu, 0, s.n_ff);
      wu = Rows(gu, s.n_ff, s.n_ff);
    } else {
      wg = LoadMat(f, p + "ffn_gate.weight");
      wu = LoadMat(f, p + "ffn_up.weight");
    }
    const Mat wo = LoadMat(f, p + "attn_output.weight");
    const Mat wd = s.n_expert > 0 ? Mat{} : LoadMat(f, p + "ffn_down.weight");
    const Vec an = LoadVec(f, p + "attn_norm.weight"), fn = LoadVec(f, p + "ffn_norm.weight");
    const bool local = fam.swa_period > 0 && window > 0 &&
                       il % fam.swa_period < fam.swa_period - 1;
    const RopeSpec& r = local ? rope_swa : rope;
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
      if (fam.qk_norm) {
        HeadNorm(q[t], hd, LoadVec(f, p + "attn_q_norm.weight"));
        HeadNorm(k[t], hd, LoadVec(f, p + "attn_k_norm.weight"));
      }
      Rope(q[t], s.n_head, hd, t, r, fam.neox);
      Rope(k[t], s.n_head_kv, hd, t, r, fam.neox);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(s.n_head * hd), 0.0);
      const int64_t first = local ? std::max<int64_t>(0, t - static_cast<int64_t>(window) + 1) : 0;
      for (int64_t h = 0; h < s.n_head; ++h) {
        const int64_t g = h / (s.n_head / s.n_head_kv);  // shared KV head
        Vec sc(static_cast<size_t>(t + 1), -1e300);
        double mx = -1e300;
        for (int64_t j = first; j <= t; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += q[t][h * hd + e] * k[j][g * hd + e];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          if (attn_cap > 0) sc[j] = attn_cap * std::tanh(sc[j] / attn_cap);
          mx = std::max(mx, sc[j]);
        }
        double den = 0;
        for (int64_t j = first; j <= t; ++j) den += (sc[j] = std::exp(sc[j] - mx));
        for (int64_t j = first; j <= t; ++j) {
          for (int64_t e = 0; e < hd; ++e) att[h * hd + e] += sc[j] / den * v[j][g * hd + e];
        }
      }
      Vec o = wo.Apply(att);
      if (fam.post_norms) o = RmsNorm(o, LoadVec(f, p + "post_attention_norm.weight"));
      for (int64_t i = 0; i < s.n_embd; ++i) x[t][i] += o[i];
      const Vec xn = RmsNorm(x[t], fn);
      if (s.n_expert > 0) {
        const Vec moe = MixtureOfExperts(f, s, p, xn);
        for (int64_t i = 0; i < s.n_embd; ++i) x[t][i] += moe[i];
        continue;
      }
      const Vec gate = wg.Apply(xn), up = wu.Apply(xn);
      Vec hbuf(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        const double act = fam.gemma ? GeluTanh(gate[i]) : gate[i] / (1.0 + std::exp(-gate[i]));
        hbuf[i] = act * up[i];
      }
      Vec d = wd.Apply(hbuf);
      if (fam.post_norms) d = RmsNorm(d, LoadVec(f, p + "post_ffw_norm.weight"));
      for (int64_t i = 0; i < s.n_embd; ++i) x[t][i] += d[i];
    }
  }
  const Vec on = LoadVec(f, "output_norm.weight");
  const bool tied = s.tied_output || s.arch == "gemma" || s.arch == "gemma2";
  const Mat out = LoadMat(f, tied ? "token_embd.weight" : "output.weight");
  std::vector<float> logits;
  for (int64_t t = 0; t < T; ++t) {
    const Vec y = out.Apply(RmsNorm(x[t], on));
    for (double e : y) {
      logits.push_back(static_cast<float>(final_cap > 0 ? final_cap * std::tanh(e / final_cap) : e));
    }
  }
  return logits;
}

}  // namespace lifeline
