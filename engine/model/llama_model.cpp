#include "engine/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/check.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/op_profile.h"
#include "engine/kernels/ref/quants_ref.h"
#include "engine/model/attention.h"
#include "engine/model/norm_hook.h"
#include "engine/model/ops.h"

namespace lifeline {

namespace {

// Hooks of the fused products (MatmulGroup in kernel_table.h). Each runs on the pool thread
// that owns the token rows / output rows it is given, right before or after they are
// computed, so none of them is a separate single-threaded pass over the activations.

// Epilogue of Q/K/V: adds each matrix's bias (qwen2) to its output rows [r0, r1).
struct BiasHook {
  const float* bias[MatmulGroup::kMaxMatrices];  // null: no bias for that matrix
  float* y[MatmulGroup::kMaxMatrices];
  int64_t ld[MatmulGroup::kMaxMatrices];  // row strides of y in floats
  int64_t n_tokens;
  static void Run(const void* p, int mat, int64_t r0, int64_t r1) {
    const auto& h = *static_cast<const BiasHook*>(p);
    if (h.bias[mat] == nullptr) return;
    for (int64_t t = 0; t < h.n_tokens; ++t) {
      ops::AddInPlace(h.y[mat] + t * h.ld[mat] + r0, h.bias[mat] + r0, r1 - r0);
    }
  }
};

// Epilogue applying op(dst + row offset, src + row offset, count) to output rows [r0, r1) of
// every token ([n_tokens, width] buffers): the residual add of attn_output / ffn_down
// (x += proj).
template <void (*Op)(float*, const float*, int64_t)>
struct RowsHook {
  float* dst;
  const float* src;
  int64_t width;
  int64_t n_tokens;
  int64_t src_ld = 0;  // src's row stride in floats; 0: width
  static void Run(const void* p, int, int64_t r0, int64_t r1) {
    const auto& h = *static_cast<const RowsHook*>(p);
    const int64_t ld = h.src_ld > 0 ? h.src_ld : h.width;
    for (int64_t t = 0; t < h.n_tokens; ++t) {
      Op(h.dst + t * h.width + r0, h.src + t * ld + r0, r1 - r0);
    }
  }
};
using ResidualHook = RowsHook<&ops::AddInPlace>;

// The gated unit over separate gate and up products: gate = act(gate) * up on rows [r0, r1)
// of every token, glu the kernel table's silu_glu or gelu_glu.
struct GluRowsHook {
  void (*glu)(float* gate, const float* up, int64_t n);
  float* gate;
  const float* up;
  int64_t width;
  int64_t n_tokens;
  static void Run(const void* p, int, int64_t r0, int64_t r1) {
    const auto& h = *static_cast<const GluRowsHook*>(p);
    for (int64_t t = 0; t < h.n_tokens; ++t) {
      h.glu(h.gate + t * h.width + r0, h.up + t * h.width + r0, r1 - r0);
    }
  }
};

// Epilogue of the fused gate/up product (LlamaLayerWeights::w_gate_up): each token's row of
// its output gu (ld_gu floats apart) holds 16 gate rows, then the same 16 rows of up, and so
// on; rows [r0, r1) (multiples of 32: MatmulGroup::epilogue_rows) give
// out[t][j] = act(gate_j) * up_j ([n_tokens, n_ff]) for the n_ff rows j they cover.
// glu: the kernel table's silu_glu or gelu_glu.
struct PairedGluHook {
  void (*glu)(float* gate, const float* up, int64_t n);
  float* gu;
  int64_t ld_gu;
  float* out;
  int64_t n_ff;
  int64_t n_tokens;
  static void Run(const void* p, int, int64_t r0, int64_t r1) {
    const auto& h = *static_cast<const PairedGluHook*>(p);
    constexpr int64_t kGroup = kernels::kInterleaveRows;
    for (int64_t t = 0; t < h.n_tokens; ++t) {
      float* row = h.gu + t * h.ld_gu;
      for (int64_t r = r0; r < r1; r += 2 * kGroup) {
        h.glu(row + r, row + r + kGroup, kGroup);  // in place over the gate half
        std::memcpy(h.out + t * h.n_ff + r / 2, row + r, kGroup * sizeof(float));
      }
    }
  }
};

// The residual update of a sub-block: x_res += W in, or with a post-norm (gemma2/3)
// x_res += RMSNorm(W in) * post_norm. Without a post-norm the add is the product's epilogue
// (no separate pass); a post-norm needs whole rows, so it runs after the product. proj's
// rows are w.rows + kRowPadFloats floats apart (llama_context.h).
void AddProjection(const KernelTable& kernels, const WeightMatrix& w, const float* in,
                   int64_t n, const std::vector<float>& post_norm, float eps, float* proj,
                   float* x_res, ComputePool& pool) {
  const int64_t ld = w.rows + kRowPadFloats;
  const ResidualHook hook{x_res, proj, w.rows, n, ld};
  MatmulGroup g;
  g.n = 1;
  g.w[0] = w;
  g.y[0] = proj;
  g.ldy[0] = ld;
  if (post_norm.empty()) {
    g.epilogue = &ResidualHook::Run;
    g.epilogue_ctx = &hook;
  }
  RunMatmulGroup(kernels, g, in, n, pool);
  if (post_norm.empty()) return;
  for (int64_t t = 0; t < n; ++t) {
    float* row = proj + t * ld;
    ops::RmsNorm(row, post_norm.data(), w.rows, eps, row);
    ops::AddInPlace(x_res + t * w.rows, row, w.rows);
  }
}

std::pair<SeqId, int64_t>* FindSeq(std::vector<std::pair<SeqId, int64_t>>& v, SeqId seq) {
  for (auto& e : v) {
    if (e.first == seq) return &e;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::Load(std::unique_ptr<GgufFile> file,
                                                     const KernelTable& kernels,
                                                     const ModelLoadOptions& options) {
  if (file == nullptr) return InvalidArgument("LlamaModel::Load: no file");
  if (kernels.matmul == nullptr) {
    return InvalidArgument("LlamaModel::Load: kernel table has no matmul");
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel(std::move(file), kernels));
  LL_ASSIGN_OR_RETURN(m->config_, ReadModelConfig(*m->file_));
  LL_ASSIGN_OR_RETURN(m->weights_, BindLlamaWeights(*m->file_, m->config_));
  if (options.repack) LL_RETURN_IF_ERROR(m->RepackMatrices(options.fuse_gate_up));
  return m;
}

Status LlamaModel::ValidateBatch(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                                 LlamaContext& ctx, int64_t* n_wanted) const {
  if (ctx.n_layer() != config_.n_layer || ctx.k_dim() != config_.k_dim() ||
      ctx.v_dim() != config_.v_dim()) {
    return InvalidArgument("Eval: context was created for a different model shape");
  }
  auto& seq_next = ctx.scratch().seq_next;  // (sequence, next expected position)
  auto& seq_view = ctx.scratch().seq_view;  // its SeqKv in `kv`
  seq_next.clear();
  seq_view.clear();
  *n_wanted = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& t = batch[i];
    // Built only on the error paths: validation runs for every token of every step.
    auto where = [i] { return "batch token " + std::to_string(i) + ": "; };
    if (t.token < 0 || t.token >= config_.n_vocab) {
      return InvalidArgument(where() + "token id " + std::to_string(t.token) + " outside [0, " +
                             std::to_string(config_.n_vocab) + ")");
    }
    if (t.pos < 0 || t.pos >= ctx.n_ctx()) {
      return OutOfRange(where() + "position " + std::to_string(t.pos) +
                        " outside the context [0, " + std::to_string(ctx.n_ctx()) + ")");
    }
    auto* entry = FindSeq(seq_next, t.seq);
    if (entry == nullptr) {
      size_t v = 0;
      while (v < kv.size() && kv[v].seq != t.seq) ++v;
      if (v == kv.size()) {
        return InvalidArgument(where() + "unknown sequence id " + std::to_string(t.seq) +
                               " (no block table for it)");
      }
      seq_next.emplace_back(t.seq, kv[v].n_tokens);
      seq_view.push_back(v);
      entry = &seq_next.back();
    }
    if (t.pos != entry->second) {
      return InvalidArgument(where() + "position " + std::to_string(t.pos) + " does not continue " +
                             "sequence " + std::to_string(t.seq) + " (next position " +
                             std::to_string(entry->second) + "; truncate the sequence to rewind)");
    }
    ++entry->second;
    if (t.want_logits) ++*n_wanted;
  }
  return Status::Ok();
}

// The caller's tables must give every position the batch writes a block of this context's
// store: nothing is allocated here (the tables' owner grows them before the step).
Status LlamaModel::CheckBlockTables(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                                    LlamaContext& ctx) const {
  const int64_t n_blocks = ctx.kv().shape().n_blocks;
  const auto& seq_next = ctx.scratch().seq_next;
  for (size_t i = 0; i < seq_next.size(); ++i) {
    const auto& [seq, next] = seq_next[i];
    const SeqKv& v = kv[ctx.scratch().seq_view[i]];
    if (static_cast<int64_t>(v.blocks.size()) < KvBlocksFor(next)) {
      return InvalidArgument("kv: sequence " + std::to_string(seq) + " has a block table of " +
                             std::to_string(v.blocks.size()) + " blocks; the batch reaches " +
                             "position " + std::to_string(next - 1) + ", which needs " +
                             std::to_string(KvBlocksFor(next)));
    }
    // Attention reads every block below `next`, not only the ones this batch writes.
    for (int64_t b = 0; b < KvBlocksFor(next); ++b) {
      const int32_t id = v.blocks[static_cast<size_t>(b)];
      if (id < 0 || id >= n_blocks) {
        return InvalidArgument("kv: sequence " + std::to_string(seq) + " block_table[" +
                               std::to_string(b) + "] = " + std::to_string(id) +
                               " outside [0, " + std::to_string(n_blocks) + ")");
      }
    }
  }
  if (ctx.window_table() != nullptr) LL_RETURN_IF_ERROR(CheckWindowBlocks(batch, kv, ctx));
  return Status::Ok();
}

// Window tables grow and shrink step by step inside one Eval (a long prompt never holds more
// than its window plus one step there), so the check is a simulation: per sequence, the most
// blocks it holds during any step of this batch; their growth over what it holds now must fit
// the free blocks (a bound: the sequences' peaks need not coincide).
Status LlamaModel::CheckWindowBlocks(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                                     LlamaContext& ctx) const {
  KvWindowTable& window = *ctx.window_table();
  const int64_t w = window.window();
  const auto first_block = [w](int64_t pos) {
    return pos - w + 1 > 0 ? (pos - w + 1) / kKvBlockTokens : 0;
  };
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t need = 0;
  for (size_t i = 0; i < ctx.scratch().seq_next.size(); ++i) {
    const SeqId seq = ctx.scratch().seq_next[i].first;
    const int64_t start = kv[ctx.scratch().seq_view[i]].n_tokens;
    if (!window.Has(seq)) {
      return InvalidArgument("kv: unknown sequence id " + std::to_string(seq) +
                             " (no sliding-window tables for it)");
    }
    // The window tables continue from the last step's length; a caller's table that starts
    // with a cached prefix has no window behind it (prefix-cache hits do not apply here).
    if (window.length(seq) != start) {
      return InvalidArgument("kv: sequence " + std::to_string(seq) + " continues at position " +
                             std::to_string(start) +
                             " but its sliding-window layers hold positions up to " +
                             std::to_string(window.length(seq)) +
                             " (a cached prefix cannot be reused by sliding-window layers)");
    }
    const int64_t held = KvBlocksFor(start) - window.first_held(seq);
    int64_t peak = held;
    int64_t first_held = window.first_held(seq);
    for (int64_t begin = 0; begin < n; begin += ctx.max_batch_tokens()) {
      const int64_t end = std::min(n, begin + ctx.max_batch_tokens());
      int64_t a = -1, e = -1;  // this sequence's positions in the step: [a, e)
      for (int64_t t = begin; t < end; ++t) {
        if (batch[static_cast<size_t>(t)].seq != seq) continue;
        if (a < 0) a = batch[static_cast<size_t>(t)].pos;
        e = batch[static_cast<size_t>(t)].pos + 1;
      }
      if (a < 0) continue;
      peak = std::max(peak, KvBlocksFor(e) - first_held);
      first_held = std::max(first_held, first_block(e));  // released after the step
    }
    need += std::max<int64_t>(0, peak - held);
  }
  if (need > window.pool().n_free()) {
    return ResourceExhausted("kv window pool full: the batch needs up to " + std::to_string(need) +
                             " more blocks, " + std::to_string(window.pool().n_free()) +
                             " free (the pool holds the window of max_sequences sequences)");
  }
  return Status::Ok();
}

// The context's own blocks: grow each sequence's table to cover the batch (all or nothing,
// after the batch is known to be valid), run the pass over the views, then record the new
// lengths. On any error the tables are as before.
Status LlamaModel::Eval(std::span<const BatchToken> batch, LlamaContext& ctx, ComputePool& pool,
                        std::span<float> logits, std::span<float> hidden) const {
  KvSequenceTable* own = ctx.local_blocks();
  if (own == nullptr) {
    return InvalidArgument("Eval: this context's KV blocks belong to the caller; pass each "
                           "sequence's block table (the SeqKv overload)");
  }
  std::vector<SeqKv>& views = ctx.scratch().local_views;
  views.clear();
  for (const BatchToken& t : batch) {
    bool seen = false;
    for (const SeqKv& v : views) seen |= v.seq == t.seq;
    if (seen || own->Find(t.seq) == nullptr) continue;  // unknown ids: ValidateBatch says so
    views.push_back(own->View(t.seq));
  }
  int64_t n_wanted = 0;
  LL_RETURN_IF_ERROR(ValidateBatch(batch, views, ctx, &n_wanted));
  LL_RETURN_IF_ERROR(CheckLogits(logits, n_wanted));
  // seq_next[i] is views[seq_view[i]]'s position after the batch.
  const std::vector<std::pair<SeqId, int64_t>> next = ctx.scratch().seq_next;
  int64_t need = 0;
  for (const auto& [seq, end] : next) need += own->BlocksNeeded(seq, end);
  if (need > own->pool().n_free()) {
    return ResourceExhausted("kv cache full: the batch needs " + std::to_string(need) +
                             " more blocks of " + std::to_string(kKvBlockTokens) +
                             " positions, " + std::to_string(own->pool().n_free()) + " free");
  }
  for (const auto& [seq, end] : next) LL_CHECK(own->Reserve(seq, end));
  for (SeqKv& v : views) v = own->View(v.seq);  // the tables have grown (and may have moved)
  const Status s = Eval(batch, std::span<const SeqKv>(views), ctx, pool, logits, hidden);
  for (size_t i = 0; i < next.size(); ++i) {
    const SeqId seq = next[i].first;
    if (s.ok()) {
      own->SetLength(seq, next[i].second);
    } else {
      // Nothing was written: give back the blocks reserved above.
      (void)own->Truncate(seq, own->Find(seq)->n_tokens);
    }
  }
  return s;
}

Status LlamaModel::CheckLogits(std::span<float> logits, int64_t n_wanted) const {
  const uint64_t logits_needed = static_cast<uint64_t>(n_wanted) * config_.n_vocab;
  if (logits.size() < logits_needed) {
    return InvalidArgument("Eval: logits buffer holds " + std::to_string(logits.size()) +
                           " floats, " + std::to_string(logits_needed) + " needed (" +
                           std::to_string(n_wanted) + " x n_vocab)");
  }
  return Status::Ok();
}

Status LlamaModel::Eval(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                        LlamaContext& ctx, ComputePool& pool, std::span<float> logits,
                        std::span<float> hidden) const {
  int64_t n_wanted = 0;
  LL_RETURN_IF_ERROR(ValidateBatch(batch, kv, ctx, &n_wanted));
  LL_RETURN_IF_ERROR(CheckLogits(logits, n_wanted));
  const auto n_hidden = static_cast<uint64_t>(
      std::count_if(batch.begin(), batch.end(), [](const BatchToken& t) { return t.want_hidden; }));
  if (hidden.size() < n_hidden * static_cast<uint64_t>(config_.n_embd)) {
    return InvalidArgument("Eval: hidden buffer holds " + std::to_string(hidden.size()) +
                           " floats, " + std::to_string(n_hidden * config_.n_embd) +
                           " needed (" + std::to_string(n_hidden) + " x n_embd)");
  }
  LL_RETURN_IF_ERROR(CheckBlockTables(batch, kv, ctx));

  LlamaScratch& s = ctx.scratch();
  if (s.attention.size() < static_cast<size_t>(pool.n_threads())) {
    s.attention.resize(static_cast<size_t>(pool.n_threads()));
  }
  const int64_t n = static_cast<int64_t>(batch.size());
  float* out = logits.data();
  float* hidden_out = hidden.data();
  KvWindowTable* window = ctx.window_table();
  for (int64_t begin = 0; begin < n; begin += ctx.max_batch_tokens()) {
    const int64_t len = std::min(ctx.max_batch_tokens(), n - begin);
    const auto step = batch.subspan(static_cast<size_t>(begin), static_cast<size_t>(len));
    // Each token's block tables. Window tables: blocks for this step's positions (checked by
    // CheckWindowBlocks) ...
    for (size_t t = 0; t < step.size(); ++t) {
      const auto* entry = FindSeq(s.seq_next, step[t].seq);
      s.block_tables[t] = kv[s.seq_view[static_cast<size_t>(entry - s.seq_next.data())]].blocks.data();
    }
    for (size_t t = 0; window != nullptr && t < step.size(); ++t) {
      if (t + 1 == step.size() || step[t + 1].seq != step[t].seq) {
        LL_CHECK(window->Reserve(step[t].seq, step[t].pos + 1));
      }
    }
    for (size_t t = 0; window != nullptr && t < step.size(); ++t) {
      s.window_tables[t] = window->blocks(step[t].seq);
    }
    EvalStep(step, ctx, pool, out, hidden_out);
    // ... and the blocks no later position reads go back to the pool.
    for (size_t t = 0; window != nullptr && t < step.size(); ++t) {
      if (t + 1 == step.size() || step[t + 1].seq != step[t].seq) {
        window->Advance(step[t].seq, step[t].pos + 1);
      }
    }
    for (const BatchToken& t : step) {
      if (t.want_logits) out += config_.n_vocab;
      if (t.want_hidden) hidden_out += config_.n_embd;
    }
  }
  return Status::Ok();
}

// The transformer, as in the paper: embed, then per layer
//   x += [PostNorm] Attention(RMSNorm(x))   and   x += [PostNorm] FFN(RMSNorm(x)),
// then logits = Output(RMSNorm(x)) [soft-capped]. Each RMSNorm runs as the prologue of the
// product that reads it and each residual add as the epilogue of the product that feeds it,
// so every line below is one pass over the weights.
void LlamaModel::EvalStep(std::span<const BatchToken> step, LlamaContext& ctx, ComputePool& pool,
                          float* logits, float* hidden) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  const int64_t n = static_cast<int64_t>(step.size());
  if (c.is_moe()) {
    std::fill_n(s.moe_route_margin.begin(), n, std::numeric_limits<float>::infinity());
  }
  {
    const OpStageTimer timer("embedding + RoPE angles");
    Embed(step, ctx);  // x = token_embd[token] * embd_scale; rope angles of every position
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(il)];
    NormAndProjectQkv(w, n, ctx, pool);        // q, k, v = RMSNorm(x) * attn_norm . Wq, Wk, Wv
    {
      const OpStageTimer timer("Q/K norm, RoPE, KV writes");
      PositionAndCache(il, step, ctx);         // [Q/K norm], RoPE, K and V into the cache
    }
    {
      const OpStageTimer timer("attention");
      Attend(il, step, ctx, pool);             // attn = softmax(q k^T * scale) v, causal
    }
    AddProjection(*kernels_, w.wo, s.attn.data(), n, w.attn_post_norm, c.rms_eps,
                  s.proj.data(), s.x.data(), pool);  // x += [PostNorm](attn . Wo)
    if (!c.is_moe()) {
      const NormHook norm{s.x.data(), w.ffn_norm.data(), c.n_embd, c.rms_eps, s.xb.data()};
      GateUp(w.dense(), c.n_ff, s.xb.data(), n, &norm, ctx, pool);  // h = act(RMSNorm(x) .
                                                                    //  Wgate) * (... . Wup)
      AddProjection(*kernels_, w.w_down, s.gate.data(), n, w.ffn_post_norm, c.rms_eps,
                    s.proj.data(), s.x.data(), pool);  // x += [PostNorm](h . Wdown)
    } else {
      NormAndMixExperts(w, n, ctx, pool);  // x += sum_k p_k Expert_k(RMSNorm(x)) [+ shared]
    }
  }
  OutputHidden(step, ctx, hidden);
  OutputLogits(step, ctx, pool, logits);
}

// The rows an embedding's pooling reads: RMSNorm(x) * output_norm, as the classifier sees it.
void LlamaModel::OutputHidden(std::span<const BatchToken> step, LlamaContext& ctx,
                              float* hidden) const {
  const ModelConfig& c = config_;
  const LlamaScratch& s = ctx.scratch();
  for (size_t t = 0; t < step.size(); ++t) {
    if (!step[t].want_hidden) continue;
    ops::RmsNorm(s.x.data() + static_cast<int64_t>(t) * c.n_embd, weights_.output_norm.data(),
                 c.n_embd, c.rms_eps, hidden);
    hidden += c.n_embd;
  }
}

void LlamaModel::Embed(std::span<const BatchToken> step, LlamaContext& ctx) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  const WeightMatrix& emb = weights_.token_embd;
  const ops::RopeParams rope = ops::RopeParamsFrom(c, ctx.n_ctx());
  const ops::RopeParams rope_swa = ops::RopeParamsFrom(c, ctx.n_ctx(), /*swa=*/true);
  const bool swa_angles = !s.rope_cos_swa.empty();
  const int64_t half = c.rope_dim / 2;
  for (size_t t = 0; t < step.size(); ++t) {
    const int64_t ti = static_cast<int64_t>(t);
    float* x = s.x.data() + ti * c.n_embd;  // x: [n, n_embd]
    ref::DequantizeRow(emb.type, emb.data + static_cast<uint64_t>(step[t].token) * emb.row_bytes,
                       x, c.n_embd);
    if (c.embd_scale != 1.0f) {
      for (int64_t i = 0; i < c.n_embd; ++i) x[i] *= c.embd_scale;
    }
    // Rotation angles depend only on the position: computed once, shared by all layers.
    ops::RopeAngles(step[t].pos, rope, s.rope_cos.data() + ti * half,
                    s.rope_sin.data() + ti * half);
    if (swa_angles) {
      ops::RopeAngles(step[t].pos, rope_swa, s.rope_cos_swa.data() + ti * half,
                      s.rope_sin_swa.data() + ti * half);
    }
  }
}

