#include "engine/model/llama_context.h"

#include <algorithm>
#include <limits>
#include <new>
#include <string>

#include "base/checked_math.h"

namespace lifeline {
namespace {

constexpr int64_t kMaxBatchTokens = 1 << 16;
constexpr int64_t kDefaultMaxCtx = 4096;

}  // namespace

KvPlan PlanKv(const ModelConfig& c, const ContextOptions& o, int64_t n_ctx) {
  KvPlan p;
  int64_t n_swa = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) n_swa += c.is_swa(il) ? 1 : 0;
  // A sequence needs its window plus one step of positions, and two blocks of slack (the
  // window starts mid-block, the step ends mid-block).
  const int64_t per_seq = KvBlocksFor(c.swa_window + o.max_batch_tokens) + 2;
  p.windowed = n_swa > 0 && n_swa < c.n_layer && per_seq < KvBlocksFor(n_ctx);
  p.n_layer_window = p.windowed ? n_swa : 0;
  p.n_layer_main = c.n_layer - p.n_layer_window;
  p.main_block_bytes =
      KvBlockBytes(o.kv_type, p.n_layer_main, c.n_head_kv, c.head_dim_k, c.head_dim_v);
  if (p.windowed) {
    p.window_blocks = static_cast<int64_t>(o.max_sequences) * per_seq;
    p.window_bytes = static_cast<uint64_t>(p.window_blocks) *
                     KvBlockBytes(o.kv_type, n_swa, c.n_head_kv, c.head_dim_k, c.head_dim_v);
  }
  return p;
}

SeqId LlamaContext::NewSequence() {
  SeqId seq;
  if (local_) {
    seq = local_->Create();
  } else {
    // Never reused while the context lives, as KvSequenceTable's ids.
    seq = next_seq_;
    next_seq_ = next_seq_ == INT32_MAX ? 0 : next_seq_ + 1;
  }
  if (window_) window_->Create(seq);
  return seq;
}

Status LlamaContext::ReleaseSequence(SeqId seq) {
  if (local_) LL_RETURN_IF_ERROR(local_->Release(seq));
  if (window_) {
    if (!window_->Has(seq)) return InvalidArgument("kv: unknown sequence id " + std::to_string(seq));
    window_->Release(seq);
  }
  return Status::Ok();
}

Status LlamaContext::TruncateSequence(SeqId seq, int64_t n_tokens) {
  if (!local_ && !window_) return Status::Ok();  // nothing of the sequence is kept here
  const bool known = local_ ? local_->Find(seq) != nullptr : window_ && window_->Has(seq);
  if (!known) return InvalidArgument("kv: unknown sequence id " + std::to_string(seq));
  if (window_) LL_RETURN_IF_ERROR(window_->Truncate(seq, n_tokens));
  return local_ ? local_->Truncate(seq, n_tokens) : Status::Ok();
}

Result<std::unique_ptr<LlamaContext>> LlamaContext::Create(const ModelConfig& c,
                                                           const ContextOptions& o) {
  const int64_t n_ctx = o.n_ctx == 0 ? std::min(c.context_length, kDefaultMaxCtx) : o.n_ctx;
  if (n_ctx < 1 || n_ctx > ModelConfigLimits::kMaxContext) {
    return InvalidArgument("context option n_ctx = " + std::to_string(o.n_ctx) +
                           " outside [1, " + std::to_string(ModelConfigLimits::kMaxContext) + "]");
  }
  if (o.max_batch_tokens < 1 || o.max_batch_tokens > kMaxBatchTokens) {
    return InvalidArgument("context option max_batch_tokens = " +
                           std::to_string(o.max_batch_tokens) + " outside [1, " +
                           std::to_string(kMaxBatchTokens) + "]");
  }
  if (o.max_sequences < 1) {
    return InvalidArgument("context option max_sequences = " + std::to_string(o.max_sequences) +
                           " must be >= 1");
  }
  const int64_t n_blocks =
      o.n_kv_blocks != 0 ? o.n_kv_blocks : o.max_sequences * KvBlocksFor(n_ctx);
  if (n_blocks < 1 || n_blocks > INT32_MAX) {
    return InvalidArgument("context option n_kv_blocks = " + std::to_string(n_blocks) +
                           " outside [1, " + std::to_string(INT32_MAX) + "]");
  }
  std::unique_ptr<LlamaContext> ctx(new LlamaContext(n_ctx, o.max_batch_tokens));
  if (!o.caller_owns_blocks) ctx->local_ = std::make_unique<KvSequenceTable>(static_cast<int32_t>(n_blocks));
  ctx->n_layer_ = c.n_layer;
  ctx->k_dim_ = c.k_dim();
  ctx->v_dim_ = c.v_dim();
  ctx->plan_ = PlanKv(c, o, n_ctx);
  const KvPlan& plan = ctx->plan_;
  ctx->kv_windowed_.assign(static_cast<size_t>(c.n_layer), 0);
  ctx->kv_index_.assign(static_cast<size_t>(c.n_layer), 0);
  int64_t n_main = 0, n_win = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const bool w = plan.windowed && c.is_swa(il);
    ctx->kv_windowed_[static_cast<size_t>(il)] = w;
    ctx->kv_index_[static_cast<size_t>(il)] = w ? n_win++ : n_main++;
  }
  KvStorageShape shape;
  shape.n_layer = plan.n_layer_main;
  shape.n_blocks = n_blocks;
  shape.k_row_elems = c.k_dim();
  shape.v_row_elems = c.v_dim();
  shape.type = o.kv_type;
  shape.n_head_kv = c.n_head_kv;  // Q8_0 quantizes each head on its own
  if (plan.windowed && plan.window_bytes > o.max_kv_bytes) {
    return ResourceExhausted("kv: the sliding-window layers' " + std::to_string(plan.window_bytes) +
                             " bytes exceed the cap of " + std::to_string(o.max_kv_bytes));
  }
  LL_ASSIGN_OR_RETURN(ctx->kv_, KvStorage::Create(shape, o.max_kv_bytes - plan.window_bytes));
  if (plan.windowed) {
    if (plan.window_blocks > INT32_MAX) {
      return InvalidArgument("kv: " + std::to_string(plan.window_blocks) +
                             " window blocks exceed " + std::to_string(INT32_MAX));
    }
    KvStorageShape ws = shape;
    ws.n_layer = plan.n_layer_window;
    ws.n_blocks = plan.window_blocks;
    LL_ASSIGN_OR_RETURN(ctx->kv_window_, KvStorage::Create(ws, plan.window_bytes));
    ctx->window_ = std::make_unique<KvWindowTable>(static_cast<int32_t>(plan.window_blocks),
                                                   c.swa_window);
  }
  LL_RETURN_IF_ERROR(ctx->AllocateScratch(c, o.max_scratch_bytes));
  return ctx;
}

