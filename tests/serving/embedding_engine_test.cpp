// Embeddings and reranking behind the engine loop: each input is a prompt prefilled in chunks
// beside other work, its hidden rows pooled as they come, and its answer one event with the
// vector (or a reranker's scores). The expected vectors come from one whole forward pass of
// the same model (LlamaModel::Eval over the full prompt, every row), pooled in the test.
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "engine/model/pooling.h"
#include "engine/tokenizer/tokenizer.h"
#include "serving/model_engine.h"
#include "stories_engine.h"

namespace lifeline::serving {
namespace {

using namespace std::chrono_literals;

struct Answer {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int32_t, std::vector<float>> vectors;  // choice index -> embedding
  bool done = false;
  std::string error;
  std::string finish;
  api::Usage usage;
  api::GenerationSink Sink() {
    return [this](api::GenerationEvent ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.kind == api::GenerationEvent::Kind::kError) error = ev.error.message;
      if (ev.kind == api::GenerationEvent::Kind::kToken && !ev.embedding.empty()) {
        vectors[ev.index] = ev.embedding;
      }
      if (ev.kind == api::GenerationEvent::Kind::kDone) {
        finish = ev.finish_reason;
        usage = ev.usage;
      }
      done = done || ev.terminal();
      cv.notify_all();
    };
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 60s, [&] { return done; });
  }
};

std::string MakeModel(const std::string& stem, const std::string& extra) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lifeline_" + stem + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  const std::string cmd = std::string(LIFELINE_BINARY) +
                          " make-model --arch qwen3 --dim 64 --layers 2 --heads 4 --kv-heads 2"
                          " --ffn 128 --vocab 600 --ctx 256 --type f32 --seed 11 " + extra +
                          " -o " + path + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return path;
}

using lifeline::testing::LoadTestModel;

// The pooled vector of `tokens` from one whole pass: every row, pooled here.
std::vector<float> WholePassPooled(const LlamaModel& model, const std::vector<int32_t>& tokens,
                                   PoolingType pooling) {
  ComputePool pool(1);
  ContextOptions co;
  co.n_ctx = 256;
  auto ctx = LlamaContext::Create(model.config(), co);
  EXPECT_TRUE(ctx.ok());
  const SeqId seq = (*ctx)->NewSequence();
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < tokens.size(); ++i) {
    BatchToken t{tokens[i], static_cast<int64_t>(i), seq, false};
    t.want_hidden = true;
    batch.push_back(t);
  }
  const auto n_embd = static_cast<size_t>(model.config().n_embd);
  std::vector<float> rows(tokens.size() * n_embd);
  EXPECT_TRUE(model.Eval(batch, **ctx, pool, {}, rows).ok());
  std::vector<float> out(n_embd, 0.0f);
  for (size_t i = 0; i < n_embd; ++i) {
    if (pooling == PoolingType::kMean) {
      double sum = 0;
      for (size_t p = 0; p < tokens.size(); ++p) sum += rows[p * n_embd + i];
      out[i] = static_cast<float>(sum / static_cast<double>(tokens.size()));
    } else {
      out[i] = rows[(tokens.size() - 1) * n_embd + i];
    }
  }
  return out;
}

api::GenerationRequest EmbedRequest(std::vector<std::string> inputs, api::Task task) {
  api::GenerationRequest r;
  r.model = "m";
  r.task = task;
  for (std::string& in : inputs) r.prompts.push_back(api::PromptInput{std::move(in), {}, false});
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

api::GenerationRequest Generate(const std::string& prompt) {
  api::GenerationRequest r;
  r.model = "m";
  r.prompts = {api::PromptInput{prompt, {}, false}};
  r.max_tokens = 24;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.timeline.first_byte = r.timeline.validated = std::chrono::steady_clock::now();
  return r;
}

ModelEngineOptions Options(const std::string& pooling) {
  ModelEngineOptions o;
  o.name = "m";
  o.threads = 1;
  o.n_ctx = 256;
  o.max_running = 4;
  o.max_step_tokens = 24;  // long inputs prefill over several steps
  o.max_waiting = 2;       // an embeddings request counts as one however many inputs
  o.kv_memory_bytes = 4ull << 20;
  o.chat_template.preset = "chatml";
  o.pooling = pooling;
  return o;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << what << " dim " << i;
  }
}