void LlamaModel::NormAndProjectQkv(const LlamaLayerWeights& w, int64_t n, LlamaContext& ctx,
                                   ComputePool& pool) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  // xb = RMSNorm(x) (fused into the activation quantization), then q, k, v as one product:
  // q: [n, n_head * head_dim_k], k: [n, n_head_kv * head_dim_k], v: [n, n_head_kv * head_dim_v]
  const NormHook norm{s.x.data(), w.attn_norm.data(), c.n_embd, c.rms_eps, s.xb.data()};
  const BiasHook bias{{w.bq.empty() ? nullptr : w.bq.data(), w.bk.empty() ? nullptr : w.bk.data(),
                       w.bv.empty() ? nullptr : w.bv.data()},
                      {s.q.data(), s.k.data(), s.v.data()},
                      {c.q_dim(), c.k_dim(), c.v_dim()},
                      n};
  MatmulGroup qkv;
  qkv.n = 3;
  qkv.w[0] = w.wq;
  qkv.w[1] = w.wk;
  qkv.w[2] = w.wv;
  qkv.y[0] = s.q.data();
  qkv.y[1] = s.k.data();
  qkv.y[2] = s.v.data();
  qkv.prologue = &NormHook::Run;
  qkv.prologue_ctx = &norm;
  if (!w.bq.empty() || !w.bk.empty() || !w.bv.empty()) {
    qkv.epilogue = &BiasHook::Run;
    qkv.epilogue_ctx = &bias;
  }
  RunMatmulGroup(*kernels_, qkv, s.xb.data(), n, pool);
}

