// The SLO features inside one ModelEngine's loop, on the real stories260K model with knobs
// published by hand on a KnobBoard (the controller's channel), so every ladder level and
// batching window is set deterministically:
//   - published batch limits reach the scheduler (no step runs more sequences);
//   - the batching window holds an idle engine's admission until a preferred size is reached
//     or the delay has passed;
//   - at level >= 1 a started request whose deadline passes ends at once as "length" with the
//     `lifeline` extension {truncated, reason "deadline"}; at level 0 it runs to max_tokens;
//   - at level >= 2 a chat request with allow_context_trim loses its oldest turns (system and
//     last user turn kept) until its prompt fits; not without the flag, below level 2, or for
//     completions. Expected prompt sizes come from rendering the expected message subset in
//     the test with the chat template and tokenizer directly;
//   - TTFT and queue samples reach the latency tracker at the first token, the rest at the
//     end, each once;
//   - the load admission reads (ModelEngine::Load) follows a long prompt's chunked prefill.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_engine.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"
#include "slo/slo_config.h"
#include "stories_engine.h"
#include "test_paths.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::unique_ptr<ModelEngine> MakeEngine(int32_t max_running = 4) {
  ModelEngineOptions o;
  o.name = "m";
  o.max_running = max_running;
  o.max_step_tokens = 256;
  o.chat_template.preset = "chatml";
  return lifeline::testing::MakeStoriesEngine(o);
}

// Knobs as the controller publishes them: one model, one class "c" at `level`.
std::shared_ptr<const slo::Knobs> MakeKnobs(uint64_t version, slo::Level level,
                                            int32_t max_running = 4, int64_t delay_us = 0,
                                            std::vector<int32_t> preferred = {}) {
  auto k = std::make_shared<slo::Knobs>();
  k->version = version;
  k->models = {slo::ModelKnobs{"m", max_running, 256}};
  k->classes = {slo::ClassLevel{"c", "", level}};
  k->max_queue_delay_us = delay_us;
  k->preferred_batch_sizes = std::move(preferred);
  return k;
}

// Collects one request's events; `on_token` runs on the engine thread for each token.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<api::GenerationEvent> events;
  int terminals = 0;
  std::function<void()> on_token;

  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      if (!ev.terminal() && on_token) on_token();
      std::lock_guard<std::mutex> lock(mu);
      terminals += ev.terminal() ? 1 : 0;
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  api::GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, 30s, [&] { return terminals > 0; })) {
      api::ApiError e;
      e.code = "timeout";
      return api::GenerationEvent::Error(e);
    }
    return events.back();
  }
  size_t TokenEvents() {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                             [](const auto& e) { return !e.terminal(); }));
  }
};

