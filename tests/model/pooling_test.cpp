// Embedding outputs: the hidden rows Eval hands out (want_hidden), the pooling over them, a
// reranker's classifier head, and the metadata that declares them. The hidden rows are checked
// against llama.cpp's recorded logits (../shared/reference/logits): the classifier applied in
// the test, in double, to our rows must give the reference's top logits at every position.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/ref/quants_ref.h"
#include "engine/model/llama_model.h"
#include "engine/model/pooling.h"
#include "model/model_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<LlamaModel> LoadModel(const std::string& path) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto model = LlamaModel::Load(std::move(*file), KernelsFor(DetectIsa()));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  return std::move(*model);
}

// Row `r` of a tensor of the file, as floats.
std::vector<float> TensorRow(const GgufFile& f, const std::string& name, int64_t r) {
  const GgufTensorInfo* t = f.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  const int64_t cols = t->ne[0];
  const uint64_t row_bytes = *RowBytes(t->type, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  ref::DequantizeRow(t->type, t->data + static_cast<uint64_t>(r) * row_bytes, row.data(), cols);
  return row;
}

// Every prompt position's hidden row in one batch: [n, n_embd].
std::vector<float> AllHiddenRows(const LlamaModel& model, const std::vector<int32_t>& prompt) {
  ComputePool pool(1);
  ContextOptions opts;
  opts.n_ctx = 128;
  auto ctx = LlamaContext::Create(model.config(), opts);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (!ctx.ok()) return {};
  const SeqId seq = (*ctx)->NewSequence();
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    BatchToken t{prompt[i], static_cast<int64_t>(i), seq, false};
    t.want_hidden = true;
    batch.push_back(t);
  }
  std::vector<float> hidden(prompt.size() * static_cast<size_t>(model.config().n_embd));
  const Status st = model.Eval(batch, **ctx, pool, {}, hidden);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return hidden;
}

TEST(PoolingTest, HiddenRowsGiveTheReferenceLogitsThroughTheClassifier) {
  for (const char* name : {"syn-a-f32", "stories260K"}) {
    const fs::path json = testing::SharedPath(std::string("reference/logits/") + name + ".p2.json");
    std::string model_path = testing::SharedPath(std::string("reference/models/") + name + ".gguf");
    if (!fs::exists(model_path)) model_path = testing::SharedPath(std::string("models/") + name + ".gguf");
    ASSERT_TRUE(fs::exists(json)) << json;
    std::ifstream in(json);
    const nlohmann::json ref = nlohmann::json::parse(in);
    std::unique_ptr<LlamaModel> model = LoadModel(model_path);
    ASSERT_NE(model, nullptr);
    const ModelConfig& c = model->config();
    const auto prompt = ref["prompt_tokens"].get<std::vector<int32_t>>();
    const std::vector<float> hidden = AllHiddenRows(*model, prompt);
    ASSERT_EQ(hidden.size(), prompt.size() * static_cast<size_t>(c.n_embd));
    const std::string out_name =
        model->file().FindTensor("output.weight") != nullptr ? "output.weight" : "token_embd.weight";
    const GgmlType wtype = DominantWeightType(model->file());
    int checked = 0;
    for (size_t p = 0; p < prompt.size(); ++p) {
      const auto& pos = ref["positions"][p];
      const double tol = LogitTolerance(wtype, pos["logit_sum"].get<double>(),
                                        pos["logit_sumsq"].get<double>(), c.n_vocab);
      for (const auto& entry : pos["top"]) {
        const int32_t id = entry[0].get<int32_t>();
        const std::vector<float> w = TensorRow(model->file(), out_name, id);
        double logit = 0;
        for (int64_t i = 0; i < c.n_embd; ++i) {
          logit += static_cast<double>(w[static_cast<size_t>(i)]) *
                   hidden[p * static_cast<size_t>(c.n_embd) + static_cast<size_t>(i)];
        }
        EXPECT_NEAR(logit, entry[1].get<double>(), tol) << name << " pos " << p << " token " << id;
        ++checked;
      }
    }
    EXPECT_GE(checked, 100) << name;
  }
}

// A preempted sequence is computed again from its start: Reset forgets what was pooled.
TEST(PoolingTest, ResetForgetsThePooledRows) {
  PoolingAccumulator mean(PoolingType::kMean, 2);
  const float a[2] = {1, 2}, b[2] = {3, 6};
  mean.Add(0, a);
  mean.Add(1, b);
  mean.Reset();
  EXPECT_TRUE(mean.Pooled().empty());
  mean.Add(0, a);
  mean.Add(1, b);
  EXPECT_EQ(mean.Pooled(), (std::vector<float>{2, 4}));  // not (1+3+1+3)/4 after a replay
  EXPECT_EQ(mean.n_added(), 2);
}