void LlamaModel::PositionAndCache(int64_t il, std::span<const BatchToken> step,
                                  LlamaContext& ctx) const {
  const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(il)];
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  const bool swa_angles = c.is_swa(il) && !s.rope_cos_swa.empty();
  const ops::RopeParams rope = ops::RopeParamsFrom(c, ctx.n_ctx(), c.is_swa(il));
  const float* cos_base = swa_angles ? s.rope_cos_swa.data() : s.rope_cos.data();
  const float* sin_base = swa_angles ? s.rope_sin_swa.data() : s.rope_sin.data();
  const int64_t half = c.rope_dim / 2;
  KvStorage& kv = ctx.kv_of(il);
  const int64_t kv_layer = ctx.kv_index(il);
  const std::vector<const int32_t*>& tables = ctx.windowed(il) ? s.window_tables : s.block_tables;
  for (int64_t t = 0; t < static_cast<int64_t>(step.size()); ++t) {
    float* q = s.q.data() + t * c.q_dim();
    float* k = s.k.data() + t * c.k_dim();
    if (c.qk_norm) {  // qwen3, gemma3: each head normalised on its own before the rotation
      for (int64_t h = 0; h < c.n_head; ++h) {
        float* qh = q + h * c.head_dim_k;
        ops::RmsNorm(qh, w.attn_q_norm.data(), c.head_dim_k, c.rms_eps, qh);
      }
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        float* kh = k + h * c.head_dim_k;
        ops::RmsNorm(kh, w.attn_k_norm.data(), c.head_dim_k, c.rms_eps, kh);
      }
    }
    ops::ApplyRope(q, c.n_head, c.head_dim_k, rope, cos_base + t * half, sin_base + t * half);
    ops::ApplyRope(k, c.n_head_kv, c.head_dim_k, rope, cos_base + t * half, sin_base + t * half);
    // Write this token's K and V into its sequence's block for its position.
    const int64_t pos = step[static_cast<size_t>(t)].pos;
    const int32_t block = tables[static_cast<size_t>(t)][pos / kKvBlockTokens];
    const int64_t slot = pos % kKvBlockTokens;
    kv.StoreK(kv_layer, block, slot, k);
    kv.StoreV(kv_layer, block, slot, s.v.data() + t * c.v_dim());
  }
}