api::GenerationRequest Completion(int32_t max_tokens, const std::string& prompt = "Once") {
  api::GenerationRequest r;
  r.model = "m";
  r.prompts = {api::PromptInput{prompt, {}, false}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.slo_class = "c";
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

SubmitSlo ClassC(std::optional<int64_t> deadline_us = std::nullopt) {
  SubmitSlo s;
  s.slo_class = "c";
  s.deadline_us = deadline_us;
  return s;
}

class SloEngineTest : public ::testing::Test {
 protected:
  void Attach(slo::SpeedEstimator* speeds = nullptr) {
    engine_->AttachSlo(SloHooks{&board_, nullptr, speeds, &config_, &outcomes_, {}});
  }
  void SetUp() override {
    engine_ = MakeEngine();
    ASSERT_NE(engine_, nullptr);
    config_ = slo::DefaultSloConfig();
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
  }
  // Waits until the engine has no live request and reports every KV block free.
  void ExpectDrained() {
    EngineSnapshot s;
    for (int i = 0; i < 200; ++i) {
      s = engine_->Snapshot();
      if (s.live_requests == 0 && s.kv_blocks_free == s.kv_blocks_total) break;
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(s.live_requests, 0);
    EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  }
  uint64_t OutcomeCount(const std::string& outcome) {
    uint64_t n = 0;
    for (const auto& c : outcomes_.Snapshot()) {
      if (c.outcome == outcome) n += c.count;
    }
    return n;
  }

  slo::KnobBoard board_;
  slo::SloConfig config_;
  slo::OutcomeCounters outcomes_;
  std::unique_ptr<ModelEngine> engine_;
};

int32_t MaxBatch(const api::GenerationEvent& done) {
  int32_t m = 0;
  for (const auto& b : done.timings["batch"]["sizes"]) m = std::max(m, b.get<int32_t>());
  return m;
}

// Start() with calibrate returns for every context size (a context of 64 once looped
// forever choosing its prefill sizes) and leaves a prefill fit and a decode time behind.
TEST(SloEngineCalibrationTest, StartCalibratesForAnyContextSize) {
  for (int64_t n_ctx : {16, 64, 100, 512}) {
    SCOPED_TRACE("n_ctx " + std::to_string(n_ctx));
    ModelEngineOptions o;
    o.name = "m";
    o.max_running = 2;
    o.max_step_tokens = 256;
    o.n_ctx = n_ctx;
    o.calibrate = true;
    o.chat_template.preset = "chatml";
    auto engine = lifeline::testing::MakeStoriesEngine(o);
    ASSERT_NE(engine, nullptr);
    slo::SpeedEstimator speeds;
    engine->AttachSlo(SloHooks{nullptr, nullptr, &speeds, nullptr, nullptr, {}});
    auto started = std::async(std::launch::async, [&] { engine->Start(); });
    if (started.wait_for(20s) != std::future_status::ready) {
      ADD_FAILURE() << "Start() with calibration did not return within 20 s";
      std::quick_exit(1);  // the engine thread is stuck; nothing can be joined
    }
    EXPECT_TRUE(speeds.prefill_fit().has_value());
    EXPECT_TRUE(speeds.decode_ms_per_token().has_value());
    engine->Stop();
  }
}

// While idle, a stale speed estimate is re-measured with one step on scratch KV blocks (models
// share the CPUs, so the estimate follows the machine's current load). The blocks go back to
// the pool, and the prefix cache a request left behind still serves the same answer.
TEST(SloEngineCalibrationTest, AnIdleEngineRefreshesAStaleEstimateOnScratchBlocks) {
  ModelEngineOptions o;
  o.name = "m";
  o.max_running = 2;
  o.max_step_tokens = 256;
  o.calibrate = true;
  o.chat_template.preset = "chatml";
  auto engine = lifeline::testing::MakeStoriesEngine(o);
  ASSERT_NE(engine, nullptr);
  slo::SpeedEstimator speeds(0.2, /*stale_after_ms=*/1);  // stale 1 ms after a measurement
  engine->AttachSlo(SloHooks{nullptr, nullptr, &speeds, nullptr, nullptr, {}});
  engine->Start();
  auto run = [&] {
    Collector c;
    // A prompt of several 16-token blocks, so its full blocks enter the prefix cache.
    api::GenerationRequest r = Completion(
        12, "Once upon a time there was a little girl named Lily. She loved to play outside "
            "in the park with her friends and her dog. One day she found a big red ball");
    r.slo_class.clear();
    EXPECT_FALSE(engine->Submit(1, std::move(r), c.Sink()));
    return c.Wait();
  };
  const api::GenerationEvent first = run();
  ASSERT_EQ(first.kind, api::GenerationEvent::Kind::kDone) << first.error.message;
  // Wait (bounded) for the idle loop's refreshes; their count is the engine's own.
  EngineSnapshot s;
  for (int i = 0; i < 400; ++i) {
    s = engine->Snapshot();
    if (s.speed_refreshes >= 2) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(s.speed_refreshes, 2);
  EXPECT_TRUE(speeds.prefill_fit().has_value());
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  const api::GenerationEvent second = run();
  ASSERT_EQ(second.kind, api::GenerationEvent::Kind::kDone) << second.error.message;
  EXPECT_GT(second.usage.cached_tokens, 0) << "the prefix cache survived";
  engine->Stop();
}

TEST_F(SloEngineTest, PublishedBatchLimitReachesTheScheduler) {
  board_.Publish(MakeKnobs(1, slo::Level::kNormal, /*max_running=*/2));
  Attach();
  // Queued before Start, so the first step sees all four together: only the limit keeps a
  // step below four sequences.
  Collector c[4];
  for (int i = 0; i < 4; ++i) {
    SubmitSlo s = ClassC();
    ASSERT_FALSE(engine_->Submit(i + 1, Completion(6), c[i].Sink(), &s));
  }
  engine_->Start();
  int32_t seen = 0;
  for (auto& col : c) {
    const api::GenerationEvent done = col.Wait();
    ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
    ASSERT_TRUE(done.timings.contains("batch")) << done.timings.dump();
    EXPECT_LE(MaxBatch(done), 2) << done.timings.dump();
    seen = std::max(seen, MaxBatch(done));
  }
  EXPECT_EQ(seen, 2);  // they did batch, up to the limit
}

TEST_F(SloEngineTest, BatchingWindowWaitsForAPreferredSize) {
  board_.Publish(MakeKnobs(1, slo::Level::kNormal, 4, /*delay_us=*/30'000'000, {3}));
  Attach();
  engine_->Start();
  Collector c[3];
  SubmitSlo s = ClassC();
  ASSERT_FALSE(engine_->Submit(1, Completion(4), c[0].Sink(), &s));
  ASSERT_FALSE(engine_->Submit(2, Completion(4), c[1].Sink(), &s));
  std::this_thread::sleep_for(300ms);
  // Two waiting, preferred size 3, delay 30 s: nothing has run.
  EXPECT_EQ(c[0].TokenEvents() + c[1].TokenEvents(), 0u);
  EXPECT_GE(engine_->Snapshot().window_waits, 1);
  ASSERT_FALSE(engine_->Submit(3, Completion(4), c[2].Sink(), &s));
  for (auto& col : c) {
    const api::GenerationEvent done = col.Wait();
    ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
    // All three were admitted together: their first step held three sequences.
    EXPECT_EQ(done.timings["batch"]["sizes"][0], 3) << done.timings.dump();
  }
}

TEST_F(SloEngineTest, BatchingWindowNeverHoldsPastTheDelay) {
  board_.Publish(MakeKnobs(1, slo::Level::kNormal, 4, /*delay_us=*/300'000, {3}));
  Attach();
  engine_->Start();
  Collector c;
  SubmitSlo s = ClassC();
  ASSERT_FALSE(engine_->Submit(1, Completion(4), c.Sink(), &s));
  const api::GenerationEvent done = c.Wait();  // alone: it goes when the delay is over
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_GE(done.timings["queue_ms"].get<double>(), 290.0) << done.timings.dump();
  EXPECT_EQ(engine_->Snapshot().max_queue_delay_us, 300'000);
}

// The sink sleeps on the first token until the deadline is behind, so the deadline passes
// while the request is running, whatever the machine's speed.
api::GenerationEvent RunPastDeadline(ModelEngine& engine, slo::KnobBoard& board,
                                        slo::Level level) {
  board.Publish(MakeKnobs(1, level));
  Collector c;
  const int64_t deadline_us = NowUs() + 1'000'000;
  bool slept = false;
  c.on_token = [&] {
    if (slept) return;
    slept = true;
    const int64_t left_us = deadline_us - NowUs();
    if (left_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(left_us + 20'000));
  };
  SubmitSlo s = ClassC(deadline_us);
  EXPECT_FALSE(engine.Submit(1, Completion(60), c.Sink(), &s));
  api::GenerationEvent done = c.Wait();
  std::this_thread::sleep_for(50ms);
  std::lock_guard<std::mutex> lock(c.mu);
  EXPECT_EQ(c.terminals, 1);
  return done;
}

TEST_F(SloEngineTest, AtLevelOneARunningRequestStopsAtItsDeadline) {
  Attach();
  engine_->Start();
  const api::GenerationEvent done = RunPastDeadline(*engine_, board_, slo::Level::kTruncate);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_LT(done.usage.completion_tokens, 60);
  EXPECT_GE(done.usage.completion_tokens, 1);
  ASSERT_TRUE(done.timings.contains("lifeline")) << done.timings.dump();
  EXPECT_EQ(done.timings["lifeline"]["truncated"], true);
  EXPECT_EQ(done.timings["lifeline"]["reason"], "deadline");
  // The choice's own object, which the server puts on the choice.
  EXPECT_EQ(done.lifeline["truncated"], true);
  EXPECT_EQ(done.lifeline["reason"], "deadline");
  EXPECT_EQ(done.lifeline["requested_max_tokens"], 60);
  EXPECT_EQ(done.lifeline["generated_tokens"], done.usage.completion_tokens);
  EXPECT_EQ(OutcomeCount("deadline_stop"), 1u);
  EXPECT_EQ(engine_->Snapshot().deadline_stops, 1);
  ExpectDrained();
}

TEST_F(SloEngineTest, AtLevelZeroARunningRequestRunsPastItsDeadline) {
  Attach();
  engine_->Start();
  const api::GenerationEvent done = RunPastDeadline(*engine_, board_, slo::Level::kNormal);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.finish_reason, "length");
  EXPECT_EQ(done.usage.completion_tokens, 60);
  EXPECT_FALSE(done.timings.contains("lifeline")) << done.timings.dump();
  EXPECT_EQ(OutcomeCount("deadline_stop"), 0u);
  ExpectDrained();
}

// A conversation with two optional turns before the last user turn.
std::vector<api::ChatMessage> Conversation() {
  return {{"system", "You are a storyteller."},
          {"user", "Tell me about a cat who lived in a big red house near the sea."},
          {"assistant", "Once upon a time there was a cat named Tom who loved the sea."},
          {"user", "What did the cat do every morning when the sun came up?"},
          {"assistant", "Every morning Tom ran to the beach and looked at the boats."},
          {"user", "And then?"}};
}

api::GenerationRequest Chat(bool allow_trim) {
  api::GenerationRequest r = Completion(2);
  r.is_chat = true;
  r.prompts.clear();
  r.messages = Conversation();
  r.allow_context_trim = allow_trim;
  return r;
}

// Prompt tokens of the conversation's messages at `keep` (indices), in the ChatML layout the
// chatml preset renders (written out here, not through the template engine), with the
// generation prompt, BOS per the tokenizer and special tokens parsed.
int64_t PromptTokens(const Tokenizer& tok, const std::vector<size_t>& keep) {
  const auto conv = Conversation();
  std::string text;
  for (size_t i : keep) text += "<|im_start|>" + conv[i].role + "\n" + conv[i].content + "<|im_end|>\n";
  text += "<|im_start|>assistant\n";
  return static_cast<int64_t>(tok.Encode(text, tok.add_bos(), true).size());
}

api::GenerationEvent RunTrim(ModelEngine& engine, slo::KnobBoard& board, slo::Level level,
                                api::GenerationRequest req, const SubmitSlo& s) {
  board.Publish(MakeKnobs(1, level));
  Collector c;
  EXPECT_FALSE(engine.Submit(1, std::move(req), c.Sink(), &s));
  return c.Wait();
}

TEST_F(SloEngineTest, AtLevelTwoOldestTurnsAreTrimmedKeepingSystemAndLastUser) {
  const Tokenizer& tok = engine_->tokenizer();
  const int64_t all = PromptTokens(tok, {0, 1, 2, 3, 4, 5});
  const int64_t minus_one = PromptTokens(tok, {0, 3, 4, 5});
  const int64_t minimal = PromptTokens(tok, {0, 5});
  ASSERT_LT(minimal, minus_one);
  ASSERT_LT(minus_one, all);
  // Budget = what the conversation without its oldest turn needs: exactly one turn goes.
  config_.ladder.trim_to_tokens = minus_one;
  Attach();
  engine_->Start();
  api::GenerationEvent done =
      RunTrim(*engine_, board_, slo::Level::kTrimContext, Chat(true), ClassC());
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.usage.prompt_tokens, minus_one);
  ASSERT_TRUE(done.timings.contains("lifeline")) << done.timings.dump();
  const auto& trim = done.timings["lifeline"]["context_trim"];
  EXPECT_EQ(trim["turns"], 1);
  EXPECT_EQ(trim["messages"], 2);
  EXPECT_EQ(trim["tokens"], all - minus_one);
  EXPECT_FALSE(done.timings["lifeline"].contains("truncated"));
  EXPECT_EQ(OutcomeCount("trimmed"), 1u);

  // One token below that: both optional turns go, system + last user remain.
  config_.ladder.trim_to_tokens = minus_one - 1;
  done = RunTrim(*engine_, board_, slo::Level::kCascade, Chat(true), ClassC());
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.usage.prompt_tokens, minimal);
  EXPECT_EQ(done.timings["lifeline"]["context_trim"]["turns"], 2);
  EXPECT_EQ(done.timings["lifeline"]["context_trim"]["messages"], 4);

  // Below even that: the same minimum is sent (admission decides what happens to it).
  config_.ladder.trim_to_tokens = 1;
  done = RunTrim(*engine_, board_, slo::Level::kTrimContext, Chat(true), ClassC());
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.usage.prompt_tokens, minimal);
  EXPECT_EQ(OutcomeCount("trimmed"), 3u);
  EXPECT_EQ(engine_->Snapshot().context_trims, 3);
}

TEST_F(SloEngineTest, NoTrimWithoutTheFlagBelowLevelTwoOrForCompletions) {
  const Tokenizer& tok = engine_->tokenizer();
  const int64_t all = PromptTokens(tok, {0, 1, 2, 3, 4, 5});
  config_.ladder.trim_to_tokens = 1;  // would trim everything it may
  Attach();
  engine_->Start();
  const struct {
    slo::Level level;
    bool allow;
  } cases[] = {{slo::Level::kTrimContext, false}, {slo::Level::kTruncate, true},
               {slo::Level::kNormal, true}};
  for (const auto& tc : cases) {
    const api::GenerationEvent done = RunTrim(*engine_, board_, tc.level, Chat(tc.allow), ClassC());
    ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
    EXPECT_EQ(done.usage.prompt_tokens, all) << static_cast<int>(tc.level) << " " << tc.allow;
    EXPECT_FALSE(done.timings.contains("lifeline")) << done.timings.dump();
  }
  // A completion prompt is never trimmed, whatever it asks.
  const std::string text = "Once upon a time there was a little girl who liked to play outside";
  api::GenerationRequest comp = Completion(2, text);
  comp.allow_context_trim = true;
  const api::GenerationEvent done =
      RunTrim(*engine_, board_, slo::Level::kTrimContext, comp, ClassC());
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.usage.prompt_tokens,
            static_cast<int64_t>(tok.Encode(text, tok.add_bos(), true).size()));
  EXPECT_EQ(OutcomeCount("trimmed"), 0u);
}

TEST_F(SloEngineTest, TrimBudgetFollowsTheTtftBudgetAtTheMeasuredPrefillSpeed) {
  const Tokenizer& tok = engine_->tokenizer();
  const int64_t minimal = PromptTokens(tok, {0, 5});
  // 1 token per second of prefill; a TTFT budget of `minimal` seconds (+0.5 s for the time
  // spent before Submit) leaves room for exactly `minimal` prompt tokens.
  slo::SpeedEstimator speeds;
  speeds.ObservePrefill(1, 1000.0, NowUs());  // two sizes on the line: no fixed cost
  speeds.ObservePrefill(2, 2000.0, NowUs());
  Attach(&speeds);
  engine_->Start();
  SubmitSlo s = ClassC();
  s.ttft_budget_ms = static_cast<double>(minimal) * 1000.0 + 500.0;
  const api::GenerationEvent done =
      RunTrim(*engine_, board_, slo::Level::kTrimContext, Chat(true), s);
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(done.usage.prompt_tokens, minimal);  // trim_to_tokens (2048) alone trims nothing
  EXPECT_EQ(done.timings["lifeline"]["context_trim"]["turns"], 2);
}

uint64_t CountOf(const slo::LatencyTracker& tracker, slo::Metric m) {
  const slo::TrackerSnapshot snap = tracker.Snapshot(NowUs());
  const slo::SeriesSnapshot* s = snap.Find("c", "m");
  return s == nullptr ? 0 : s->total[static_cast<size_t>(m)].count();
}

TEST_F(SloEngineTest, TtftAndQueueSamplesArriveAtTheFirstTokenTheRestAtTheEnd) {
  slo::LatencyTracker tracker;
  engine_->AttachSlo(SloHooks{&board_, &tracker, nullptr, &config_, &outcomes_, {}});
  engine_->Start();
  Collector c;
  bool first = true;
  uint64_t at_first[slo::kMetricCount] = {};
  c.on_token = [&] {  // engine thread, before the event is stored
    if (!first) return;
    first = false;
    for (slo::Metric m : slo::kAllMetrics) at_first[static_cast<size_t>(m)] = CountOf(tracker, m);
  };
  SubmitSlo s = ClassC();
  ASSERT_FALSE(engine_->Submit(1, Completion(8), c.Sink(), &s));
  const api::GenerationEvent done = c.Wait();
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  ASSERT_FALSE(first);
  // While the request still runs (7 tokens to go) its TTFT and queue time are in the window.
  EXPECT_EQ(at_first[static_cast<size_t>(slo::Metric::kTtft)], 1u);
  EXPECT_EQ(at_first[static_cast<size_t>(slo::Metric::kQueue)], 1u);
  EXPECT_EQ(at_first[static_cast<size_t>(slo::Metric::kE2e)], 0u);
  EXPECT_EQ(at_first[static_cast<size_t>(slo::Metric::kTpot)], 0u);
  EXPECT_EQ(at_first[static_cast<size_t>(slo::Metric::kItl)], 0u);
  // At the end: each sample once (TTFT not again), and the TTFT recorded is the reported one.
  EXPECT_EQ(CountOf(tracker, slo::Metric::kTtft), 1u);
  EXPECT_EQ(CountOf(tracker, slo::Metric::kQueue), 1u);
  EXPECT_EQ(CountOf(tracker, slo::Metric::kE2e), 1u);
  EXPECT_EQ(CountOf(tracker, slo::Metric::kTpot), 1u);
  EXPECT_EQ(CountOf(tracker, slo::Metric::kItl), 7u);
  const slo::TrackerSnapshot snap = tracker.Snapshot(NowUs());
  const double ttft_ms = done.timings["latency"]["ttft_ms"].get<double>();
  EXPECT_NEAR(snap.Find("c", "m")->total[static_cast<size_t>(slo::Metric::kTtft)].sum_s(),
              ttft_ms / 1000.0, 1e-9);
}

TEST_F(SloEngineTest, LoadFollowsTheChunkedPrefillOfARunningPrompt) {
  // 16 tokens per step: once the short request B decodes (1 token a step), the long prompt A
  // gets 15 prefill tokens a step.
  auto k = std::make_shared<slo::Knobs>();
  k->version = 1;
  k->models = {slo::ModelKnobs{"m", 4, 16}};
  k->classes = {slo::ClassLevel{"c", "", slo::Level::kNormal}};
  board_.Publish(k);
  slo::SpeedEstimator speeds;
  Attach(&speeds);
  std::string long_text;
  for (int i = 0; i < 12; ++i) long_text += "Once upon a time there was a little dog. ";
  const Tokenizer& tok = engine_->tokenizer();
  const int64_t n_a = static_cast<int64_t>(tok.Encode(long_text, tok.add_bos(), true).size());
  ASSERT_GT(n_a, 80);

  Collector a, b;
  std::vector<slo::QueueLoad> seen;  // at each of B's tokens while A has none yet
  b.on_token = [&] {
    if (a.TokenEvents() == 0) seen.push_back(engine_->Load(NowUs()));
  };
  SubmitSlo sb = ClassC(), sa = ClassC();
  ASSERT_FALSE(engine_->Submit(1, Completion(40, "Once"), b.Sink(), &sb));
  ASSERT_FALSE(engine_->Submit(2, Completion(2, long_text), a.Sink(), &sa));
  const slo::QueueLoad before = engine_->Load(NowUs());
  EXPECT_EQ(before.queued_requests, 2);  // not started: counted as queued, not running
  EXPECT_EQ(before.running_prefill_tokens, 0);
  engine_->Start();
  ASSERT_EQ(a.Wait().kind, api::GenerationEvent::Kind::kDone);
  ASSERT_EQ(b.Wait().kind, api::GenerationEvent::Kind::kDone);

  ASSERT_GE(seen.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].queued_requests, 0) << i;
    EXPECT_EQ(seen[i].step_token_budget, 16) << i;
    EXPECT_EQ(seen[i].step_left_ms, 0) << i;  // read between steps
    // Both hold one of the knobs' 4 running slots (a queued request behind a full set
    // waits for decodes to finish: admission's slot wait).
    EXPECT_EQ(seen[i].max_running, 4) << i;
    EXPECT_EQ(seen[i].running_sequences, 2) << i;
  }
  // Until A's prefill ends: B decodes, A's remaining prefill shrinks by 15 per step.
  size_t chunked = 0;
  for (size_t i = 0; i + 1 < seen.size(); ++i) {
    if (seen[i + 1].running_prefill_tokens == 0) break;
    EXPECT_EQ(seen[i].running_decodes, 1) << i;
    EXPECT_EQ(seen[i].running_prefill_tokens - seen[i + 1].running_prefill_tokens, 15) << i;
    // B's tokens left to its max_tokens (40) shrink by its one token a step.
    EXPECT_EQ(seen[i].running_decode_tokens_left - seen[i + 1].running_decode_tokens_left, 1)
        << i;
    EXPECT_GT(seen[i].running_decode_tokens_left, 0) << i;
    EXPECT_LE(seen[i].running_decode_tokens_left, 40) << i;
    // One decode: its tokens left are also the fewest.
    EXPECT_EQ(seen[i].running_decode_min_left, seen[i].running_decode_tokens_left) << i;
    EXPECT_LT(seen[i].running_prefill_tokens, n_a) << i;
    ++chunked;
  }
  EXPECT_GE(chunked, 3u);
  // Its last chunk leaves nothing to prefill and two sequences decoding.
  EXPECT_EQ(seen.back().running_prefill_tokens, 0);
  EXPECT_EQ(seen.back().running_decodes, 2);
  // Steps with decodes followed each other: their interval is measured.
  EXPECT_GT(seen.back().decode_interval_ms, 0.0);
  // Idle again: nothing running.
  ExpectDrained();
  const slo::QueueLoad after = engine_->Load(NowUs());
  EXPECT_EQ(after.running_prefill_tokens, 0);
  EXPECT_EQ(after.running_decodes, 0);
  EXPECT_EQ(after.running_sequences, 0);
  EXPECT_EQ(after.running_decode_tokens_left, 0);
  EXPECT_EQ(after.queued_requests, 0);
  EXPECT_EQ(after.queued_prefill_tokens, 0);
}

}  // namespace
}  // namespace lifeline::serving