Status LlamaContext::AllocateScratch(const ModelConfig& c, uint64_t max_bytes) {
  const uint64_t b = static_cast<uint64_t>(max_batch_tokens_);
  const int64_t half_rope = c.rope_dim / 2;
  // Floats per token over all buffers (every dim is capped by ModelConfigLimits, so this sum
  // cannot overflow; the product with B is checked).
  const bool swa_rope = !c.swa_layers.empty() && (c.rope_freq_base_swa != c.rope_freq_base ||
                                                  c.rope_freq_scale_swa != c.rope_freq_scale);
  const int64_t n_ff = c.ffn_width();
  const int64_t moe_per_token = c.is_moe() ? c.n_expert + 3 * c.n_expert_used + c.n_embd : 0;
  const uint64_t per_token =
      static_cast<uint64_t>(3 * c.n_embd + c.q_dim() + c.k_dim() + c.v_dim() +
                            c.attn_out_dim() + 3 * n_ff + 2 * kRowPadFloats +
                            (swa_rope ? 4 : 2) * half_rope + c.n_embd + moe_per_token);
  uint64_t total_floats = 0, total_bytes = 0;
  if (!CheckedMul(per_token, b, &total_floats) ||
      !CheckedMul(total_floats, sizeof(float), &total_bytes) || total_bytes > max_bytes) {
    return ResourceExhausted("activation scratch for max_batch_tokens = " +
                             std::to_string(max_batch_tokens_) + " exceeds the cap of " +
                             std::to_string(max_bytes) + " bytes");
  }
  auto n = [b](int64_t per) { return static_cast<size_t>(b * static_cast<uint64_t>(per)); };
  LlamaScratch& s = scratch_;
  try {
    s.x.resize(n(c.n_embd));
    s.xb.resize(n(c.n_embd));
    s.q.resize(n(c.q_dim()));
    s.k.resize(n(c.k_dim()));
    s.v.resize(n(c.v_dim()));
    s.attn.resize(n(c.attn_out_dim()));
    s.proj.resize(n(c.n_embd + kRowPadFloats));
    s.gate.resize(n(n_ff));
    s.up.resize(n(2 * n_ff + kRowPadFloats));  // room for the fused gate/up output
    s.rope_cos.resize(n(half_rope));
    s.rope_sin.resize(n(half_rope));
    if (swa_rope) {
      s.rope_cos_swa.resize(n(half_rope));
      s.rope_sin_swa.resize(n(half_rope));
    }
    s.head_in.resize(n(c.n_embd));
    s.block_tables.resize(n(1));
    s.window_tables.resize(n(1));
    if (c.is_moe()) {
      s.router.resize(n(c.n_expert));
      s.moe_expert.resize(n(c.n_expert_used));
      s.moe_weight.resize(n(c.n_expert_used));
      s.moe_order.resize(n(c.n_expert_used));
      s.moe_offsets.resize(static_cast<size_t>(c.n_expert) + 1);
      s.moe_fill.resize(static_cast<size_t>(c.n_expert));
      s.moe_in.resize(n(c.n_embd));
      s.moe_probs.resize(static_cast<size_t>(c.n_expert));
      s.moe_ids.resize(static_cast<size_t>(c.n_expert));
    }
    s.moe_route_margin.assign(n(1), std::numeric_limits<float>::infinity());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("allocating " + std::to_string(total_bytes) +
                             " bytes of activation scratch failed");
  }
  return Status::Ok();
}

int64_t LlamaContext::SequenceLength(SeqId seq) const {
  if (!local_) return -1;
  const KvSequence* s = local_->Find(seq);
  return s == nullptr ? -1 : s->n_tokens;
}

}  // namespace lifeline