TinyModelSpec EmbedderSpec(const std::string& arch) {
  TinyModelSpec s;
  s.arch = arch;
  s.n_embd = 32;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 48;
  s.n_vocab = 60;
  s.context_length = 128;
  return s;
}

// Pooling over prefill chunks of a sequence equals pooling the rows of one whole pass.
TEST(PoolingTest, ChunkedPoolingEqualsPoolingTheWholePass) {
  const std::string path = TempModelPath("pool");
  ASSERT_TRUE(WriteTinyModel(EmbedderSpec("qwen3"), path).ok());
  std::unique_ptr<LlamaModel> model = LoadModel(path);
  ASSERT_NE(model, nullptr);
  const int64_t n_embd = model->config().n_embd;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back((i * 7 + 3) % 60);
  const std::vector<float> whole = AllHiddenRows(*model, prompt);
  ASSERT_FALSE(whole.empty());
  const auto n = static_cast<int64_t>(prompt.size());
  const auto row = [&](int64_t p, int64_t i) { return whole[static_cast<size_t>(p * n_embd + i)]; };

  for (PoolingType pooling : {PoolingType::kMean, PoolingType::kCls, PoolingType::kLast}) {
    PoolingAccumulator acc(pooling, n_embd);
    ComputePool pool(1);
    ContextOptions opts;
    opts.n_ctx = 128;
    auto ctx = LlamaContext::Create(model->config(), opts);
    ASSERT_TRUE(ctx.ok());
    const SeqId seq = (*ctx)->NewSequence();
    for (int64_t begin = 0; begin < n; begin += 8) {  // chunks of 8, 8, 5
      std::vector<BatchToken> batch;
      std::vector<int64_t> wanted;
      for (int64_t p = begin; p < std::min(n, begin + 8); ++p) {
        BatchToken t{prompt[static_cast<size_t>(p)], p, seq, false};
        t.want_hidden = acc.Wants(p, n);
        if (t.want_hidden) wanted.push_back(p);
        batch.push_back(t);
      }
      std::vector<float> hidden(wanted.size() * static_cast<size_t>(n_embd));
      ASSERT_TRUE(model->Eval(batch, **ctx, pool, {}, hidden).ok());
      for (size_t k = 0; k < wanted.size(); ++k) acc.Add(wanted[k], hidden.data() + k * n_embd);
    }
    const std::vector<float> pooled = acc.Pooled();
    ASSERT_EQ(static_cast<int64_t>(pooled.size()), n_embd);
    for (int64_t i = 0; i < n_embd; ++i) {
      double want = 0;
      if (pooling == PoolingType::kMean) {
        for (int64_t p = 0; p < n; ++p) want += row(p, i);
        want /= static_cast<double>(n);
      } else {
        want = row(pooling == PoolingType::kCls ? 0 : n - 1, i);
      }
      EXPECT_NEAR(pooled[static_cast<size_t>(i)], want, 1e-4 * (1 + std::fabs(want)))
          << PoolingName(pooling) << " dim " << i;
    }
  }
}

