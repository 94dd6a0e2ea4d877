// LlamaModel: a loaded decoder-only model of any family ModelConfig describes (llama, qwen2,
// qwen3, gemma 1/2/3, phi3: config + weights + the file they point into) and its one forward
// pass, steered by the config's switches, over a batch of tokens from one or more sequences.
//
//   LL_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
//   LL_ASSIGN_OR_RETURN(auto model, LlamaModel::Load(std::move(file), ReferenceKernels()));
//   LL_ASSIGN_OR_RETURN(auto ctx, LlamaContext::Create(model->config(), {}));
//   SeqId seq = ctx->NewSequence();
//   std::vector<BatchToken> batch = {{1, 0, seq, false}, {403, 1, seq, true}};
//   model->Eval(batch, *ctx, pool, logits);  // logits: [1, n_vocab]
//
// That Eval grows the context's own block tables. A server whose block manager owns the
// blocks (ContextOptions::caller_owns_blocks) passes each sequence's table instead, as
// vLLM's forward batch carries its block tables:
//   SeqKv kv[] = {{seq, block_table, n_cached_positions}};
//   model->Eval(batch, kv, *ctx, pool, logits);
//
// Ownership: owns the GgufFile (weights are views into its mapping, or into the model's own
// repacked copies, see ModelLoadOptions); borrows the KernelTable
// (immutable, must outlive the model). Run state lives in a caller-owned LlamaContext, the
// threads in a caller-owned ComputePool.
// Thread-safety: the model is immutable after Load; several threads may Eval concurrently with
// distinct contexts and pools.
// Failure: Load returns the config/weight binding errors (see model_config.h,
// llama_weights.h). Eval validates the whole batch before computing anything:
// InvalidArgument for a bad token id, unknown sequence or a position that does not continue
// its sequence, a block table that does not cover the batch or names a block outside the
// store; OutOfRange for a position >= n_ctx; ResourceExhausted when the context's own (or
// window) pool has too few free blocks. On error nothing has been written to the cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/huge_page_buffer.h"
#include "base/status.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_weights.h"
#include "engine/model/model_config.h"

namespace lifeline {

// One token of a batch. Positions of a sequence must continue it: the first token of `seq`
// in a batch has pos == the sequence's current length, the next pos + 1, and so on.
struct BatchToken {
  int32_t token = 0;
  int64_t pos = 0;
  SeqId seq = 0;
  bool want_logits = false;
  // Its final hidden state (after output_norm: what the classifier reads) is wanted: an
  // embedding model's pooling reads these rows (serving/embedding.h).
  bool want_hidden = false;
};

struct ModelLoadOptions {
  // Repack each matrix whose type the kernel table asks for (KernelTable::interleaved_types)
  // into the row-interleaved layout, in owned memory; the file mapping of those matrices is
  // then no longer read. false: every matrix stays a view into the mapping.
  bool repack = true;
  // With repack, and gate and up of one type the table asks to repack: write them as one
  // matrix whose 16-row groups alternate (LlamaLayerWeights::w_gate_up), so the gate+up
  // product streams one contiguous run of weights instead of switching between two.
  bool fuse_gate_up = true;
};

struct NormHook;  // the RMSNorm prologue of a product (llama_model.cpp)

class LlamaModel {
 public:
  static Result<std::unique_ptr<LlamaModel>> Load(std::unique_ptr<GgufFile> file,
                                                  const KernelTable& kernels,
                                                  const ModelLoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  const GgufFile& file() const { return *file_; }
  const KernelTable& kernels() const { return *kernels_; }
  // Bytes of matrices repacked at load (held in owned memory, beside the file mapping).
  uint64_t repacked_bytes() const { return repacked_bytes_; }

  // Runs the forward pass for every token of the batch, writing K/V into each token's
  // sequence and the logits of the tokens with want_logits, in batch order, to `logits`
  // ([n_wanted, n_vocab]; must hold at least that many floats). The sequences' tables are
  // `kv` (one SeqKv per sequence in the batch, each already covering the positions the batch
  // writes; extra entries are ignored); nothing is allocated from the ordinary store.
  // The normalised final hidden states of the tokens with want_hidden go to `hidden`, in
  // batch order ([n_hidden, n_embd]; must hold that many floats).
  Status Eval(std::span<const BatchToken> batch, std::span<const SeqKv> kv, LlamaContext& ctx,
              ComputePool& pool, std::span<float> logits, std::span<float> hidden = {}) const;
  // The same over the context's own block tables, grown as the batch needs (all or nothing)
  // and lengthened after it. InvalidArgument when the caller owns the context's blocks.
  Status Eval(std::span<const BatchToken> batch, LlamaContext& ctx, ComputePool& pool,
              std::span<float> logits, std::span<float> hidden = {}) const;

 private:
  LlamaModel(std::unique_ptr<GgufFile> file, const KernelTable& kernels)
      : file_(std::move(file)), kernels_(&kernels) {}

  // Fills the scratch's seq_next / seq_view for the batch.
  Status ValidateBatch(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                       LlamaContext& ctx, int64_t* n_wanted) const;
  Status CheckLogits(std::span<float> logits, int64_t n_wanted) const;
  Status CheckBlockTables(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                          LlamaContext& ctx) const;
  Status CheckWindowBlocks(std::span<const BatchToken> batch, std::span<const SeqKv> kv,
                           LlamaContext& ctx) const;
  // One step of at most max_batch_tokens tokens; logits rows go to `logits`.
  void EvalStep(std::span<const BatchToken> step, LlamaContext& ctx, ComputePool& pool,
                float* logits, float* hidden) const;
  void OutputHidden(std::span<const BatchToken> step, LlamaContext& ctx, float* hidden) const;
  void Embed(std::span<const BatchToken> step, LlamaContext& ctx) const;
  void NormAndProjectQkv(const LlamaLayerWeights& w, int64_t n, LlamaContext& ctx,
                         ComputePool& pool) const;
  void PositionAndCache(int64_t il, std::span<const BatchToken> step, LlamaContext& ctx) const;
  void GateUp(const FfnWeights& f, int64_t n_ff, const float* in, int64_t n,
              const NormHook* norm, LlamaContext& ctx, ComputePool& pool) const;
  void NormAndMixExperts(const LlamaLayerWeights& w, int64_t n, LlamaContext& ctx,
                         ComputePool& pool) const;
  void RouteTokens(int64_t n, LlamaContext& ctx) const;
  void Project(const WeightMatrix& w, const float* in, int64_t n, float* y, int64_t ld,
               ComputePool& pool) const;
  void Attend(int64_t il, std::span<const BatchToken> step, LlamaContext& ctx,
              ComputePool& pool) const;
  void OutputLogits(std::span<const BatchToken> step, LlamaContext& ctx, ComputePool& pool,
                    float* logits) const;

  std::unique_ptr<GgufFile> file_;
  const KernelTable* kernels_;
  ModelConfig config_;
  LlamaWeights weights_;
  Status RepackMatrices(bool fuse_gate_up);

  HugePageBuffer repacked_;  // every repacked matrix, 64-byte aligned
  uint64_t repacked_bytes_ = 0;
};

}  // namespace lifeline
