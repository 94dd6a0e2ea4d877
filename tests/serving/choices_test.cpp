// The OpenAI request features inside one ModelEngine, on the real stories260K model:
//   - n choices per prompt and arrays of prompts: one token stream per choice index, a
//     kChoiceDone per choice, one terminal kDone with prompt tokens counted once; a prompt's
//     later choices reuse its blocks from the prefix cache;
//   - log-probabilities equal a log-softmax the test computes itself from the model's logits;
//   - logit_bias bans (-100) and forces (+100) tokens;
//   - token-id prompts, echo, a constrained (grammar) answer, and the 400s naming the field.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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

  api::GenerationSink Sink() {
    return [this](GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      terminals += ev.terminal() ? 1 : 0;
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
  // Text of choice `index` (token events only).
  std::string Text(int32_t index) {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& e : events) {
      if (e.kind == GenerationEvent::Kind::kToken && e.index == index) out += e.text;
    }
    return out;
  }
  std::vector<api::TokenLogprobs> Logprobs(int32_t index) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<api::TokenLogprobs> out;
    for (const auto& e : events) {
      if (e.kind != GenerationEvent::Kind::kToken || e.index != index) continue;
      out.insert(out.end(), e.logprobs.begin(), e.logprobs.end());
    }
    return out;
  }
};

std::unique_ptr<ModelEngine> Engine() {
  ModelEngineOptions o;
  o.name = "m";
  o.max_running = 8;
  o.max_step_tokens = 256;
  o.chat_template.preset = "chatml";
  auto e = lifeline::testing::MakeStoriesEngine(o);
  if (e) e->Start();
  return e;
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

GenerationEvent Generate(ModelEngine& e, api::GenerationRequest r, Collector& c,
                    api::RequestHandle h = 1) {
  auto err = e.Submit(h, std::move(r), c.Sink());
  if (err) return GenerationEvent::Error(*err);
  return c.Wait();
}

// A prompt longer than one 16-token KV block, so a second choice can find it cached.
const char* kLongPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends every day.";

TEST(EngineChoices, SeveralChoicesShareThePromptAndEndOnce) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  api::GenerationRequest r = Completion(kLongPrompt, 6);
  r.n = 3;
  r.sampling.temperature = 1.0;
  r.sampling.seed = 11;
  const int64_t hits_before = e->Snapshot().prefix_hit_tokens;
  Collector c;
  GenerationEvent done = Generate(*e, r, c);
  ASSERT_EQ(done.kind, GenerationEvent::Kind::kDone) << done.error.message;
  EXPECT_EQ(c.terminals, 1);
  const int64_t n_prompt = static_cast<int64_t>(
      e->tokenizer().Encode(kLongPrompt, e->tokenizer().add_bos(), true).size());
  EXPECT_EQ(done.usage.prompt_tokens, n_prompt);  // once, not per choice
  EXPECT_EQ(done.usage.completion_tokens, 18);    // 3 x max_tokens, no EOS this early
  std::map<int32_t, int> choice_done;
  for (const auto& ev : c.events) {
    if (ev.kind == GenerationEvent::Kind::kChoiceDone) {
      ++choice_done[ev.index];
      EXPECT_EQ(ev.finish_reason, "length");
    }
  }
  EXPECT_EQ(choice_done, (std::map<int32_t, int>{{0, 1}, {1, 1}, {2, 1}}));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.Text(i).empty()) << i;
  // Choices 1 and 2 started after choice 0 had prefilled: they found its full blocks.
  const int64_t full_blocks_tokens = (n_prompt / 16) * 16;
  EXPECT_GE(e->Snapshot().prefix_hit_tokens - hits_before, 2 * full_blocks_tokens);

  // Same seed, same request: the same three texts (each choice draws its own stream).
  Collector again;
  ASSERT_EQ(Generate(*e, r, again, 2).kind, GenerationEvent::Kind::kDone);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(again.Text(i), c.Text(i)) << i;
  EXPECT_FALSE(c.Text(0) == c.Text(1) && c.Text(1) == c.Text(2)) << "seeds not offset per choice";
}