namespace lifeline::serving {
namespace {

// Late requests (docs/slo.md): a request still queued when its age plus its own prefill is past
// its TTFT budget can no longer make it. The engine's SLO clock is moved forward by the test
// from inside a running request's token callback (engine thread), so the queued request is
// certainly still waiting when the engine next looks: nothing depends on how fast the machine
// runs.
class LateRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeEngine(/*max_running=*/1);  // one slot: B waits behind A
    ASSERT_NE(engine_, nullptr);
    config_ = slo::DefaultSloConfig();
    SloHooks hooks{&board_, &tracker_, nullptr, &config_, &outcomes_, {}};
    hooks.clock = [this] {
      return std::chrono::steady_clock::now() + std::chrono::microseconds(offset_us_.load());
    };
    engine_->AttachSlo(hooks);
    engine_->Start();
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
  }
  // A runs 40 tokens; at its 2nd token B (TTFT budget 10 s) is queued behind it, and at its
  // 4th the clock jumps 20 s: B is then certainly queued and certainly late.
  void Run(bool serve_late) {
    SubmitSlo sa = ClassC();
    SubmitSlo sb = ClassC();
    sb.ttft_budget_ms = 10'000;
    sb.serve_late = serve_late;
    int tokens = 0;
    a_.on_token = [&] {
      ++tokens;
      if (tokens == 2) {
        EXPECT_FALSE(engine_->Submit(2, Completion(4), b_.Sink(), &sb));
      } else if (tokens == 4) {
        offset_us_.store(20'000'000);
      }
    };
    ASSERT_FALSE(engine_->Submit(1, Completion(40), a_.Sink(), &sa));
    a_done_ = a_.Wait();
    b_done_ = b_.Wait();
  }
  uint64_t OutcomeCount(const std::string& outcome) {
    uint64_t n = 0;
    for (const auto& c : outcomes_.Snapshot()) {
      if (c.outcome == outcome) n += c.count;
    }
    return n;
  }

