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
  std::unique_ptr<LlamaContext> ctx(
      new LlamaContext(n_ctx, o.max_batch_tokens, static_cast<int32_t>(n_blocks)));
  ctx->n_layer_ = c.n_layer;
  ctx->k_dim_ = c.k_dim();
  ctx->v_dim_ = c.v_dim();
  KvStorageShape shape;
  shape.n_layer = c.n_layer;
  shape.n_blocks = n_blocks;
  shape.k_row_elems = c.k_dim();
  shape.v_row_elems = c.v_dim();
  shape.type = o.kv_type;
  shape.n_head_kv = c.n_head_kv;  // Q8_0 quantizes each head on its own
  LL_ASSIGN_OR_RETURN(ctx->kv_, KvStorage::Create(shape, o.max_kv_bytes));
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
  const KvSequence* s = seqs_.Find(seq);
  return s == nullptr ? -1 : s->n_tokens;
}

}  // namespace lifeline