TEST(EngineChoices, PromptArraysTokenIdsAndEcho) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> ids = e->tokenizer().Encode("Once upon a time", true, true);
  api::GenerationRequest r = Completion("Once upon a time", 5);
  r.prompts.push_back(api::PromptInput{"", ids, true});
  r.n = 2;
  r.echo = true;
  Collector c;
  GenerationEvent done = Generate(*e, r, c);
  ASSERT_EQ(done.kind, GenerationEvent::Kind::kDone) << done.error.message;
  // Choices 0,1 from the text prompt, 2,3 from its ids: greedy, so all four say the same.
  const std::string first = c.Text(0);
  EXPECT_TRUE(first.starts_with("Once upon a time")) << first;
  EXPECT_GT(first.size(), std::string("Once upon a time").size());
  for (int i = 1; i < 4; ++i) EXPECT_EQ(c.Text(i), first) << i;
  EXPECT_EQ(done.usage.prompt_tokens, 2 * static_cast<int64_t>(ids.size()));
}

TEST(EngineChoices, LogprobsAreTheLogSoftmaxOfTheModelsLogits) {
  // The first generated token's distribution, computed here from the model directly.
  auto file = GgufFile::Open(lifeline::testing::SharedPath("models/stories260K.gguf"), {});
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  auto model = LlamaModel::Load(std::move(file).value(), ReferenceKernels());
  ASSERT_TRUE(model.ok());
  auto ctx = LlamaContext::Create((*model)->config(), {});
  ASSERT_TRUE(ctx.ok());
  ComputePool pool(1);
  const std::vector<int32_t> prompt = (*tok)->Encode("Lily wanted to", true, true);
  SeqId seq = (*ctx)->NewSequence();
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({prompt[i], static_cast<int64_t>(i), seq, i + 1 == prompt.size()});
  }
  const int32_t n_vocab = static_cast<int32_t>((*model)->config().n_vocab);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  ASSERT_TRUE((*model)->Eval(batch, **ctx, pool, logits).ok());
  double max_logit = -1e30;
  for (float l : logits) max_logit = std::max<double>(max_logit, l);
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l) - max_logit);
  std::vector<std::pair<double, int32_t>> ranked;
  for (int32_t i = 0; i < n_vocab; ++i) {
    ranked.push_back({static_cast<double>(logits[static_cast<size_t>(i)]) - max_logit - std::log(z), i});
  }
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });

  auto e = Engine();
  ASSERT_NE(e, nullptr);
  api::GenerationRequest r = Completion("Lily wanted to", 3);
  r.logprobs = true;
  r.top_logprobs = 4;
  Collector c;
  ASSERT_EQ(Generate(*e, r, c).kind, GenerationEvent::Kind::kDone);
  const auto lps = c.Logprobs(0);
  ASSERT_EQ(lps.size(), 3u);
  const api::TokenLogprobs& first = lps[0];
  EXPECT_EQ(first.token, (*tok)->TokenToPiece(ranked[0].second, true));  // greedy = top
  EXPECT_NEAR(first.logprob, ranked[0].first, 1e-3);
  ASSERT_EQ(first.top.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(first.top[k].token, (*tok)->TokenToPiece(ranked[k].second, true)) << k;
    EXPECT_NEAR(first.top[k].logprob, ranked[k].first, 1e-3) << k;
  }
}

// The id of the first generated token of choice 0.
int32_t FirstTokenId(Collector& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  for (const auto& ev : c.events) {
    if (ev.kind == GenerationEvent::Kind::kToken && ev.token_id >= 0) return ev.token_id;
  }
  return -1;
}

TEST(EngineChoices, LogitBiasBansAndForces) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  Collector plain;
  api::GenerationRequest r = Completion("Once upon a time", 1);
  ASSERT_EQ(Generate(*e, r, plain).kind, GenerationEvent::Kind::kDone);
  const int32_t greedy_id = FirstTokenId(plain);
  ASSERT_GE(greedy_id, 0);

  api::GenerationRequest banned = r;
  banned.logit_bias = {{greedy_id, -100.0f}};
  Collector b;
  ASSERT_EQ(Generate(*e, banned, b, 2).kind, GenerationEvent::Kind::kDone);
  const int32_t second = FirstTokenId(b);
  EXPECT_GE(second, 0);
  EXPECT_NE(second, greedy_id);

  // +100 on an ordinary token far from the top makes it the greedy choice.
  int32_t forced_id = -1;
  for (int32_t id = 300; id < e->tokenizer().n_vocab() && forced_id < 0; ++id) {
    if (e->tokenizer().token_attr(id) == TokenAttr::kNormal && id != greedy_id && id != second) {
      forced_id = id;
    }
  }
  ASSERT_GE(forced_id, 0);
  api::GenerationRequest forced = r;
  forced.logit_bias = {{forced_id, 100.0f}};
  Collector f;
  ASSERT_EQ(Generate(*e, forced, f, 3).kind, GenerationEvent::Kind::kDone);
  EXPECT_EQ(FirstTokenId(f), forced_id);
}