const std::vector<std::string> kInputs = {
    "once upon a time there was a little girl who lived in a village near the forest and "
    "every day she walked to the river",  // longer than a step: several prefill chunks
    "the cat sat", "a", "the cat sat on the mat and looked at the bird in the tree"};

TEST(EmbeddingEngine, PooledVectorsEqualOneWholePassBesideGeneration) {
  for (const char* pooling : {"mean", "last"}) {
    const std::string path = MakeModel("embed", std::string("--pooling ") + pooling);
    std::unique_ptr<Tokenizer> tok;
    auto model = LoadTestModel(path, &tok);
    ASSERT_NE(model, nullptr);
    std::vector<std::vector<float>> want;
    for (const std::string& in : kInputs) {
      std::vector<int32_t> ids = tok->Encode(in, tok->add_bos(), true);
      if (tok->add_eos() && tok->eos_id() >= 0) ids.push_back(tok->eos_id());
      want.push_back(WholePassPooled(*model, ids, *PoolingFromName(pooling)));
    }
    std::unique_ptr<Tokenizer> tok2;
    auto served = LoadTestModel(path, &tok2);
    std::remove(path.c_str());
    ASSERT_NE(served, nullptr);
    auto engine = ModelEngine::Create(std::move(served), std::move(tok2), Options("auto"));
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    EXPECT_EQ((*engine)->Info().pooling, pooling);
    EXPECT_EQ((*engine)->Info().embedding_length, 64);
    (*engine)->Start();
    // A generation of the first input's text first: its blocks sit in the prefix cache, which
    // a mean embedding must not use (it needs every position's state).
    Answer gen1;
    ASSERT_FALSE((*engine)->Submit(1, Generate(kInputs[0]), gen1.Sink()));
    ASSERT_TRUE(gen1.Wait());
    // Then four inputs in one request (more than --max-waiting 2) beside another generation.
    Answer emb, gen2;
    ASSERT_FALSE((*engine)->Submit(2, Generate(kInputs[3]), gen2.Sink()));
    ASSERT_FALSE((*engine)->Submit(3, EmbedRequest(kInputs, api::Task::kEmbed), emb.Sink()));
    ASSERT_TRUE(emb.Wait());
    ASSERT_TRUE(gen2.Wait());
    EXPECT_EQ(emb.error, "");
    EXPECT_EQ(gen2.error, "");
    EXPECT_EQ(emb.finish, "stop");
    EXPECT_EQ(emb.usage.completion_tokens, 0);
    ASSERT_EQ(emb.vectors.size(), kInputs.size()) << pooling;
    for (size_t i = 0; i < kInputs.size(); ++i) {
      ExpectClose(emb.vectors[static_cast<int32_t>(i)], want[i],
                  std::string(pooling) + " input " + std::to_string(i));
    }
    (*engine)->Stop();
  }
}

TEST(EmbeddingEngine, RerankScoresAreTheHeadOnTheLastStateOfEachPair) {
  const std::string path =
      MakeModel("rerank", "--pooling rank --rerank-outputs 2 --rerank-template "
                          "'<|im_start|>q: {query} d: {document}<|im_end|>'");
  std::unique_ptr<Tokenizer> tok;
  auto model = LoadTestModel(path, &tok);
  ASSERT_NE(model, nullptr);
  const std::vector<std::string> docs = {"dogs bark at night", "cats purr", "fish swim"};
  std::vector<std::vector<float>> want;
  for (const std::string& d : docs) {
    const std::string text = "<|im_start|>q: small cats d: " + d + "<|im_end|>";
    const std::vector<int32_t> ids = tok->Encode(text, tok->add_bos(), true);
    want.push_back(RankScores(model->config(), model->weights(),
                              WholePassPooled(*model, ids, PoolingType::kLast)));
  }
  ASSERT_EQ(want[0].size(), 2u);
  EXPECT_NEAR(want[0][0] + want[0][1], 1.0, 1e-5);  // qwen3: softmaxed
  std::unique_ptr<Tokenizer> tok2;
  auto served = LoadTestModel(path, &tok2);
  std::remove(path.c_str());
  ASSERT_NE(served, nullptr);
  auto engine = ModelEngine::Create(std::move(served), std::move(tok2), Options("auto"));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->Info().rerank_outputs, 2);
  (*engine)->Start();
  api::GenerationRequest req = EmbedRequest(docs, api::Task::kRerank);
  req.rerank_query = "small cats";
  Answer a;
  ASSERT_FALSE((*engine)->Submit(1, std::move(req), a.Sink()));
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.error, "");
  ASSERT_EQ(a.vectors.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    ExpectClose(a.vectors[static_cast<int32_t>(i)], want[i], "document " + std::to_string(i));
  }
  // An embedding of a reranker is its last state.
  Answer e;
  ASSERT_FALSE((*engine)->Submit(2, EmbedRequest({"cats"}, api::Task::kEmbed), e.Sink()));
  ASSERT_TRUE(e.Wait());
  EXPECT_EQ(e.vectors[0].size(), 64u);
  (*engine)->Stop();
}