  std::atomic<int64_t> offset_us_{0};
  slo::KnobBoard board_;
  slo::SloConfig config_;
  slo::LatencyTracker tracker_;
  slo::OutcomeCounters outcomes_;
  std::unique_ptr<ModelEngine> engine_;
  Collector a_, b_;
  api::GenerationEvent a_done_, b_done_;
};

TEST_F(LateRequestTest, AQueuedRequestPastItsBudgetIsAnswered429AtOnce) {
  Run(/*serve_late=*/false);
  ASSERT_EQ(a_done_.kind, api::GenerationEvent::Kind::kDone) << a_done_.error.message;
  EXPECT_EQ(a_done_.usage.completion_tokens, 40);  // the running request is untouched
  ASSERT_EQ(b_done_.kind, api::GenerationEvent::Kind::kError);
  EXPECT_EQ(b_done_.error.http_status, 429);
  EXPECT_EQ(b_done_.error.code, "slo_late");
  EXPECT_GE(b_done_.error.retry_after_s, 1);
  EXPECT_NE(b_done_.error.message.find("budget of 10000 ms"), std::string::npos)
      << b_done_.error.message;
  EXPECT_EQ(b_.TokenEvents(), 0u);  // it never started
  EXPECT_EQ(OutcomeCount("late_shed"), 1u);
  EXPECT_EQ(engine_->Snapshot().late_shed, 1);
  // The controller sees it: a lower bound of its TTFT (>= 20 s) in the window, not among
  // the served latencies.
  const slo::TrackerSnapshot snap = tracker_.Snapshot(NowUs() + 20'000'000);
  const slo::SeriesSnapshot* row = snap.Find("c", "m");
  ASSERT_NE(row, nullptr);
  EXPECT_GE((*row)[slo::Metric::kTtft].p99_ms, 19'000);
  EXPECT_EQ(row->total[static_cast<size_t>(slo::Metric::kTtft)].count(), 1u);  // A's only
  EXPECT_EQ(engine_->QueuedRequests(), 0);
  EXPECT_EQ(engine_->OpenRequests(), 0);
}

TEST_F(LateRequestTest, AClassThatServesLateRequestsDisclosesTheMiss) {
  Run(/*serve_late=*/true);
  ASSERT_EQ(a_done_.kind, api::GenerationEvent::Kind::kDone) << a_done_.error.message;
  ASSERT_EQ(b_done_.kind, api::GenerationEvent::Kind::kDone) << b_done_.error.message;
  EXPECT_EQ(b_done_.usage.completion_tokens, 4);
  ASSERT_TRUE(b_done_.timings.contains("lifeline")) << b_done_.timings.dump();
  const nlohmann::json& late = b_done_.timings["lifeline"]["late"];
  EXPECT_EQ(late["late"], true);
  EXPECT_EQ(late["ttft_budget_ms"], 10'000);
  EXPECT_GE(late["waited_ms"].get<double>(), 10'000);
  EXPECT_EQ(OutcomeCount("late_served"), 1u);
  EXPECT_FALSE(a_done_.timings.contains("lifeline") &&
               a_done_.timings["lifeline"].contains("late"));
}

// An embeddings request's inputs are one answer: with one slot they run one after another,
// and when the clock jumps past the budget after the first has run, the queued rest follow it
// instead of the request failing as late. One whose inputs never started is late as before.
TEST_F(LateRequestTest, AnEmbeddingsRequestWhoseFirstInputRanIsNotDroppedAsLate) {
  for (bool started : {true, false}) {
    offset_us_.store(0);
    api::GenerationRequest e;
    e.model = "m";
    e.task = api::Task::kEmbed;
    e.slo_class = "c";
    for (const char* in : {"Once upon a time", "Lily wanted", "the big red ball"}) {
      e.prompts.push_back(api::PromptInput{in, {}, false});
    }
    e.timeline.first_byte = e.timeline.validated = std::chrono::steady_clock::now();
    SubmitSlo slo = ClassC();
    slo.ttft_budget_ms = 10'000;
    Collector c, blocker;
    if (started) {
      c.on_token = [&] { offset_us_.store(20'000'000); };  // after the first input's vector
      ASSERT_FALSE(engine_->Submit(7, std::move(e), c.Sink(), &slo));
    } else {
      // Queued behind a running completion when the clock jumps: nothing of it ran.
      int tokens = 0;
      blocker.on_token = [&] {
        if (++tokens == 2) {
          EXPECT_FALSE(engine_->Submit(7, std::move(e), c.Sink(), &slo));
        } else if (tokens == 4) {
          offset_us_.store(20'000'000);
        }
      };
      ASSERT_FALSE(engine_->Submit(8, Completion(40), blocker.Sink(), &slo));
      blocker.Wait();
    }
    const api::GenerationEvent done = c.Wait();
    if (started) {
      ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
      std::lock_guard<std::mutex> lock(c.mu);
      EXPECT_EQ(std::count_if(c.events.begin(), c.events.end(),
                              [](const api::GenerationEvent& ev) { return !ev.embedding.empty(); }),
                3);
    } else {
      ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kError);
      EXPECT_EQ(done.error.code, "slo_late");
    }
  }
}

// Admitted knowingly: a request that could not make its budget even when it was queued (an
// idle model admits it) runs, however late it is.
TEST_F(LateRequestTest, ARequestAdmittedPastItsBudgetIsNotDroppedForIt) {
  SubmitSlo s = ClassC();
  s.ttft_budget_ms = 1;  // already past when queued
  api::GenerationRequest r = Completion(4);
  r.timeline.first_byte -= std::chrono::milliseconds(50);
  Collector c;
  ASSERT_FALSE(engine_->Submit(1, std::move(r), c.Sink(), &s));
  const api::GenerationEvent done = c.Wait();
  ASSERT_EQ(done.kind, api::GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(OutcomeCount("late_shed"), 0u);
}

}  // namespace
}  // namespace lifeline::serving
