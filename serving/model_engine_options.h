// The options of one served model (ModelEngineOptions) and its optional draft model
// (DraftModelSpec): what `lifeline serve` builds from its flags and ModelEngine::Create takes.
// Apart from model_engine.h because both halves of an engine read them: the front
// (ModelEngine: name, queue bound, default max_tokens, chat template) and the engine loop
// (EngineLoop: KV budget, step caps, threads, calibration, speculation).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/llama_context.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/scheduler.h"
#include "serving/chat_setup.h"

namespace lifeline::serving {

struct ModelEngineOptions {
  std::string name = "default";
  int threads = 2;                     // compute threads of this model's pool
  std::vector<int> pin_cpus;           // empty: unpinned; else >= threads CPU ids (ComputePool)
  int64_t n_ctx = 0;                   // positions per sequence; 0 -> min(train ctx, 4096)
  uint64_t kv_memory_bytes = 512ull << 20;  // K/V pool budget
  KvType kv_type = KvType::kF16;
  int32_t max_running = 16;            // sequences per step
  int64_t max_step_tokens = 256;       // tokens per step (decodes + prefill chunks)
  int32_t max_waiting = 64;            // queued requests before 429
  int32_t default_max_tokens = 256;    // when a request gives no max_tokens
  ChatTemplateChoice chat_template;    // {preset, file}; both "" = the GGUF's (else chatml)
  // How chat answers split into reasoning and answer: "auto" (from the chat template),
  // "none", or a format name (toolcall::ReasoningFormatName).
  std::string reasoning_format = "auto";
  // Embeddings (docs/embeddings.md): "auto" (the file's <arch>.pooling_type, else mean) or
  // mean | cls | last | rank, as llama.cpp's --pooling.
  std::string pooling = "auto";
  std::chrono::milliseconds heartbeat_stale{2000};  // Healthy() false when older
  // Released prompt prefixes the prefix cache keeps (as whole KV blocks) before new requests
  // reuse their blocks rather than touch KV memory never used before: resident KV memory
  // then levels off at the peak of blocks in use plus this, instead of growing with every
  // distinct prompt until the whole kv_memory_bytes pool is resident. < 0: unlimited.
  int64_t prefix_cache_reserve_tokens = 4096;
  // The prefix cache's tier in host RAM below the pool (serving/kv_tier.h): blocks the pool
  // evicts are kept here, up to this many bytes, and restored instead of recomputed when
  // their prefix returns. 0: off. Models with sliding-window layers have no prefix cache.
  uint64_t prefix_cache_ram_bytes = 0;
  // Keep F16 / F32 blocks in that tier as Q8_0 (1.9x / 3.8x the blocks; lossy).
  bool prefix_cache_ram_q8 = false;
  // Its disk tier (serving/kv_disk_store.h): block files under this folder, at most
  // prefix_cache_disk_bytes, kept across restarts (the pool's cached blocks are written at
  // Stop). "": off. model_file_identity names the model's folder (ModelFileIdentity).
  std::string prefix_cache_dir;
  uint64_t prefix_cache_disk_bytes = 0;
  uint64_t model_file_identity = 0;
  // Before serving, time prefill steps of a few sizes and a decode step on the engine
  // thread and feed them to SloHooks::speeds (engine_loop_calibrate.cpp), so admission
  // predicts from the first request on. Off: the estimate starts with the first requests.
  bool calibrate = false;
  // Speculative decoding by prompt lookup (scheduler/draft.h): drafted tokens per decode,
  // 0 = off; and the most verification tokens (decodes + drafts) a step may carry, above
  // which drafting stops because the step turns compute-bound. Off for models whose
  // sliding-window layers keep their own KV (a rejected draft would have advanced it).
  int32_t spec_tokens = 0;
  int64_t spec_step_tokens = SchedulerKnobs{}.spec_step_tokens;
  // Draft at every decode the step's caps allow, whatever the passes and the draft cost (no
  // cost model): for measuring acceptance and verification cost, not for serving.
  bool spec_always = false;
};

// A draft model for speculative decoding (`serve --draft`): its weights and tokenizer (which
// must match the target's vocabulary, serving/model_drafter.h). Empty: prompt lookup.
struct DraftModelSpec {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

}  // namespace lifeline::serving
