// LlamaContext: the run state of a model (llama2.c's RunState): the paged KV memory, the
// block books of one-process uses, and the activation scratch buffers, all allocated once at creation, sized for
// `max_batch_tokens` tokens per forward step (bigger batches are split into steps of that
// size) and `n_ctx` positions per sequence.
//
// Sliding-window layers (gemma2/3) keep their K/V apart when that saves memory (window +
// one step of positions per sequence is less than the context): a second KvStorage holding
// only those layers, with per-sequence KvWindowTable tables whose blocks are released as
// they fall out of the window. The other layers use the ordinary store, whose blocks are
// owned either by the context's own KvSequenceTable (the default) or by the caller
// (caller_owns_blocks: the server's BlockManager, which hands Eval a SeqKv per sequence; the
// context then keeps no free list of that memory). A sequence whose window was released
// cannot rewind into it.
//
// Ownership: owns KV memory, block tables and scratch; borrows nothing (it copies the few
// config numbers it needs). Thread-safety: one owner thread at a time (the engine loop);
// LlamaModel::Eval uses a ComputePool internally but the context is never shared across
// concurrent Eval calls.
// Failure: Create returns InvalidArgument for bad options and ResourceExhausted when the KV
// cache or scratch would exceed its byte cap.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/model/attention.h"
#include "engine/model/kv_blocks.h"
#include "engine/model/kv_storage.h"
#include "engine/model/model_config.h"

namespace lifeline {

// How the KV memory of a model splits (PlanKv): bytes per 16-position block of the
// ordinary pool (its layers only) and, with separate window storage, the window pool.
struct KvPlan {
  bool windowed = false;          // sliding-window layers in their own, released, storage
  int64_t n_layer_main = 0;       // layers in the ordinary pool
  int64_t n_layer_window = 0;     // layers in the window pool
  uint64_t main_block_bytes = 0;  // one block of the ordinary pool
  int64_t window_blocks = 0;      // blocks of the window pool (max_sequences of them)
  uint64_t window_bytes = 0;      // its memory
};

struct ContextOptions;
KvPlan PlanKv(const ModelConfig& config, const ContextOptions& options, int64_t n_ctx);

struct ContextOptions {
  int64_t n_ctx = 0;               // positions per sequence; 0 -> min(context_length, 4096)
  int64_t max_batch_tokens = 256;  // tokens per forward step (scratch is sized for this)
  int32_t max_sequences = 1;       // default KV size: this many sequences of n_ctx positions;
                                   // also the sequences the window pool holds at once
  int64_t n_kv_blocks = 0;         // 0 -> max_sequences * ceil(n_ctx / 16)
  KvType kv_type = KvType::kF16;
  // true: the caller's block manager owns the ordinary store's blocks and passes each
  // sequence's table to LlamaModel::Eval (the SeqKv overload); the context keeps no free list
  // of them and the three-argument Eval is refused. false: the context's own KvSequenceTable.
  bool caller_owns_blocks = false;
  uint64_t max_kv_bytes = 64ull << 30;       // cap on KV memory
  uint64_t max_scratch_bytes = 16ull << 30;  // cap on activation scratch
};

// Floats after each token's row in two buffers a long prompt's GEMM writes (proj and the
// fused gate/up output): rows then start 64 bytes off any 4 KiB multiple whatever the
// model's widths (MatmulGroup::ldy; 2048- and 11264-float rows are exact multiples).
// Measured (1.1B, pp256, two binaries alternated, 4 rounds): the gate/up padding turned a
// 0.93-0.96x regression of the fusion into 0.99-1.00x, proj's gave 1.02x more; q's (also
// 2048 wide) changed nothing (0.98 / 1.01x), so q stays unpadded.
inline constexpr int64_t kRowPadFloats = 16;

// Activation buffers for one forward step of up to B = max_batch_tokens tokens.
struct LlamaScratch {
  std::vector<float> x;         // [B, n_embd] residual stream
  std::vector<float> xb;        // [B, n_embd] normalised input of the current sub-block
  std::vector<float> q;         // [B, n_head * head_dim_k]
  std::vector<float> k;         // [B, n_head_kv * head_dim_k]
  std::vector<float> v;         // [B, n_head_kv * head_dim_v]
  std::vector<float> attn;      // [B, n_head * head_dim_v] attention output
  std::vector<float> proj;      // [B, n_embd + kRowPadFloats] output of attn_output / ffn_down
  std::vector<float> gate;      // [B, n_ff] gate, then silu(gate) * up
  std::vector<float> up;        // [B, n_ff] up, or the fused gate/up product
                                //   [B, 2 * n_ff + kRowPadFloats]
  std::vector<float> rope_cos;  // [B, rope_dim / 2]
  std::vector<float> rope_sin;  // [B, rope_dim / 2]
  // Angles of the sliding-window layers when their rope differs (gemma3: another base);
  // empty otherwise.
  std::vector<float> rope_cos_swa;  // [B, rope_dim / 2] or empty
  std::vector<float> rope_sin_swa;  // [B, rope_dim / 2] or empty
  std::vector<float> head_in;   // [B, n_embd] final-normed rows whose logits are wanted
  // Mixture of experts (empty for dense models), k = n_expert_used, E = n_expert:
  std::vector<float> router;         // [B, E] router logits
  std::vector<int32_t> moe_expert;   // [B, k] each token's chosen experts
  std::vector<float> moe_weight;     // [B, k] and their weights
  std::vector<int32_t> moe_order;    // [B * k] (token, slot) pairs grouped by expert
  std::vector<int32_t> moe_offsets;  // [E + 1] each expert's run in moe_order
  std::vector<int32_t> moe_fill;     // [E] counting-sort cursor
  std::vector<float> moe_in;         // [B, n_embd] one expert's tokens, gathered
  std::vector<float> moe_probs;      // [E] one token's probabilities
  std::vector<int32_t> moe_ids;      // [E] one token's experts, by probability
  // [B] per token of the last step: the smallest gap, over the layers, between the router
  // logits of the last chosen and the first unchosen expert (infinity for dense models). A
  // small gap is a routing near-tie that any rounding difference may flip (the golden tests
  // skip such tokens when they compare with another implementation).
  std::vector<float> moe_route_margin;
  std::vector<const int32_t*> block_tables;  // [B] each token's sequence block table
  std::vector<const int32_t*> window_tables;  // [B] its window table (windowed contexts)
  std::vector<AttentionScratch> attention;   // [n_threads] grown to the pool's size once
  // Per-Eval validation state: (sequence, next position) for the sequences in the batch,
  // and each one's SeqKv (index into the Eval's span, in the same order).
  std::vector<std::pair<SeqId, int64_t>> seq_next;
  std::vector<size_t> seq_view;
  std::vector<SeqKv> local_views;  // the three-argument Eval's views of the own table
};

class LlamaContext {
 public:
  static Result<std::unique_ptr<LlamaContext>> Create(const ModelConfig& config,
                                                      const ContextOptions& options);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }

  // Sequences: a handle the batch names. With the context's own blocks it keys a block table
  // in local_blocks(); with window storage it also keys the sequence's window tables; with
  // neither it is only a name.
  SeqId NewSequence();
  // Frees the sequence's own and window blocks; InvalidArgument for an unknown handle.
  Status ReleaseSequence(SeqId seq);
  // Drops positions >= n_tokens (e.g. to rewind or reuse a prompt prefix) from the context's
  // own table and the window tables (the caller truncates a table it owns). With window
  // storage, InvalidArgument when the window before n_tokens was already released.
  Status TruncateSequence(SeqId seq, int64_t n_tokens);
  // Valid positions [0, n) of a sequence in the context's own table; -1 for an unknown
  // handle, and always when the caller owns the blocks (it keeps the lengths).
  int64_t SequenceLength(SeqId seq) const;

  // The context's own block books; null when the caller owns the blocks.
  const KvSequenceTable* local_blocks() const { return local_.get(); }
  KvSequenceTable* local_blocks() { return local_.get(); }
  const KvStorage& kv() const { return *kv_; }
  KvStorage& kv() { return *kv_; }
  // Where layer il's K/V live: the window storage for a windowed context's sliding-window
  // layers, else the ordinary one; and the layer's index inside that storage.
  bool windowed(int64_t il) const { return window_ != nullptr && kv_windowed_[static_cast<size_t>(il)]; }
  KvStorage& kv_of(int64_t il) { return windowed(il) ? *kv_window_ : *kv_; }
  const KvStorage& kv_of(int64_t il) const { return windowed(il) ? *kv_window_ : *kv_; }
  int64_t kv_index(int64_t il) const { return kv_index_[static_cast<size_t>(il)]; }
  // The window tables (null unless the sliding-window layers are stored apart).
  KvWindowTable* window_table() { return window_.get(); }
  const KvWindowTable* window_table() const { return window_.get(); }
  const KvPlan& kv_plan() const { return plan_; }
  LlamaScratch& scratch() { return scratch_; }

  // The dims this context was built for; Eval refuses a model with different ones.
  int64_t n_layer() const { return n_layer_; }
  int64_t k_dim() const { return k_dim_; }
  int64_t v_dim() const { return v_dim_; }

 private:
  LlamaContext(int64_t n_ctx, int64_t max_batch) : n_ctx_(n_ctx), max_batch_tokens_(max_batch) {}
  Status AllocateScratch(const ModelConfig& c, uint64_t max_bytes);

  int64_t n_ctx_;
  int64_t max_batch_tokens_;
  int64_t n_layer_ = 0;
  int64_t k_dim_ = 0;
  int64_t v_dim_ = 0;
  std::unique_ptr<KvSequenceTable> local_;   // own block books (null: the caller's)
  SeqId next_seq_ = 0;                       // handles when the caller owns the blocks
  std::unique_ptr<KvStorage> kv_;
  KvPlan plan_;
  std::unique_ptr<KvWindowTable> window_;     // windowed contexts only
  std::unique_ptr<KvStorage> kv_window_;      // the sliding-window layers' K/V
  std::vector<uint8_t> kv_windowed_;          // [n_layer] layer stored in kv_window_
  std::vector<int64_t> kv_index_;             // [n_layer] its index in its storage
  LlamaScratch scratch_;
};

}  // namespace lifeline
