// EngineLoop::Calibrate: before serving, time a few prefill steps of different sizes and one
// decode step on the engine thread, so admission's speed estimate (slo::SpeedEstimator) has
// a fixed cost and a per-token slope from the first request on, instead of extrapolating
// whatever the first, usually tiny, request measured (a 5-token prompt's time is mostly fixed
// cost: read per token, it made a 40-token prompt look eight times slower than it is).
//
// The steps run on a scratch sequence over KV blocks 0.. (the scheduler has handed out none
// yet; the positions are forgotten afterwards), with token ids that are valid in any
// vocabulary. Sizes grow by 4x from 1 token up to 256 (capped by the step budget and the
// context) and stop early once a step takes more than kStopAfterMs, so a large model spends
// at most a second or so here; the heartbeat is refreshed between steps. While idle, a stale
// estimate is refreshed with one step (MaybeRefreshSpeed).
#include <algorithm>
#include <chrono>
#include <mutex>
#include <numeric>
#include <vector>

#include "serving/engine_loop.h"

namespace lifeline::serving {

namespace {

constexpr double kStopAfterMs = 250;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Clock::now().time_since_epoch()).count();
}

// The block table of a calibration sequence covering `n_positions`: blocks 0, 1, 2, ...
// Calibration runs before the scheduler has handed out a block, so the first blocks of the
// store are free to write (K/V written there is never read again; a request's prefill
// overwrites it).
std::vector<int32_t> FirstBlocks(int64_t n_positions) {
  std::vector<int32_t> blocks(static_cast<size_t>(KvBlocksFor(n_positions)));
  std::iota(blocks.begin(), blocks.end(), 0);
  return blocks;
}

// Models of one process calibrate one at a time: two timing their steps at once on the same
// cores each measure about half the machine (seen: an embedder beside a reranker fitted
// 1.67 ms/token instead of its 1.09 alone), and admission would then over-predict every prompt
// of both by that much until the serving steps had corrected every size class.
std::mutex& CalibrationMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

void EngineLoop::Calibrate() {
  if (slo_.speeds == nullptr) return;
  const std::lock_guard<std::mutex> one_at_a_time(CalibrationMutex());
  const int64_t n_vocab = model_.config().n_vocab;
  const int64_t max_tokens =
      std::min<int64_t>({256, options_.max_step_tokens, n_ctx_ - 1, capacity_tokens_ - 1});
  if (max_tokens < 1 || n_vocab < 2) return;
  const std::vector<int32_t> blocks = FirstBlocks(max_tokens + 1);
  // One prefill of `n` tokens from position 0 (and, with `decode`, one more token after
  // it); the time of the last Eval, or a negative value when it failed.
  auto run = [&](int64_t n, bool decode) -> double {
    const SeqId seq = ctx_->NewSequence();
    double ms = -1;
    std::vector<BatchToken> batch;
    for (int64_t p = 0; p < n; ++p) {
      batch.push_back({static_cast<int32_t>(1 + p % (n_vocab - 1)), p, seq, p == n - 1});
    }
    SeqKv kv{seq, blocks, 0};
    auto t0 = Clock::now();
    Status s = model_.Eval(batch, std::span<const SeqKv>(&kv, 1), *ctx_, *pool_, logits_);
    if (s.ok() && decode) {
      const BatchToken next{1, n, seq, true};
      kv.n_tokens = n;
      t0 = Clock::now();
      s = model_.Eval(std::span<const BatchToken>(&next, 1), std::span<const SeqKv>(&kv, 1),
                       *ctx_, *pool_, logits_);
    }
    if (s.ok()) ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    (void)ctx_->ReleaseSequence(seq);
    shared_.heartbeat_ns.store(Clock::now().time_since_epoch().count());
    return ms;
  };
  if (run(1, false) < 0) return;  // warm-up: first touches of weights and scratch
  // 1, 4, 16, ... and then max_tokens itself (a size that is not a power of four would
  // otherwise be skipped; deriving the next size from max_tokens / 4 looped forever when that
  // quotient times four fell short of max_tokens again, e.g. a context of 64).
  for (int64_t n = 1;;) {
    const double ms = run(n, false);
    if (ms <= 0) break;
    slo_.speeds->ObservePrefill(n, ms, NowUs());
    if (ms > kStopAfterMs || n >= max_tokens) break;
    n = std::min(n * 4, max_tokens);
  }
  const double decode_ms = run(std::min<int64_t>(16, max_tokens - 1 > 0 ? max_tokens - 1 : 1),
                               true);
  if (decode_ms > 0) slo_.speeds->ObserveDecode(decode_ms, NowUs());
}