// The head read from the file and applied in the test: cls_out . [tanh(cls . x + b)] + b_out,
// softmaxed for qwen3.
std::vector<double> HeadByHand(const GgufFile& f, int64_t n_embd, int64_t n_out, bool dense,
                               bool softmax, const std::vector<float>& x_in) {
  std::vector<double> x(x_in.begin(), x_in.end());
  if (dense) {
    const std::vector<float> b = TensorRow(f, "cls.bias", 0);
    std::vector<double> y(static_cast<size_t>(n_embd));
    for (int64_t r = 0; r < n_embd; ++r) {
      const std::vector<float> w = TensorRow(f, "cls.weight", r);
      double acc = b[static_cast<size_t>(r)];
      for (int64_t k = 0; k < n_embd; ++k) acc += w[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
      y[static_cast<size_t>(r)] = std::tanh(acc);
    }
    x = y;
  }
  const std::vector<float> b_out = TensorRow(f, "cls.output.bias", 0);
  std::vector<double> out(static_cast<size_t>(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    const std::vector<float> w = TensorRow(f, "cls.output.weight", r);
    double acc = b_out[static_cast<size_t>(r)];
    for (int64_t k = 0; k < n_embd; ++k) acc += w[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
    out[static_cast<size_t>(r)] = acc;
  }
  if (softmax) {
    double total = 0;
    for (double v : out) total += std::exp(v);
    for (double& v : out) v = std::exp(v) / total;
  }
  return out;
}

TEST(PoolingTest, RankScoresFollowTheClassifierHead) {
  struct Case {
    std::string arch;
    int64_t n_out;
    bool dense;
    bool softmax;
  };
  for (const Case& k : {Case{"qwen3", 2, false, true}, Case{"llama", 1, true, false},
                        Case{"llama", 3, false, false}}) {
    TinyModelSpec s = EmbedderSpec(k.arch);
    s.n_cls_out = k.n_out;
    s.cls_dense = k.dense;
    s.uint_key_overrides[k.arch + ".pooling_type"] = 4;
    const std::string path = TempModelPath("rank");
    ASSERT_TRUE(WriteTinyModel(s, path).ok());
    std::unique_ptr<LlamaModel> model = LoadModel(path);
    ASSERT_NE(model, nullptr);
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.pooling, PoolingType::kRank);
    EXPECT_EQ(c.n_cls_out, k.n_out);
    std::vector<float> x(static_cast<size_t>(c.n_embd));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    const std::vector<float> got = RankScores(c, model->weights(), x);
    const std::vector<double> want = HeadByHand(model->file(), c.n_embd, k.n_out, k.dense, k.softmax, x);
    ASSERT_EQ(got.size(), want.size()) << k.arch;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << k.arch << " output " << i;
    }
  }
}

Status ConfigStatus(const TinyModelSpec& s) {
  const std::string path = TempModelPath("poolcfg");
  const Status w = WriteTinyModel(s, path);
  if (!w.ok()) return w;
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return ReadModelConfig(**file).status();
}

TEST(PoolingTest, MetadataIsReadAndBadHeadsAreRefusedNamingTheKey) {
  TinyModelSpec s = EmbedderSpec("qwen3");
  s.uint_key_overrides["qwen3.pooling_type"] = 3;
  {
    const std::string path = TempModelPath("poolcfg");
    ASSERT_TRUE(WriteTinyModel(s, path).ok());
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok());
    auto c = ReadModelConfig(**file);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->pooling, PoolingType::kLast);
    EXPECT_EQ(c->n_cls_out, 0);
  }
  {
    TinyModelSpec bad = EmbedderSpec("qwen3");
    const std::string path = TempModelPath("poolcfg");
    ASSERT_TRUE(WriteTinyModel(bad, path).ok());
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(ReadModelConfig(**file)->pooling, PoolingType::kUnspecified);
  }
  TinyModelSpec out_of_range = s;
  out_of_range.uint_key_overrides["qwen3.pooling_type"] = 7;
  Status st = ConfigStatus(out_of_range);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("qwen3.pooling_type"), std::string::npos) << st.ToString();

  TinyModelSpec rank_without_head = s;
  rank_without_head.uint_key_overrides["qwen3.pooling_type"] = 4;
  st = ConfigStatus(rank_without_head);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("cls.output.weight"), std::string::npos) << st.ToString();

  TinyModelSpec encoder = s;
  encoder.causal = 0;
  st = ConfigStatus(encoder);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("qwen3.attention.causal"), std::string::npos) << st.ToString();
  TinyModelSpec causal = s;
  causal.causal = 1;
  EXPECT_TRUE(ConfigStatus(causal).ok());

  TinyModelSpec labels = s;
  labels.n_cls_out = 2;
  labels.cls_labels = {"yes"};
  st = ConfigStatus(labels);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("classifier.output_labels"), std::string::npos) << st.ToString();
  labels.cls_labels = {"yes", "no"};
  EXPECT_TRUE(ConfigStatus(labels).ok());
}

TEST(PoolingTest, EvalRefusesAHiddenBufferTooSmall) {
  const std::string path = TempModelPath("pool");
  ASSERT_TRUE(WriteTinyModel(EmbedderSpec("llama"), path).ok());
  std::unique_ptr<LlamaModel> model = LoadModel(path);
  ASSERT_NE(model, nullptr);
  ComputePool pool(1);
  auto ctx = LlamaContext::Create(model->config(), {});
  ASSERT_TRUE(ctx.ok());
  const SeqId seq = (*ctx)->NewSequence();
  BatchToken a{1, 0, seq, false}, b{2, 1, seq, false};
  a.want_hidden = b.want_hidden = true;
  std::vector<BatchToken> batch = {a, b};
  std::vector<float> hidden(static_cast<size_t>(model->config().n_embd));  // room for one row
  const Status st = model->Eval(batch, **ctx, pool, {}, hidden);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("hidden"), std::string::npos) << st.ToString();
  EXPECT_EQ((*ctx)->SequenceLength(seq), 0);  // nothing written
}

}  // namespace
}  // namespace lifeline
