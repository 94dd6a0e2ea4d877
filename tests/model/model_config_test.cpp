#include "engine/model/model_config.h"

#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "model/model_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

// Writes the spec to a temp file, opens it and reads the config.
class ConfigFromSpec {
 public:
  explicit ConfigFromSpec(const TinyModelSpec& spec) : path_(TempModelPath("config")) {
    const Status st = WriteTinyModel(spec, path_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto f = GgufFile::Open(path_);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (f.ok()) file_ = std::move(*f);
  }
  ~ConfigFromSpec() { std::remove(path_.c_str()); }
  Result<ModelConfig> Read() const {
    if (!file_) return Internal("no file");
    return ReadModelConfig(*file_);
  }

 private:
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TEST(ModelConfig, Stories260KMatchesItsDocumentedHyperparameters) {
  auto f = GgufFile::Open(testing::SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto c = ReadModelConfig(**f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Values from ../shared/models/README.md.
  EXPECT_EQ(c->arch, ModelArch::kLlama);
  EXPECT_EQ(c->n_embd, 64);
  EXPECT_EQ(c->n_layer, 5);
  EXPECT_EQ(c->n_ff, 172);
  EXPECT_EQ(c->n_head, 8);
  EXPECT_EQ(c->n_head_kv, 4);
  EXPECT_EQ(c->head_dim_k, 8);
  EXPECT_EQ(c->head_dim_v, 8);
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_EQ(c->n_vocab, 512);
  EXPECT_EQ(c->context_length, 2048);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_freq_base, 10000.0f);  // key absent: default
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 1.0f);
  EXPECT_EQ(c->rope_layout, RopeLayout::kNormal);
  EXPECT_TRUE(c->rope_freq_factors.empty());
  EXPECT_EQ(c->n_group(), 2);
}

TEST(ModelConfig, LlamaTinyRandomIsF16WithoutGqa) {
  auto f = GgufFile::Open(testing::SharedPath("models/llama-2-tiny-random.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto c = ReadModelConfig(**f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_embd, 8);
  EXPECT_EQ(c->n_head, 2);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->head_dim_k, 4);
  EXPECT_EQ(c->n_vocab, 32000);
  EXPECT_EQ(c->context_length, 4096);
}

TEST(ModelConfig, DefaultsWhenOptionalKeysAreAbsent) {
  TinyModelSpec s;
  s.omit_keys = {"llama.attention.head_count_kv", "llama.rope.freq_base"};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_head_kv, s.n_head);  // no GQA unless stated
  EXPECT_FLOAT_EQ(c->rope_freq_base, 10000.0f);
  EXPECT_EQ(c->head_dim_k, 16 / 4);
  EXPECT_EQ(c->rope_dim, 4);  // whole head rotated
}

TEST(ModelConfig, Qwen2UsesNeoxRope) {
  TinyModelSpec s;
  s.arch = "qwen2";
  s.with_qkv_bias = true;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, ModelArch::kQwen2);
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeox);
}

TEST(ModelConfig, RejectsUnsupportedArchitecture) {
  TinyModelSpec s;
  s.arch = "gpt2";
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(c.status().message(), "unsupported architecture 'gpt2' (supported: llama, qwen2)");
}

TEST(ModelConfig, MissingRequiredKeyIsNamed) {
  TinyModelSpec s;
  s.omit_keys = {"llama.embedding_length"};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("llama.embedding_length"), std::string::npos)
      << c.status().message();
}

TEST(ModelConfig, HeadCountNotDivisibleByKvHeads) {
  TinyModelSpec s;
  s.uint_key_overrides = {{"llama.attention.head_count_kv", 3}};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(c.status().message().find("llama.attention.head_count_kv = 3"), std::string::npos)
      << c.status().message();
}

TEST(ModelConfig, EmbeddingNotDivisibleByHeadsWithoutKeyLength) {
  TinyModelSpec s;
  s.uint_key_overrides = {{"llama.embedding_length", 18}};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(c.status().message().find("llama.embedding_length = 18"), std::string::npos);
}

TEST(ModelConfig, ExplicitKeyLengthOverridesHeadDim) {
  TinyModelSpec s;
  s.uint_key_overrides = {{"llama.attention.key_length", 8}, {"llama.attention.value_length", 6}};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim_k, 8);
  EXPECT_EQ(c->head_dim_v, 6);
  EXPECT_EQ(c->q_dim(), 32);
  EXPECT_EQ(c->v_dim(), 12);
}

TEST(ModelConfig, CapsOnLayersAndDims) {
  {
    TinyModelSpec s;
    s.uint_key_overrides = {{"llama.block_count", 513}};
    auto c = ConfigFromSpec(s).Read();
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kOutOfRange);
    EXPECT_NE(c.status().message().find("llama.block_count = 513 outside [1, 512]"),
              std::string::npos) << c.status().message();
  }
  {
    TinyModelSpec s;
    s.uint_key_overrides = {{"llama.embedding_length", 65537}};
    auto c = ConfigFromSpec(s).Read();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("llama.embedding_length = 65537"), std::string::npos);
  }
  {
    TinyModelSpec s;
    s.uint_key_overrides = {{"llama.block_count", 0}};
    EXPECT_EQ(ConfigFromSpec(s).Read().status().code(), StatusCode::kOutOfRange);
  }
  {
    TinyModelSpec s;  // rope dims beyond the head
    s.uint_key_overrides = {{"llama.rope.dimension_count", 6}};
    auto c = ConfigFromSpec(s).Read();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("llama.rope.dimension_count = 6"), std::string::npos);
  }
}

TEST(ModelConfig, LinearRopeScaling) {
  TinyModelSpec s;
  s.rope_scaling_type = "linear";
  s.rope_scaling_factor = 4.0f;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 0.25f);
}

TEST(ModelConfig, UnsupportedRopeScalingType) {
  TinyModelSpec s;
  s.rope_scaling_type = "yarn";
  s.rope_scaling_factor = 4.0f;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("llama.rope.scaling.type = 'yarn'"), std::string::npos);
}

TEST(ModelConfig, RopeFreqFactorsFromTensor) {
  TinyModelSpec s;
  s.rope_freqs = {1.0f, 8.0f};  // rope_dim 4 -> 2 factors
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->rope_freq_factors.size(), 2u);
  EXPECT_FLOAT_EQ(c->rope_freq_factors[1], 8.0f);

  TinyModelSpec bad;
  bad.rope_freqs = {1.0f, 2.0f, 3.0f};
  auto c2 = ConfigFromSpec(bad).Read();
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.status().message().find("rope_freqs.weight"), std::string::npos);
}

TEST(ModelConfig, MixtureOfExpertsRejected) {
  TinyModelSpec s;
  s.uint_key_overrides = {{"llama.expert_count", 8}};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
}

TEST(ModelConfig, VocabFallsBackToEmbeddingShape) {
  TinyModelSpec s;
  s.omit_keys = {"tokenizer.ggml.tokens"};
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_vocab, s.n_vocab);
}

}  // namespace
}  // namespace lifeline
