// bench-model: llama-bench-style prompt-processing (pp) and text-generation (tg) throughput
// of one model, with the decode roofline from measured bandwidth and weight bytes per token.
//
// pp: a fresh sequence evaluates `n_prompt` tokens in one batch (logits for the last only).
// tg: a fresh sequence generates `n_gen` tokens one at a time (batch 1, as llama-bench does).
// Token ids are fixed pseudo-random ids < n_vocab: the work does not depend on their values.
//
// Ownership: borrows the model and pool. Thread-safety: one caller.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/op_profile.h"
#include "engine/model/llama_model.h"

namespace lifeline {

struct ModelBenchOptions {
  int64_t n_prompt = 512;  // 0 skips pp
  int64_t n_gen = 128;     // 0 skips tg
  // Context already in the sequence before each timed pp / tg run (llama-bench's -d): the
  // runs then read n_depth positions of K/V more per token, as a long conversation does. The
  // fill is computed untimed before every run.
  int64_t n_depth = 0;
  int reps = 5;
  KvType kv_type = KvType::kF16;
  // Installed (op_profile.h) around the tg runs only; its entries are then the decode
  // products of n_gen * reps tokens.
  OpProfile* tg_profile = nullptr;
  // Installed around the pp runs only: the prefill products and stages of n_prompt * reps
  // prompt tokens.
  OpProfile* pp_profile = nullptr;
  // Optional: called just before and just after each tg run (never while one is timed); its
  // values (GB/s of a bandwidth probe) go to ModelBenchResult::tg_bandwidth_gb_per_s, so
  // each run has a reference measured beside it.
  std::function<double()> bandwidth_sample;
  // Verification steps (speculative decoding): for each k, the time of one forward pass over
  // k tokens of one sequence with logits for all k, continuing a verify_context-token
  // context and rolled back after each pass (as rejected drafts are). k = 1 is a decode step.
  std::vector<int64_t> verify_k;
  int64_t verify_context = 128;
  int verify_steps = 16;  // passes per k and repetition
};

struct VerifyCost {
  int64_t k = 0;
  std::vector<double> step_ms;  // median pass time of each repetition
  double median_ms = 0;
};

struct ThroughputStats {
  std::vector<double> tokens_per_s;  // one per repetition
  double median = 0, mean = 0, stddev = 0, min = 0, max = 0;
};

struct ModelBenchResult {
  ThroughputStats pp;
  ThroughputStats tg;
  double tg_seconds = 0;  // wall time of all tg runs (the profile's entries are a part of it)
  double pp_seconds = 0;  // wall time of all pp runs
  // bandwidth_sample just before tg run i is [2 i], just after it [2 i + 1] (empty without
  // the callback).
  std::vector<double> tg_bandwidth_gb_per_s;
  uint64_t weight_bytes_per_token = 0;  // matrices read once per decoded token (MoE: active)
  uint64_t expert_bytes = 0;            // all experts' matrices (MoE), 0 for dense models
  uint64_t model_bytes = 0;             // all tensor data
  uint64_t n_params = 0;
  int64_t n_expert = 0, n_expert_used = 0;
  std::vector<VerifyCost> verify;  // in verify_k's order
};

// Bytes of weights a batch-1 decode step streams: every layer matrix plus the output matrix
// (the embedding contributes one row, ignored); of a mixture of experts, the router, the
// shared expert and n_expert_used experts per layer (the active weights), not all experts.
uint64_t WeightBytesPerToken(const LlamaModel& model);
// Bytes of all experts' matrices (0 for a dense model).
uint64_t ExpertBytes(const LlamaModel& model);

Result<ModelBenchResult> RunModelBench(const LlamaModel& model, ComputePool& pool,
                                       const ModelBenchOptions& opts);

ThroughputStats Summarize(std::vector<double> samples);

}  // namespace lifeline
