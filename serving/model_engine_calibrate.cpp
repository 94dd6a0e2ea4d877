// ModelEngine::Calibrate: before serving, time a few prefill steps of different sizes and one
// decode step on the engine thread, so admission's speed estimate (slo::SpeedEstimator) has
// a fixed cost and a per-token slope from the first request on, instead of extrapolating
// whatever the first, usually tiny, request measured (a 5-token prompt's time is mostly fixed
// cost: read per token, it made a 40-token prompt look eight times slower than it is).
//
// The steps run on a scratch sequence over KV blocks 0.. (the scheduler has handed out none
// yet; the positions are forgotten afterwards), with token ids that are valid in any
// vocabulary. Sizes grow by 4x from 1 token up to 256 (capped by the step budget and the
// context) and stop early once a step takes more than kStopAfterMs, so a large model spends
// at most a second or so here; the heartbeat is refreshed between steps.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "serving/model_engine.h"

namespace lifeline::serving {

namespace {

constexpr double kStopAfterMs = 250;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Clock::now().time_since_epoch()).count();
}

}  // namespace

void ModelEngine::Calibrate() {
  if (slo_.speeds == nullptr) return;
  const int64_t n_vocab = model_->config().n_vocab;
  const int64_t max_tokens =
      std::min<int64_t>({256, options_.max_step_tokens, n_ctx_ - 1, capacity_tokens_ - 1});
  if (max_tokens < 1 || n_vocab < 2) return;
  // Calibration runs before the scheduler has handed out a block, so the first blocks of
  // the store are free to write: a table of blocks 0, 1, 2, ... (K/V written there is never
  // read again; a request's prefill overwrites it).
  std::vector<int32_t> blocks(static_cast<size_t>(KvBlocksFor(max_tokens + 1)));
  std::iota(blocks.begin(), blocks.end(), 0);
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
    Status s = model_->Eval(batch, std::span<const SeqKv>(&kv, 1), *ctx_, *pool_, logits_);
    if (s.ok() && decode) {
      const BatchToken next{1, n, seq, true};
      kv.n_tokens = n;
      t0 = Clock::now();
      s = model_->Eval(std::span<const BatchToken>(&next, 1), std::span<const SeqKv>(&kv, 1),
                       *ctx_, *pool_, logits_);
    }
    if (s.ok()) ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    (void)ctx_->ReleaseSequence(seq);
    heartbeat_ns_.store(Clock::now().time_since_epoch().count());
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

}  // namespace lifeline::serving