// Causal attention, split over the pool. Each token sees positions [0, pos] of its own
// sequence; all K/V of this step were written above, so tokens later in the step see earlier
// ones. Work items are tiles of consecutive tokens of one sequence x one KV head (the kernel
// converts each K/V block once per tile), handed out in contiguous runs of about equal
// causal cost.
void LlamaModel::Attend(int64_t il, std::span<const BatchToken> step, LlamaContext& ctx,
                        ComputePool& pool) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  AttentionShape shape;
  shape.n_group = c.n_group();
  shape.head_dim_k = c.head_dim_k;
  shape.head_dim_v = c.head_dim_v;
  shape.scale = c.attn_scale;
  shape.softcap = c.attn_softcap;
  shape.window = c.is_swa(il) ? c.swa_window : 0;
  const AttentionKernels& kernels = AttentionKernelsFor(kernels_->isa);
  // Runs of consecutive batch entries of one sequence; their positions are consecutive
  // because ValidateBatch made every token continue its sequence.
  thread_local std::vector<AttentionRun> runs;
  thread_local std::vector<AttentionItem> items;
  runs.clear();
  for (size_t t = 0; t < step.size(); ++t) {
    if (t > 0 && step[t].seq == step[t - 1].seq) {
      ++runs.back().n_tokens;
    } else {
      runs.push_back({static_cast<int64_t>(t), 1, step[t].pos});
    }
  }
  PlanAttention(runs, c.n_head_kv, AttentionTileTokens(shape.n_group), &items);
  // Note: the workers must not name the thread_local vectors (each thread has its own copy).
  const std::span<const AttentionItem> plan(items);
  const KvStorage& kv = ctx.kv_of(il);
  const int64_t kv_layer = ctx.kv_index(il);
  const std::vector<const int32_t*>& tables = ctx.windowed(il) ? s.window_tables : s.block_tables;
  pool.Run([&, plan](int ith, int nth) {
    AttentionScratch& sc = s.attention[static_cast<size_t>(ith)];
    int64_t i0, i1;
    SplitAttentionWork(plan, ith, nth, &i0, &i1);
    for (int64_t k = i0; k < i1; ++k) {
      const AttentionItem& it = plan[static_cast<size_t>(k)];
      const float* q = s.q.data() + it.t0 * c.q_dim() + it.kv_head * shape.n_group * c.head_dim_k;
      float* out =
          s.attn.data() + it.t0 * c.attn_out_dim() + it.kv_head * shape.n_group * c.head_dim_v;
      AttendTile(kernels, kv, kv_layer, tables[static_cast<size_t>(it.t0)], it.kv_head, shape,
                 q, c.q_dim(), out, c.attn_out_dim(), it.n_tokens, it.pos0, sc);
    }
  });
}