// Prepare estimates what the prefix cache holds of a prompt (PrefixMirror): nothing before the
// prompt ran, its full blocks after (never the block of its last token); a mean embedding,
// which computes every position, reports nothing.
TEST(EmbeddingEngine, PrepareReportsTheCachedPromptTokensAdmissionPrices) {
  const std::string path = MakeModel("mirror", "--pooling mean");
  std::unique_ptr<Tokenizer> tok;
  auto model = LoadTestModel(path, &tok);
  std::remove(path.c_str());
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> ids = tok->Encode(kInputs[0], tok->add_bos(), true);
  auto engine = ModelEngine::Create(std::move(model), std::move(tok), Options("auto"));
  ASSERT_TRUE(engine.ok());
  (*engine)->Start();
  auto cached = [&](api::GenerationRequest r) {
    auto p = (*engine)->Prepare(std::move(r), nullptr);
    EXPECT_TRUE(std::holds_alternative<PreparedSubmit>(p));
    return std::holds_alternative<PreparedSubmit>(p) ? std::get<PreparedSubmit>(p).cached_prompt_tokens
                                                     : int64_t{-1};
  };
  EXPECT_EQ(cached(Generate(kInputs[0])), 0);
  Answer gen;
  ASSERT_FALSE((*engine)->Submit(1, Generate(kInputs[0]), gen.Sink()));
  ASSERT_TRUE(gen.Wait());
  const auto want = static_cast<int64_t>((ids.size() - 1) / 16 * 16);
  ASSERT_GE(want, 32);
  EXPECT_EQ(cached(Generate(kInputs[0])), want);
  EXPECT_EQ(cached(EmbedRequest({kInputs[0]}, api::Task::kEmbed)), 0);  // mean: computes all
  (*engine)->Stop();
}

TEST(EmbeddingEngine, RefusalsNameTheInput) {
  const std::string path = MakeModel("embedrefuse", "--pooling mean");
  std::unique_ptr<Tokenizer> tok;
  auto model = LoadTestModel(path, &tok);
  std::remove(path.c_str());
  ASSERT_NE(model, nullptr);
  // --pooling rank without a head is a start-up error naming the flag.
  {
    std::unique_ptr<Tokenizer> t2;
    auto m2 = LoadTestModel(MakeModel("embedrefuse2", ""), &t2);
    ASSERT_NE(m2, nullptr);
    auto bad = ModelEngine::Create(std::move(m2), std::move(t2), Options("rank"));
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("pooling"), std::string::npos);
  }
  auto engine = ModelEngine::Create(std::move(model), std::move(tok), Options("auto"));
  ASSERT_TRUE(engine.ok());
  (*engine)->Start();
  // Not a reranker.
  api::GenerationRequest rr = EmbedRequest({"x"}, api::Task::kRerank);
  rr.rerank_query = "q";
  Answer a;
  auto err = (*engine)->Submit(1, std::move(rr), a.Sink());
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code, "model_not_reranker");
  // An input longer than the context names its index.
  std::string lng;
  for (int i = 0; i < 400; ++i) lng += "the cat ";
  Answer b;
  err = (*engine)->Submit(2, EmbedRequest({"short", lng}, api::Task::kEmbed), b.Sink());
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "input[1]");
  EXPECT_EQ(err->code, "context_length_exceeded");
  // A token id outside the vocabulary names its place.
  api::GenerationRequest ids = EmbedRequest({}, api::Task::kEmbed);
  ids.prompts.push_back(api::PromptInput{"", {1, 2, 600}, true});
  Answer c;
  err = (*engine)->Submit(3, std::move(ids), c.Sink());
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "input[0][2]");
  (*engine)->Stop();
}

}  // namespace
}  // namespace lifeline::serving
