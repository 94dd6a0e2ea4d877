#include "serving/model_drafter.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace lifeline::serving {

namespace {
using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

Status CheckSameVocab(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab()) {
    return InvalidArgument("draft: vocabulary of " + std::to_string(draft.n_vocab()) +
                           " tokens, the target's has " + std::to_string(target.n_vocab()) +
                           " (a draft must share the target's vocabulary)");
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    const std::string a = target.TokenToPiece(id, /*render_special=*/true);
    const std::string b = draft.TokenToPiece(id, /*render_special=*/true);
    if (a != b) {
      return InvalidArgument("draft: token " + std::to_string(id) + " differs from the target's (" +
                             std::to_string(b.size()) + " vs " + std::to_string(a.size()) +
                             " bytes; a draft must share the target's vocabulary)");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::Create(std::unique_ptr<LlamaModel> model,
                                                           ComputePool& pool,
                                                           const ModelDrafterOptions& options) {
  if (model == nullptr) return InvalidArgument("draft: no model");
  if (options.max_sequences < 1) {
    return InvalidArgument("draft: max_sequences " + std::to_string(options.max_sequences) + " < 1");
  }
  std::unique_ptr<ModelDrafter> d(new ModelDrafter(std::move(model), pool));
  const ModelConfig& cfg = d->model_->config();
  ContextOptions c;
  c.n_ctx = options.n_ctx;
  c.max_batch_tokens = options.max_batch_tokens;
  c.max_sequences = options.max_sequences;
  c.kv_type = options.kv_type;
  c.max_kv_bytes = options.kv_memory_bytes;
  // Blocks for every kept sequence at full context, or what the budget holds: drafting stops
  // (no draft) for a sequence that cannot get blocks, it never fails a request.
  const KvPlan plan = PlanKv(cfg, c, options.n_ctx);
  if (plan.main_block_bytes == 0 || plan.window_bytes >= options.kv_memory_bytes) {
    return ResourceExhausted("draft: kv memory " + std::to_string(options.kv_memory_bytes) +
                             " bytes holds no block of the draft's KV");
  }
  const int64_t full = static_cast<int64_t>(options.max_sequences) * KvBlocksFor(options.n_ctx);
  const auto budget = static_cast<int64_t>((options.kv_memory_bytes - plan.window_bytes) /
                                           plan.main_block_bytes);
  c.n_kv_blocks = std::max<int64_t>(1, std::min(full, budget));
  LL_ASSIGN_OR_RETURN(d->ctx_, LlamaContext::Create(cfg, c));
  d->max_sequences_ = options.max_sequences;
  d->logits_.resize(static_cast<size_t>(cfg.n_vocab));
  return d;
}

int32_t ModelDrafter::Argmax() const {
  return static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
}

bool ModelDrafter::Feed(Seq& s, std::span<const int32_t> tokens, int64_t from) {
  batch_.clear();
  for (int64_t p = from; p < static_cast<int64_t>(tokens.size()); ++p) {
    batch_.push_back({tokens[static_cast<size_t>(p)], p, s.seq,
                      p + 1 == static_cast<int64_t>(tokens.size())});
  }
  if (batch_.empty()) return false;
  if (!model_->Eval(batch_, *ctx_, pool_, logits_).ok()) return false;
  s.fed.assign(tokens.begin(), tokens.end());
  return true;
}

void ModelDrafter::Drop(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  (void)ctx_->ReleaseSequence(it->second.seq);
  seqs_.erase(it);
}

void ModelDrafter::DropLeastRecent() {
  if (seqs_.empty()) return;
  auto lru = std::min_element(seqs_.begin(), seqs_.end(), [](const auto& a, const auto& b) {
    return a.second.last_use < b.second.last_use;
  });
  Drop(lru->first);
}

void ModelDrafter::Forget(int64_t id) { Drop(id); }

std::vector<int32_t> ModelDrafter::DraftOnce(int64_t id, std::span<const int32_t> tokens,
                                             int32_t k, bool* catching_up) {
  *catching_up = false;
  auto it = seqs_.find(id);
  if (it == seqs_.end()) {
    if (static_cast<int32_t>(seqs_.size()) >= max_sequences_) DropLeastRecent();
    it = seqs_.emplace(id, Seq{ctx_->NewSequence(), {}, 0}).first;
  }
  Seq& s = it->second;
  s.last_use = ++use_clock_;
  // Keep the K/V of the longest prefix fed before that still matches, but always evaluate
  // the last token again: its logits give the first draft.
  const auto mismatch = std::mismatch(s.fed.begin(), s.fed.end(), tokens.begin(), tokens.end());
  int64_t keep = static_cast<int64_t>(mismatch.first - s.fed.begin());
  keep = std::min<int64_t>(keep, static_cast<int64_t>(tokens.size()) - 1);
  if (keep < static_cast<int64_t>(s.fed.size())) {
    if (!ctx_->TruncateSequence(s.seq, keep).ok()) return {};
    s.fed.resize(static_cast<size_t>(keep));
  }
  std::vector<int32_t> draft;
  // A long way behind (a new request's prompt): at most one chunk per step, no draft until
  // caught up, so one step never waits on the draft model's prefill of a whole prompt.
  if (static_cast<int64_t>(tokens.size()) - keep > ctx_->max_batch_tokens()) {
    *catching_up = true;
    if (!Feed(s, tokens.first(static_cast<size_t>(keep + ctx_->max_batch_tokens())), keep)) {
      *catching_up = false;
    }
    return draft;
  }
  if (!Feed(s, tokens, keep)) return draft;
  std::vector<int32_t> known(tokens.begin(), tokens.end());
  for (int32_t i = 0; i < k; ++i) {
    draft.push_back(Argmax());
    if (i + 1 == k) break;
    known.push_back(draft.back());
    if (!Feed(s, known, static_cast<int64_t>(known.size()) - 1)) return {};
  }
  return draft;
}

std::vector<int32_t> ModelDrafter::Draft(int64_t id, std::span<const int32_t> tokens,
                                         int32_t max_tokens) {
  if (max_tokens < 1 || tokens.empty()) return {};
  // The last drafted token is never fed, so positions up to tokens + k - 1 are written.
  if (static_cast<int64_t>(tokens.size()) + max_tokens > ctx_->n_ctx()) return {};
  const auto t0 = Clock::now();
  bool catching_up = false;
  std::vector<int32_t> draft = DraftOnce(id, tokens, max_tokens, &catching_up);
  if (draft.empty() && !catching_up) {
    // The state is unusable (e.g. its KV blocks ran out): start the sequence again after
    // making room, once; otherwise this request goes without drafts this step.
    Drop(id);
    DropLeastRecent();
    draft = DraftOnce(id, tokens, max_tokens, &catching_up);
    if (draft.empty() && !catching_up) Drop(id);
  }
  const double ms = MsSince(t0);
  elapsed_ms_ += ms;
  if (!draft.empty()) {
    // Per drafted token, catching up included; an EWMA that follows the machine's load.
    const double per_token = ms / static_cast<double>(draft.size());
    constexpr double kAlpha = 0.2;
    ms_per_token_ = ms_per_token_ > 0 ? ms_per_token_ + kAlpha * (per_token - ms_per_token_)
                                      : per_token;
  }
  return draft;
}

void ModelDrafter::Calibrate() {
  constexpr int64_t kContext = 16;
  constexpr int32_t kDraft = 4;
  constexpr int kRepeats = 3;
  const int64_t n_vocab = model_->config().n_vocab;
  if (n_vocab < 2 || kContext + kDraft > ctx_->n_ctx()) return;
  std::vector<int32_t> tokens;
  for (int64_t p = 0; p < kContext; ++p) tokens.push_back(static_cast<int32_t>(1 + p % (n_vocab - 1)));
  constexpr int64_t kId = -1;  // no request has a negative id
  bool catching_up = false;
  (void)DraftOnce(kId, tokens, 1, &catching_up);  // the prompt, untimed
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) {
    const auto t0 = Clock::now();
    if (DraftOnce(kId, tokens, kDraft, &catching_up).size() != static_cast<size_t>(kDraft)) break;
    ms.push_back(MsSince(t0) / kDraft);
  }
  Drop(kId);
  if (ms.size() != static_cast<size_t>(kRepeats)) return;
  std::sort(ms.begin(), ms.end());
  ms_per_token_ = ms[kRepeats / 2];
}

double ModelDrafter::TakeElapsedMs() {
  const double ms = elapsed_ms_;
  elapsed_ms_ = 0;
  return ms;
}

}  // namespace lifeline::serving
