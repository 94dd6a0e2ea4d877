// The mixture-of-experts feed-forward step of LlamaModel (qwen2moe, qwen3moe, Mixtral): the
// router, the top-k choice per token and the experts run grouped by expert.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/model/llama_model.h"
#include "engine/model/norm_hook.h"

namespace lifeline {

// Mixture of experts, grouped by expert: the router picks each token's experts, the tokens
// routed to one expert go through it as one batch (one product per matrix per active expert:
// a decode step reads only its k experts' rows), and each result is added to its token's
// residual row scaled by the token's weight for that expert.
void LlamaModel::NormAndMixExperts(const LlamaLayerWeights& w, int64_t n, LlamaContext& ctx,
                                   ComputePool& pool) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  const int64_t k = c.n_expert_used;
  // xb = RMSNorm(x) (the router product's prologue), router logits = xb . Wgate_inp.
  const NormHook norm{s.x.data(), w.ffn_norm.data(), c.n_embd, c.rms_eps, s.xb.data()};
  MatmulGroup router;
  router.n = 1;
  router.w[0] = w.ffn_gate_inp;
  router.y[0] = s.router.data();  // [n, n_expert]
  router.prologue = &NormHook::Run;
  router.prologue_ctx = &norm;
  RunMatmulGroup(*kernels_, router, s.xb.data(), n, pool);
  RouteTokens(n, ctx);  // s.moe_expert / s.moe_weight: [n, k]

  // Counting sort of the (token, slot) pairs by expert.
  std::vector<int32_t>& off = s.moe_offsets;  // [n_expert + 1]
  std::fill(off.begin(), off.end(), 0);
  for (int64_t i = 0; i < n * k; ++i) ++off[static_cast<size_t>(s.moe_expert[i]) + 1];
  for (size_t e = 1; e < off.size(); ++e) off[e] += off[e - 1];
  std::vector<int32_t>& order = s.moe_order;  // [n * k] pair indices, grouped by expert
  s.moe_fill.assign(off.begin(), off.end() - 1);
  for (int64_t i = 0; i < n * k; ++i) {
    order[static_cast<size_t>(s.moe_fill[static_cast<size_t>(s.moe_expert[i])]++)] =
        static_cast<int32_t>(i);
  }

  const int64_t ld = c.n_embd + kRowPadFloats;
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const int32_t b = off[static_cast<size_t>(e)], m = off[static_cast<size_t>(e) + 1] - b;
    if (m == 0) continue;
    // The expert's tokens, gathered (one token in decode: its row of xb as it is).
    const float* in = s.xb.data();
    if (m != n) {
      for (int32_t j = 0; j < m; ++j) {
        const int64_t t = order[static_cast<size_t>(b + j)] / k;
        std::memcpy(s.moe_in.data() + j * c.n_embd, s.xb.data() + t * c.n_embd,
                    static_cast<size_t>(c.n_embd) * sizeof(float));
      }
      in = s.moe_in.data();
    }
    const FfnWeights& ex = w.experts[static_cast<size_t>(e)];
    GateUp(ex, c.n_ff_exp, in, m, nullptr, ctx, pool);
    Project(ex.w_down, s.gate.data(), m, s.proj.data(), ld, pool);
    for (int32_t j = 0; j < m; ++j) {
      const int32_t pair = order[static_cast<size_t>(b + j)];
      const float weight = s.moe_weight[static_cast<size_t>(pair)];
      float* x = s.x.data() + (pair / k) * c.n_embd;
      const float* y = s.proj.data() + j * ld;
      for (int64_t i = 0; i < c.n_embd; ++i) x[i] += weight * y[i];
    }
  }
  if (c.n_ff_shexp == 0) return;
  // qwen2moe's shared expert, for every token, scaled by sigmoid(gate_inp_shexp . xb).
  GateUp(w.shexp, c.n_ff_shexp, s.xb.data(), n, nullptr, ctx, pool);
  Project(w.shexp.w_down, s.gate.data(), n, s.proj.data(), ld, pool);
  for (int64_t t = 0; t < n; ++t) {
    const float* xb = s.xb.data() + t * c.n_embd;
    double dot = 0;
    for (int64_t i = 0; i < c.n_embd; ++i) dot += static_cast<double>(w.ffn_gate_inp_shexp[i]) * xb[i];
    const float g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
    float* x = s.x.data() + t * c.n_embd;
    const float* y = s.proj.data() + t * ld;
    for (int64_t i = 0; i < c.n_embd; ++i) x[i] += g * y[i];
  }
}

// Per token: probabilities = gating(router logits); the n_expert_used most probable experts
// (ties to the lower id) with their probabilities as weights, renormalised to sum 1 and
// scaled as the family says (ModelConfig).
void LlamaModel::RouteTokens(int64_t n, LlamaContext& ctx) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  const int64_t ne = c.n_expert, k = c.n_expert_used;
  std::vector<float>& p = s.moe_probs;  // [n_expert]
  std::vector<int32_t>& ids = s.moe_ids;  // [n_expert]
  for (int64_t t = 0; t < n; ++t) {
    const float* logit = s.router.data() + t * ne;
    if (c.expert_gating == ExpertGating::kSoftmax) {
      float mx = logit[0];
      for (int64_t e = 1; e < ne; ++e) mx = std::max(mx, logit[e]);
      float sum = 0;
      for (int64_t e = 0; e < ne; ++e) sum += (p[static_cast<size_t>(e)] = std::exp(logit[e] - mx));
      for (int64_t e = 0; e < ne; ++e) p[static_cast<size_t>(e)] /= sum;
    } else {
      for (int64_t e = 0; e < ne; ++e) p[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-logit[e]));
    }
    std::iota(ids.begin(), ids.end(), 0);
    // The k + 1 most probable in order: the first unchosen one gives the routing margin.
    std::partial_sort(ids.begin(), ids.begin() + std::min(k + 1, ne), ids.end(),
                      [&](int32_t a, int32_t b) {
      const float pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    if (k < ne) {
      const float gap = logit[ids[static_cast<size_t>(k - 1)]] - logit[ids[static_cast<size_t>(k)]];
      float& margin = s.moe_route_margin[static_cast<size_t>(t)];
      margin = std::min(margin, gap);
    }
    float total = 0;
    for (int64_t j = 0; j < k; ++j) total += p[static_cast<size_t>(ids[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[static_cast<size_t>(j)];
      float weight = p[static_cast<size_t>(e)];
      if (c.expert_norm_topk) weight /= std::max(total, 6.103515625e-5f);  // llama.cpp's clamp
      if (c.expert_weights_scale != 0.0f && c.expert_weights_scale != 1.0f) {
        weight *= c.expert_weights_scale;
      }
      s.moe_expert[static_cast<size_t>(t * k + j)] = e;
      s.moe_weight[static_cast<size_t>(t * k + j)] = weight;
    }
  }
}

}  // namespace lifeline