void LlamaModel::GateUp(const FfnWeights& f, int64_t n_ff, const float* in, int64_t n,
                        const NormHook* norm, LlamaContext& ctx, ComputePool& pool) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  // gate and up as one product with gate = act(gate) * up applied per finished chunk of rows
  // (in: [n, n_embd]; the norm, when given, writes it as the product's prologue); the result
  // is s.gate [n, n_ff].
  MatmulGroup gate_up;
  if (norm != nullptr) {
    gate_up.prologue = &NormHook::Run;
    gate_up.prologue_ctx = norm;
  }
  const bool gelu = c.ffn_act == FfnActivation::kGeluTanh;
  // Fused (RepackMatrices): one matrix, gate and up groups alternating; up holds its output,
  // rows padded (kRowPadFloats) off a multiple of 4 KiB (MatmulGroup::ldy).
  const int64_t ld = 2 * n_ff + kRowPadFloats;
  const auto glu = gelu ? kernels_->gelu_glu : kernels_->silu_glu;
  const PairedGluHook paired{glu, s.up.data(), ld, s.gate.data(), n_ff, n};
  const GluRowsHook rows{glu, s.gate.data(), s.up.data(), n_ff, n};
  if (f.w_gate_up.rows != 0) {
    gate_up.n = 1;
    gate_up.w[0] = f.w_gate_up;  // [n, 2 * n_ff] in rows of ld floats
    gate_up.y[0] = s.up.data();
    gate_up.ldy[0] = ld;
    gate_up.epilogue_rows = 2 * kernels::kInterleaveRows;
    gate_up.epilogue = &PairedGluHook::Run;
    gate_up.epilogue_ctx = &paired;
  } else {
    gate_up.n = 2;
    gate_up.w[0] = f.w_gate;  // gate: [n, n_ff]
    gate_up.w[1] = f.w_up;    // up:   [n, n_ff]
    gate_up.y[0] = s.gate.data();
    gate_up.y[1] = s.up.data();
    gate_up.row_aligned = true;
    gate_up.epilogue = &GluRowsHook::Run;
    gate_up.epilogue_ctx = &rows;
  }
  RunMatmulGroup(*kernels_, gate_up, in, n, pool);
}