TEST(EngineChoices, AJsonSchemaEnumAnswerIsOneOfItsValues) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  api::GenerationRequest r = Completion("Once upon a time", 20);
  r.constraint.kind = api::OutputConstraint::Kind::kJsonSchema;
  r.constraint.param = "response_format.json_schema.schema";
  r.constraint.schema = nlohmann::ordered_json::parse(R"({"type":"string","enum":["yes","no","maybe"]})");
  for (float temperature : {0.0f, 1.5f}) {
    r.sampling.temperature = temperature;
    r.sampling.seed = 5;
    Collector c;
    GenerationEvent done = Generate(*e, r, c);
    ASSERT_EQ(done.kind, GenerationEvent::Kind::kDone) << done.error.message;
    EXPECT_EQ(done.finish_reason, "stop");
    // JSON allows whitespace around the value; the value itself is one of the enum's.
    const std::string text = c.Text(0);
    const auto value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(value.is_string()) << "[" << text << "] at temperature " << temperature;
    EXPECT_TRUE(value == "yes" || value == "no" || value == "maybe") << value;
  }
  // strict: a keyword the grammar cannot enforce is refused; without strict it is skipped.
  api::GenerationRequest bad = r;
  bad.constraint.schema = nlohmann::ordered_json::parse(R"({"type":"string","pattern":"a+"})");
  bad.constraint.strict = false;
  Collector lenient;
  EXPECT_EQ(Generate(*e, bad, lenient, 7).kind, GenerationEvent::Kind::kDone);
  bad.constraint.strict = true;
  Collector c;
  GenerationEvent err = Generate(*e, bad, c);
  ASSERT_EQ(err.kind, GenerationEvent::Kind::kError);
  EXPECT_EQ(err.error.http_status, 400);
  EXPECT_EQ(err.error.param, "response_format.json_schema.schema");
}

TEST(EngineChoices, BadIdsAreNamed) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  const int32_t n_vocab = e->tokenizer().n_vocab();
  api::GenerationRequest ids = Completion("", 2);
  ids.prompts = {api::PromptInput{"a", {}, false}, api::PromptInput{"", {1, n_vocab}, true}};
  Collector c1;
  GenerationEvent e1 = Generate(*e, ids, c1);
  ASSERT_EQ(e1.kind, GenerationEvent::Kind::kError);
  EXPECT_EQ(e1.error.param, "prompt[1][1]");
  api::GenerationRequest bias = Completion("a", 2);
  bias.logit_bias = {{n_vocab + 5, 1.0f}};
  Collector c2;
  GenerationEvent e2 = Generate(*e, bias, c2);
  ASSERT_EQ(e2.kind, GenerationEvent::Kind::kError);
  EXPECT_EQ(e2.error.param, "logit_bias." + std::to_string(n_vocab + 5));
}

// More choices than the queue bound holds is refused up front, never a late 429.
TEST(EngineChoices, MoreChoicesThanTheQueueHoldsIsA400) {
  ModelEngineOptions o;
  o.name = "m";
  o.max_waiting = 2;
  o.chat_template.preset = "chatml";
  auto e = lifeline::testing::MakeStoriesEngine(o);
  ASSERT_NE(e, nullptr);
  e->Start();
  api::GenerationRequest r = Completion("Once", 2);
  r.n = 3;
  Collector c;
  auto err = e->Submit(1, r, c.Sink());
  ASSERT_TRUE(err);
  EXPECT_EQ(err->http_status, 400);
  EXPECT_EQ(err->param, "n");
  r.n = 2;
  EXPECT_EQ(Generate(*e, r, c, 2).kind, GenerationEvent::Kind::kDone);
}

TEST(EngineChoices, CancellingARequestWithSeveralChoicesEndsItOnce) {
  auto e = Engine();
  ASSERT_NE(e, nullptr);
  api::GenerationRequest r = Completion(kLongPrompt, 400);
  r.n = 4;
  r.ignore_eos = true;
  Collector c;
  ASSERT_FALSE(e->Submit(9, r, c.Sink()));
  std::this_thread::sleep_for(30ms);
  e->Cancel(9);
  GenerationEvent end = c.Wait();
  ASSERT_EQ(end.kind, GenerationEvent::Kind::kError);
  EXPECT_EQ(end.error.code, "cancelled");
  std::this_thread::sleep_for(100ms);  // nothing else may follow
  std::lock_guard<std::mutex> lock(c.mu);
  EXPECT_EQ(c.terminals, 1);
  EXPECT_EQ(e->Snapshot().live_requests, 0);
}

}  // namespace
}  // namespace lifeline::serving