// The speed estimate of an idle model was measured when the machine may have been quieter
// (or busier): models share the CPUs, and a neighbour's load slows every step. So while idle,
// once the estimate has gone stale (admission.speed_stale_ms without a measurement), time one
// prefill step of kRefreshTokens on scratch KV blocks: SpeedEstimator rescales its whole fit
// by that step's ratio to the stale prediction. A few tens of ms every few seconds.
void EngineLoop::MaybeRefreshSpeed() {
  if (slo_.speeds == nullptr || !options_.calibrate || !slo_.speeds->Stale(NowUs())) return;
  constexpr int64_t kRefreshTokens = 32;
  const int64_t n_vocab = model_.config().n_vocab;
  const int64_t n = std::min<int64_t>({kRefreshTokens, options_.max_step_tokens, n_ctx_ - 1});
  if (n < 1 || n_vocab < 2) return;
  const std::span<const BlockId> table = scheduler_->AllocateScratch(n);
  if (table.empty()) return;
  const std::vector<int32_t> blocks(table.begin(), table.end());
  const SeqId seq = ctx_->NewSequence();
  std::vector<BatchToken> batch;
  for (int64_t p = 0; p < n; ++p) {
    batch.push_back({static_cast<int32_t>(1 + p % (n_vocab - 1)), p, seq, p == n - 1});
  }
  const SeqKv kv{seq, blocks, 0};
  const auto t0 = Clock::now();
  const Status s = model_.Eval(batch, std::span<const SeqKv>(&kv, 1), *ctx_, *pool_, logits_);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  (void)ctx_->ReleaseSequence(seq);
  scheduler_->FreeScratch();
  shared_.heartbeat_ns.store(Clock::now().time_since_epoch().count());
  if (s.ok()) {
    slo_.speeds->ObservePrefill(n, ms, NowUs());
    ++speed_refreshes_;
    PublishSnapshot();
  }
}

void EngineLoop::CalibrateSpeculation() {
  if (drafter_ != nullptr) drafter_->Calibrate();
  if (options_.spec_always) return;  // no cost model: every decode is drafted
  const int64_t cap = std::min<int64_t>(options_.spec_step_tokens, 16);
  constexpr int64_t kContext = 32;  // positions before the timed passes (attention reads them)
  constexpr int kRepeats = 5;
  const int64_t n_vocab = model_.config().n_vocab;
  if (kContext + cap > n_ctx_ || kContext + cap > capacity_tokens_ || n_vocab < 2) return;
  if (static_cast<int64_t>(logits_.size()) < cap * n_vocab) return;
  const std::vector<int32_t> blocks = FirstBlocks(kContext + cap);
  const SeqId seq = ctx_->NewSequence();
  SeqKv kv{seq, blocks, 0};
  std::vector<BatchToken> batch;
  for (int64_t p = 0; p < kContext; ++p) {
    batch.push_back({static_cast<int32_t>(1 + p % (n_vocab - 1)), p, seq, p == kContext - 1});
  }
  std::vector<double> cost;
  if (model_.Eval(batch, std::span<const SeqKv>(&kv, 1), *ctx_, *pool_, logits_).ok()) {
    kv.n_tokens = kContext;
    for (int64_t n = 1; n <= cap; ++n) {
      batch.clear();
      for (int64_t i = 0; i < n; ++i) batch.push_back({1, kContext + i, seq, true});
      std::vector<double> ms;
      for (int r = 0; r < kRepeats; ++r) {
        const auto t0 = Clock::now();
        if (!model_.Eval(batch, std::span<const SeqKv>(&kv, 1), *ctx_, *pool_, logits_).ok()) break;
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      if (ms.size() != kRepeats) break;
      std::sort(ms.begin(), ms.end());
      cost.push_back(ms[kRepeats / 2]);
    }
  }
  (void)ctx_->ReleaseSequence(seq);
  shared_.heartbeat_ns.store(Clock::now().time_since_epoch().count());
  if (static_cast<int64_t>(cost.size()) != cap) return;  // no model: drafts as if passes were free
  scheduler_->SetSpecCost(std::move(cost));
}

void EngineLoop::ObserveSpecCost(const StepPlan& plan, double eval_ms) {
  for (const StepEntry& e : plan.entries) {
    if (!e.is_decode) return;  // a prefill chunk's step says nothing about decode passes
  }
  scheduler_->ObserveSpecCost(plan.n_tokens, eval_ms);
}

}  // namespace lifeline::serving
