// The seam between ModelEngine's two halves (the front on the callers' threads, the EngineLoop
// on its own thread), on the real stories260K model:
//   - before Start, the front already reads what the loop published at creation: the step
//     caps on the load board, the KV pool in the snapshot; and it is not healthy (no thread);
//   - a request crosses the inbox and the shared counters come back to zero: the open count
//     is lowered before the terminal event, the queue counters when the choice is scheduled,
//     and the idle load is published once the last request has ended;
//   - Stop ends the loop's thread: the front turns unhealthy and refuses (503 shutting_down),
//     and a second Stop returns;
//   - creation errors from both halves, the KV budget's first (it is sized before the loop's
//     own options are checked, as before the split).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_engine.h"
#include "stories_engine.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;
using api::GenerationEvent;

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerationEvent> events;
  int terminals = 0;
  int64_t open_at_terminal = -1;  // the engine's OpenRequests() when the terminal event came
  const ModelEngine* engine = nullptr;

  api::GenerationSink Sink() {
    return [this](GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.terminal()) {
        ++terminals;
        if (engine != nullptr) open_at_terminal = engine->OpenRequests();
      }
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, 60s, [&] { return terminals > 0; })) {
      api::ApiError e;
      e.code = "timeout";
      return GenerationEvent::Error(e);
    }
    return events.back();
  }
};

ModelEngineOptions Options() {
  ModelEngineOptions o;
  o.name = "m";
  o.max_running = 4;
  o.max_step_tokens = 64;
  o.chat_template.preset = "chatml";
  return o;
}

api::GenerationRequest Completion(std::string prompt, int32_t max_tokens) {
  api::GenerationRequest r;
  r.model = "m";
  r.prompts = {api::PromptInput{std::move(prompt), {}, false}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

TEST(EngineSplit, BeforeStartTheFrontReadsWhatTheLoopPublishedAtCreation) {
  auto e = lifeline::testing::MakeStoriesEngine(Options());
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->Healthy());  // no engine thread yet
  const slo::QueueLoad l = e->Load(NowUs());
  EXPECT_EQ(l.max_running, 4);
  EXPECT_EQ(l.step_token_budget, 64);
  EXPECT_EQ(l.queued_requests, 0);
  EXPECT_EQ(l.open_requests, 0);
  EXPECT_EQ(l.running_sequences, 0);
  EXPECT_EQ(l.step_left_ms, 0.0);
  const EngineSnapshot s = e->Snapshot();
  EXPECT_GT(s.kv_blocks_total, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(s.steps, 0);
}

TEST(EngineSplit, ARequestCrossesTheInboxAndTheCountersReturnToZero) {
  auto e = lifeline::testing::MakeStoriesEngine(Options());
  ASSERT_NE(e, nullptr);
  e->Start();
  EXPECT_TRUE(e->Healthy());
  Collector c;
  c.engine = e.get();
  ASSERT_FALSE(e->Submit(1, Completion("Once upon a time", 4), c.Sink()).has_value());
  const GenerationEvent done = c.Wait();
  ASSERT_EQ(done.kind, GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.terminals, 1);
  // Lowered by the loop before it sent the event, so admission never counts an answered request.
  EXPECT_EQ(c.open_at_terminal, 0);
  EXPECT_EQ(e->OpenRequests(), 0);
  EXPECT_EQ(e->QueuedRequests(), 0);
  EXPECT_EQ(e->QueuedPromptTokens(), 0);

  // The step that ended the request also published the idle load, then the snapshot.
  EngineSnapshot s;
  for (int i = 0; i < 2000; ++i) {
    s = e->Snapshot();
    if (s.live_requests == 0 && s.generation_tokens == done.usage.completion_tokens) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(s.live_requests, 0);
  EXPECT_EQ(s.generation_tokens, done.usage.completion_tokens);
  EXPECT_EQ(s.prompt_tokens, done.usage.prompt_tokens);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  const slo::QueueLoad l = e->Load(NowUs());
  EXPECT_EQ(l.queued_requests, 0);
  EXPECT_EQ(l.queued_prefill_tokens, 0);
  EXPECT_EQ(l.queued_decode_tokens, 0);
  EXPECT_EQ(l.running_sequences, 0);
  EXPECT_EQ(l.running_decodes, 0);
  EXPECT_EQ(l.running_prefill_tokens, 0);
  EXPECT_EQ(l.step_left_ms, 0.0);
  EXPECT_EQ(l.max_running, 4);
  EXPECT_TRUE(e->Healthy());
}

TEST(EngineSplit, StopEndsTheLoopAndTheFrontRefuses) {
  auto e = lifeline::testing::MakeStoriesEngine(Options());
  ASSERT_NE(e, nullptr);
  e->Start();
  EXPECT_TRUE(e->Healthy());
  e->Stop();
  EXPECT_FALSE(e->Healthy());
  Collector c;
  const auto err = e->Submit(1, Completion("Once upon a time", 4), c.Sink());
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code, "shutting_down");
  EXPECT_EQ(e->QueuedRequests(), 0);  // the refused request left no count behind
  EXPECT_EQ(e->OpenRequests(), 0);
  e->Stop();  // idempotent
  EXPECT_EQ(c.terminals, 0);
}

// The stories model and tokenizer, for Create with options MakeStoriesEngine would override.
struct Loaded {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded LoadStories() {
  Loaded out;
  auto file = GgufFile::Open(lifeline::testing::SharedPath("models/stories260K.gguf"),
                             GgufOpenOptions{});
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return out;
  auto tok = Tokenizer::FromGguf(**file);
  auto model = LlamaModel::Load(std::move(file).value(), ReferenceKernels());
  EXPECT_TRUE(tok.ok() && model.ok());
  if (!tok.ok() || !model.ok()) return out;
  out.model = std::move(model).value();
  out.tokenizer = std::move(tok).value();
  return out;
}

Status CreateWith(const ModelEngineOptions& o) {
  Loaded l = LoadStories();
  if (l.model == nullptr) return Internal("stories260K did not load");
  auto e = ModelEngine::Create(std::move(l.model), std::move(l.tokenizer), o);
  return e.ok() ? Status::Ok() : e.status();
}

TEST(EngineSplit, CreationErrorsComeFromBothHalvesKvBudgetFirst) {
  ModelEngineOptions o = Options();
  o.threads = 1;
  o.kv_memory_bytes = 64 << 10;  // a few blocks, not one full context of 2048 positions
  Status s = CreateWith(o);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("kv-memory: 65536 bytes hold"), std::string::npos) << s.message();

  o.kv_memory_bytes = 8ull << 20;
  o.spec_step_tokens = 0;  // the loop's own check, after the scheduler exists
  s = CreateWith(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("spec-step-tokens: 0"), std::string::npos) << s.message();

  o.kv_memory_bytes = 64 << 10;  // both wrong: the KV budget is sized (and refused) first
  s = CreateWith(o);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("kv-memory: 65536 bytes hold"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lifeline::serving
