#include "bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "bench/bandwidth_probe.h"  // MedianOf
#include "engine/model/llama_context.h"

namespace lifeline {
namespace {

uint64_t MatrixBytes(const WeightMatrix& w) { return static_cast<uint64_t>(w.rows) * w.row_bytes; }

std::vector<int32_t> BenchTokens(int64_t n, int64_t n_vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (auto& id : ids) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    id = static_cast<int32_t>(x % static_cast<uint64_t>(n_vocab));
  }
  return ids;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {

uint64_t FfnBytes(const FfnWeights& f) {
  return MatrixBytes(f.w_gate) + MatrixBytes(f.w_up) + MatrixBytes(f.w_down);
}

}  // namespace

uint64_t WeightBytesPerToken(const LlamaModel& model) {
  const LlamaWeights& w = model.weights();
  const ModelConfig& c = model.config();
  uint64_t bytes = MatrixBytes(w.output);
  for (const auto& l : w.layers) {
    bytes += MatrixBytes(l.wq) + MatrixBytes(l.wk) + MatrixBytes(l.wv) + MatrixBytes(l.wo) +
             FfnBytes(l.dense()) + MatrixBytes(l.ffn_gate_inp) + FfnBytes(l.shexp);
    // A decode step reads exactly n_expert_used experts of each layer (all of one size).
    if (!l.experts.empty()) {
      bytes += static_cast<uint64_t>(c.n_expert_used) * FfnBytes(l.experts.front());
    }
  }
  return bytes;
}

uint64_t ExpertBytes(const LlamaModel& model) {
  uint64_t bytes = 0;
  for (const auto& l : model.weights().layers) {
    for (const FfnWeights& e : l.experts) bytes += FfnBytes(e);
  }
  return bytes;
}

ThroughputStats Summarize(std::vector<double> samples) {
  ThroughputStats s;
  s.tokens_per_s = samples;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = MedianOf(samples);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : samples) var += (v - s.mean) * (v - s.mean);
  s.stddev = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

// Passes of k tokens after a fixed context, each rolled back (TruncateSequence) so every pass
// sees the same context length; the k values alternate inside each repetition so a drift of
// the machine's speed touches all of them alike.
static Status MeasureVerify(const LlamaModel& model, ComputePool& pool, const ModelBenchOptions& opts,
                            ModelBenchResult* out) {
  if (opts.verify_k.empty()) return Status::Ok();
  const ModelConfig& cfg = model.config();
  const int64_t max_k = *std::max_element(opts.verify_k.begin(), opts.verify_k.end());
  if (*std::min_element(opts.verify_k.begin(), opts.verify_k.end()) < 1 || max_k > 64) {
    return InvalidArgument("bench-model: --verify-k values must be in [1, 64]");
  }
  ContextOptions copts;
  copts.n_ctx = opts.verify_context + max_k + 1;
  copts.max_batch_tokens = std::max<int64_t>(opts.verify_context, max_k);
  copts.kv_type = opts.kv_type;
  LL_ASSIGN_OR_RETURN(auto ctx, LlamaContext::Create(cfg, copts));
  std::vector<float> logits(static_cast<size_t>(max_k * cfg.n_vocab));
  const SeqId seq = ctx->NewSequence();
  const std::vector<int32_t> ids = BenchTokens(opts.verify_context + max_k, cfg.n_vocab);
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i < opts.verify_context; ++i) batch.push_back({ids[i], i, seq, false});
  batch.back().want_logits = true;
  LL_RETURN_IF_ERROR(model.Eval(batch, *ctx, pool, logits));
  out->verify.assign(opts.verify_k.size(), {});
  for (size_t j = 0; j < opts.verify_k.size(); ++j) out->verify[j].k = opts.verify_k[j];
  for (int rep = 0; rep < opts.reps; ++rep) {
    for (VerifyCost& v : out->verify) {
      batch.clear();
      for (int64_t i = 0; i < v.k; ++i) {
        const int64_t pos = opts.verify_context + i;
        batch.push_back({ids[static_cast<size_t>(pos)], pos, seq, true});
      }
      std::vector<double> ms;
      for (int step = 0; step < opts.verify_steps; ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        LL_RETURN_IF_ERROR(model.Eval(batch, *ctx, pool, logits));
        ms.push_back(Seconds(t0) * 1e3);
        LL_RETURN_IF_ERROR(ctx->TruncateSequence(seq, opts.verify_context));
      }
      v.step_ms.push_back(MedianOf(ms));
    }
  }
  for (VerifyCost& v : out->verify) v.median_ms = MedianOf(v.step_ms);
  return ctx->ReleaseSequence(seq);
}

Result<ModelBenchResult> RunModelBench(const LlamaModel& model, ComputePool& pool,
                                       const ModelBenchOptions& opts) {
  const ModelConfig& cfg = model.config();
  if (opts.n_prompt < 0 || opts.n_gen < 0 || opts.reps < 1 || opts.n_depth < 0) {
    return InvalidArgument("bench-model: -p, -n and -d must be >= 0 and -r >= 1");
  }
  ContextOptions copts;
  copts.n_ctx = opts.n_depth + std::max<int64_t>(opts.n_prompt + 1, opts.n_gen + 1);
  // The depth is filled in chunks of at most 512 positions (or the pp size when larger).
  constexpr int64_t kFillChunk = 512;
  copts.max_batch_tokens = std::max<int64_t>({1, opts.n_prompt, std::min(opts.n_depth, kFillChunk)});
  copts.kv_type = opts.kv_type;
  LL_ASSIGN_OR_RETURN(auto ctx, LlamaContext::Create(cfg, copts));
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));  // [1, n_vocab]

  ModelBenchResult out;
  out.weight_bytes_per_token = WeightBytesPerToken(model);
  out.expert_bytes = ExpertBytes(model);
  out.n_expert = cfg.n_expert;
  out.n_expert_used = cfg.n_expert_used;
  for (const auto& t : model.file().tensors()) {
    out.model_bytes += t.size_bytes;
    out.n_params += t.n_elements();
  }

  // One short warm-up pass: page in the weights, spin up the pool.
  {
    const SeqId seq = ctx->NewSequence();
    const std::vector<int32_t> ids = BenchTokens(std::min<int64_t>(8, copts.n_ctx - 1), cfg.n_vocab);
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.push_back({ids[i], static_cast<int64_t>(i), seq, i + 1 == ids.size()});
    }
    LL_RETURN_IF_ERROR(model.Eval(batch, *ctx, pool, logits));
    LL_RETURN_IF_ERROR(ctx->ReleaseSequence(seq));
  }

  // A new sequence holding n_depth positions of context (untimed).
  const std::vector<int32_t> depth_ids = BenchTokens(opts.n_depth, cfg.n_vocab);
  auto deep_sequence = [&]() -> Result<SeqId> {
    const SeqId seq = ctx->NewSequence();
    for (int64_t start = 0; start < opts.n_depth; start += copts.max_batch_tokens) {
      const int64_t end = std::min(opts.n_depth, start + copts.max_batch_tokens);
      std::vector<BatchToken> batch;
      for (int64_t i = start; i < end; ++i) batch.push_back({depth_ids[i], i, seq, i + 1 == end});
      LL_RETURN_IF_ERROR(model.Eval(batch, *ctx, pool, logits));
    }
    return seq;
  };
  const int64_t d = opts.n_depth;

  std::vector<double> pp, tg;
  for (int rep = 0; rep < opts.reps; ++rep) {
    if (opts.n_prompt > 0) {
      LL_ASSIGN_OR_RETURN(const SeqId seq, deep_sequence());
      const std::vector<int32_t> ids = BenchTokens(opts.n_prompt, cfg.n_vocab);
      std::vector<BatchToken> batch;
      for (int64_t i = 0; i < opts.n_prompt; ++i) {
        batch.push_back({ids[i], d + i, seq, i + 1 == opts.n_prompt});
      }
      SetOpProfile(opts.pp_profile);
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = model.Eval(batch, *ctx, pool, logits);
      const double seconds = Seconds(t0);
      SetOpProfile(nullptr);
      LL_RETURN_IF_ERROR(st);
      out.pp_seconds += seconds;
      pp.push_back(static_cast<double>(opts.n_prompt) / seconds);
      LL_RETURN_IF_ERROR(ctx->ReleaseSequence(seq));
    }
    if (opts.n_gen > 0) {
      LL_ASSIGN_OR_RETURN(const SeqId seq, deep_sequence());
      const std::vector<int32_t> ids = BenchTokens(opts.n_gen, cfg.n_vocab);
      if (opts.bandwidth_sample) out.tg_bandwidth_gb_per_s.push_back(opts.bandwidth_sample());
      SetOpProfile(opts.tg_profile);
      const auto t0 = std::chrono::steady_clock::now();
      Status st;
      for (int64_t i = 0; i < opts.n_gen && st.ok(); ++i) {
        const BatchToken tok{ids[i], d + i, seq, true};
        st = model.Eval({&tok, 1}, *ctx, pool, logits);
      }
      const double seconds = Seconds(t0);
      SetOpProfile(nullptr);
      if (opts.bandwidth_sample) out.tg_bandwidth_gb_per_s.push_back(opts.bandwidth_sample());
      LL_RETURN_IF_ERROR(st);
      out.tg_seconds += seconds;
      tg.push_back(static_cast<double>(opts.n_gen) / seconds);
      LL_RETURN_IF_ERROR(ctx->ReleaseSequence(seq));
    }
  }
  out.pp = Summarize(std::move(pp));
  out.tg = Summarize(std::move(tg));
  LL_RETURN_IF_ERROR(MeasureVerify(model, pool, opts, &out));
  return out;
}

}  // namespace lifeline
