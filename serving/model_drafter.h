// ModelDrafter: speculative decoding's drafts from a second, smaller model of the same
// vocabulary (`serve --draft`), e.g. a Q4_0 re-quantization of a Q8_0 target. For a decode
// the scheduler chose to draft k tokens for, it brings its own copy of the request's sequence
// up to date (only the tokens it has not seen: the previous step's accepted draft and the
// target's own token, or the whole prompt the first time), then decodes k tokens greedily.
// Greedy drafts are one fixed guess per position, so the engine's rule -- sample the target
// at each drafted position, keep the draft while the sample equals it -- leaves the sampled
// distribution exactly the target's at any temperature; the draft model decides only how
// many tokens one target pass yields.
//
// Its KV is its own (a LlamaContext with its own block books, one sequence per request, at
// most max_sequences kept; the least recently drafted is dropped for a new one). A backlog
// longer than one chunk (max_batch_tokens, e.g. a new request's prompt) is fed one chunk per
// call with no draft until it is caught up, so no step waits on a whole prompt. Positions
// of rejected drafts are truncated at the next call by comparing what it fed with the
// request's tokens.
//
// Ownership: owns the draft model and its context; borrows the compute pool (the engine's,
// which must outlive it). Thread-safety: the engine thread only (Scheduler::Schedule).
// Failure: Create refuses a draft of another vocabulary (CheckSameVocab) or whose KV does not
// fit; a failed draft evaluation drops that request's draft state and yields no draft (the
// target then decodes one token, as without speculation).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/kernels/compute_pool.h"
#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/draft.h"

namespace lifeline::serving {

// OK when both tokenizers have the same number of tokens and the same text for every id
// (special tokens included); else InvalidArgument naming the first difference.
Status CheckSameVocab(const Tokenizer& target, const Tokenizer& draft);

struct ModelDrafterOptions {
  int64_t n_ctx = 4096;              // positions per sequence (the target's context)
  int32_t max_sequences = 16;        // requests whose draft KV is kept at once
  uint64_t kv_memory_bytes = 256ull << 20;  // cap on the draft's KV memory
  KvType kv_type = KvType::kF16;
  int64_t max_batch_tokens = 64;     // catch-up chunk (a new request's prompt goes in these)
};

class ModelDrafter final : public Drafter {
 public:
  static Result<std::unique_ptr<ModelDrafter>> Create(std::unique_ptr<LlamaModel> model,
                                                      ComputePool& pool,
                                                      const ModelDrafterOptions& options);

  std::vector<int32_t> Draft(int64_t id, std::span<const int32_t> tokens,
                             int32_t max_tokens) override;
  void Forget(int64_t id) override;
  double ms_per_token() const override { return ms_per_token_; }

  // Times a few greedy decodes of a short dummy sequence into ms_per_token (before serving).
  void Calibrate();
  // Wall time spent in Draft since the last call (the engine charges it to the step).
  double TakeElapsedMs();
  int64_t sequences_kept() const { return static_cast<int64_t>(seqs_.size()); }
  const LlamaModel& model() const { return *model_; }

 private:
  ModelDrafter(std::unique_ptr<LlamaModel> model, ComputePool& pool)
      : model_(std::move(model)), pool_(pool) {}

  struct Seq {
    SeqId seq = 0;
    std::vector<int32_t> fed;  // tokens whose K/V the draft context holds, in order
    uint64_t last_use = 0;
  };
  // Evaluates tokens [from, tokens.size()) of s at their positions; logits_ then holds the
  // last one's. False (state unusable) on an evaluation error.
  bool Feed(Seq& s, std::span<const int32_t> tokens, int64_t from);
  // The draft, or none: *catching_up says whether that is because the state is still being
  // fed a long backlog (one chunk per call) rather than because it failed.
  std::vector<int32_t> DraftOnce(int64_t id, std::span<const int32_t> tokens, int32_t k,
                                 bool* catching_up);
  void Drop(int64_t id);
  void DropLeastRecent();  // the kept sequence drafted for longest ago (none kept: nothing)
  int32_t Argmax() const;

  std::unique_ptr<LlamaModel> model_;
  ComputePool& pool_;
  std::unique_ptr<LlamaContext> ctx_;
  int32_t max_sequences_ = 1;
  std::unordered_map<int64_t, Seq> seqs_;
  uint64_t use_clock_ = 0;
  std::vector<BatchToken> batch_;
  std::vector<float> logits_;  // [n_vocab]
  double ms_per_token_ = 0;
  double elapsed_ms_ = 0;
};

}  // namespace lifeline::serving