// y = W in, rows ld floats apart (no hooks).
void LlamaModel::Project(const WeightMatrix& w, const float* in, int64_t n, float* y,
                         int64_t ld, ComputePool& pool) const {
  MatmulGroup g;
  g.n = 1;
  g.w[0] = w;
  g.y[0] = y;
  g.ldy[0] = ld;
  RunMatmulGroup(*kernels_, g, in, n, pool);
}

void LlamaModel::OutputLogits(std::span<const BatchToken> step, LlamaContext& ctx,
                              ComputePool& pool, float* logits) const {
  const ModelConfig& c = config_;
  LlamaScratch& s = ctx.scratch();
  // Only rows whose logits are wanted go through the (large) output matrix.
  int64_t n_rows = 0;
  for (size_t t = 0; t < step.size(); ++t) {
    if (!step[t].want_logits) continue;
    ops::RmsNorm(s.x.data() + static_cast<int64_t>(t) * c.n_embd, weights_.output_norm.data(),
                 c.n_embd, c.rms_eps, s.head_in.data() + n_rows * c.n_embd);
    ++n_rows;
  }
  if (n_rows == 0) return;
  // [n_rows, n_vocab]; through the group entry (one matrix, no hooks: the same kernels as
  // KernelTable::matmul) so product timing (op_profile.h) sees the output matrix too.
  MatmulGroup out;
  out.n = 1;
  out.w[0] = weights_.output;
  out.y[0] = logits;
  RunMatmulGroup(*kernels_, out, s.head_in.data(), n_rows, pool);
  if (c.final_softcap > 0.0f) ops::SoftCap(logits, n_rows * c.n_vocab, c.final_softcap);
}

}  // namespace lifeline
