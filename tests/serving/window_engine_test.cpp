// A model with sliding-window layers behind the engine loop: its window storage is per
// sequence and released as the sequence slides, so the scheduler runs it without prefix-cache
// hits. Two requests with the same long prompt (the second would hit the first's cached
// prefix) and a third beside them must all produce the greedy tokens a plain Session
// produces for that prompt, with the KV pool drained afterwards.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/model/session.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_engine.h"
#include "stories_engine.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;

struct Tokens {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  bool done = false;
  std::string error;
  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.kind == api::GenerationEvent::Kind::kError) error = ev.error.message;
      if (!ev.terminal()) ids.push_back(ev.token_id);
      done = done || ev.terminal();
      cv.notify_all();
    };
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 60s, [&] { return done; });
  }
};

api::GenerationRequest Greedy(const std::string& prompt, int32_t max_tokens) {
  api::GenerationRequest r;
  r.model = "m";
  r.prompts = {api::PromptInput{prompt, {}, false}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

using lifeline::testing::LoadTestModel;

TEST(WindowEngine, RepeatedLongPromptsMatchASessionWithoutPrefixHits) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lifeline_window_engine_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  const std::string cmd = std::string(LIFELINE_BINARY) +
                          " make-model --arch gemma2 --dim 64 --layers 2 --heads 4 --kv-heads 2"
                          " --ffn 128 --vocab 600 --sliding-window 8 --attn-softcap 2"
                          " --ctx 256 --type f32 --seed 5 -o " + path + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string prompt =
      "once upon a time there was a little girl who lived in a village near the forest and "
      "every day she walked to the river to see the fish swim by";
  constexpr int32_t kMaxTokens = 24;

  // The expected continuation: a Session of the same model.
  std::vector<int32_t> want;
  {
    std::unique_ptr<Tokenizer> tok;
    auto model = LoadTestModel(path, &tok);
    ASSERT_NE(model, nullptr);
    ComputePool pool(1);
    ContextOptions co;
    co.n_ctx = 256;
    auto session = Session::Create(*model, pool, co);
    ASSERT_TRUE(session.ok());
    const std::vector<int32_t> ids = tok->Encode(prompt, tok->add_bos(), true);
    ASSERT_GT(ids.size(), 40u);  // longer than the window and than one 16-token block
    auto logits = (*session)->Prefill(ids);
    ASSERT_TRUE(logits.ok());
    for (int i = 0; i < kMaxTokens; ++i) {
      int32_t best = 0;
      for (int32_t v = 1; v < static_cast<int32_t>(logits->size()); ++v) {
        if ((*logits)[v] > (*logits)[best]) best = v;
      }
      want.push_back(best);
      logits = (*session)->Decode(best);
      ASSERT_TRUE(logits.ok());
    }
  }

  std::unique_ptr<Tokenizer> tok;
  auto model = LoadTestModel(path, &tok);
  std::remove(path.c_str());
  ASSERT_NE(model, nullptr);
  ModelEngineOptions o;
  o.name = "m";
  o.threads = 1;
  o.n_ctx = 256;
  o.max_running = 2;
  o.max_step_tokens = 32;  // the prompt is prefilled in chunks
  o.kv_memory_bytes = 4ull << 20;
  o.chat_template.preset = "chatml";
  auto engine = ModelEngine::Create(std::move(model), std::move(tok), o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  (*engine)->Start();
  Tokens first;
  ASSERT_FALSE((*engine)->Submit(1, Greedy(prompt, kMaxTokens), first.Sink()));
  ASSERT_TRUE(first.Wait());
  EXPECT_EQ(first.error, "");
  EXPECT_EQ(first.ids, want);
  // The same prompt again (a prefix-cache hit for a model without windows), and beside it a
  // third request, so two sequences share the window pool.
  Tokens second, third;
  ASSERT_FALSE((*engine)->Submit(2, Greedy(prompt, kMaxTokens), second.Sink()));
  ASSERT_FALSE((*engine)->Submit(3, Greedy(prompt, kMaxTokens), third.Sink()));
  ASSERT_TRUE(second.Wait());
  ASSERT_TRUE(third.Wait());
  EXPECT_EQ(second.error, "");
  EXPECT_EQ(second.ids, want);
  EXPECT_EQ(third.ids, want);
  EngineSnapshot s;
  for (int i = 0; i < 200; ++i) {
    s = (*engine)->Snapshot();
    if (s.live_requests == 0 && s.kv_blocks_free == s.kv_blocks_total) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  (*engine)->Stop();
}

}  // namespace
}  // namespace lifeline::serving
