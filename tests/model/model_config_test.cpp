#include "engine/model/model_config.h"

#include <cmath>
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
  EXPECT_EQ(c.status().message(),
            "unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, gemma, gemma2, "
            "gemma3, phi3, qwen2moe, qwen3moe)");
}

// The switch table's rows, as llama.cpp sets them for each family (src/models/<arch>.cpp).
TEST(ModelConfig, FamilySwitches) {
  struct Want {
    const char* arch;
    RopeLayout rope;
    bool qk_norm, post_norms, gelu, embd_scale;
  };
  for (const Want& w : {Want{"llama", RopeLayout::kNormal, false, false, false, false},
                        Want{"qwen2", RopeLayout::kNeox, false, false, false, false},
                        Want{"qwen3", RopeLayout::kNeox, true, false, false, false},
                        Want{"gemma", RopeLayout::kNeox, false, false, true, true},
                        Want{"gemma2", RopeLayout::kNeox, false, true, true, true},
                        Want{"gemma3", RopeLayout::kNeox, true, true, true, true},
                        Want{"phi3", RopeLayout::kNeox, false, false, false, false}}) {
    SCOPED_TRACE(w.arch);
    TinyModelSpec s;
    s.arch = w.arch;
    s.with_qkv_bias = s.arch == "qwen2";
    auto c = ConfigFromSpec(s).Read();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(ModelArchName(c->arch), s.arch);
    EXPECT_EQ(c->rope_layout, w.rope);
    EXPECT_EQ(c->qk_norm, w.qk_norm);
    EXPECT_EQ(c->post_norms, w.post_norms);
    EXPECT_EQ(c->ffn_act == FfnActivation::kGeluTanh, w.gelu);
    EXPECT_FLOAT_EQ(c->embd_scale, w.embd_scale ? 4.0f : 1.0f);  // sqrt(16)
    EXPECT_FLOAT_EQ(c->attn_scale, 0.5f);                         // 1 / sqrt(head dim 4)
    EXPECT_EQ(c->output == OutputTensor::kAlwaysTied, s.arch == "gemma" || s.arch == "gemma2");
  }
}

TEST(ModelConfig, Gemma2DefaultsWindowEveryOtherLayerAndCaps) {
  TinyModelSpec s;
  s.arch = "gemma2";
  s.n_layer = 5;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->swa_window, 4096);
  EXPECT_EQ(c->swa_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_FLOAT_EQ(c->attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c->final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(c->rope_freq_base_swa, c->rope_freq_base);
}

TEST(ModelConfig, Gemma3WindowPatternAndLocalRopeBase) {
  TinyModelSpec s;
  s.arch = "gemma3";
  s.n_layer = 7;
  auto none = ConfigFromSpec(s).Read();  // no sliding_window key: every layer global
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->swa_layers.empty());
  EXPECT_EQ(none->final_softcap, 0.0f);
  s.sliding_window = 512;
  s.rope_freq_base = 1000000.0f;
  s.rope_scaling_type = "linear";
  s.rope_scaling_factor = 8.0f;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->swa_window, 512);
  EXPECT_EQ(c->swa_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1}));  // 5 of 6
  EXPECT_FLOAT_EQ(c->rope_freq_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(c->rope_freq_scale_swa, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 0.125f);
}

TEST(ModelConfig, GemmaAttentionScaleOfThe27BModels) {
  // llama.cpp: 1/sqrt(n_embd / n_head) for gemma2 with 46 layers / gemma3 with 62.
  TinyModelSpec s;
  s.arch = "gemma2";
  s.n_layer = 46;
  s.n_embd = 32;
  s.n_ff = 32;
  s.head_dim = 4;  // n_embd / n_head = 8
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(8.0f));
  s.n_layer = 45;
  auto other = ConfigFromSpec(s).Read();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FLOAT_EQ(other->attn_scale, 0.5f);
}

TEST(ModelConfig, LongRopeFactorsChosenByContextSize) {
  TinyModelSpec s;
  s.arch = "phi3";
  s.context_length = 4096;
  s.rope_orig_ctx = 1024;
  s.rope_factors_long = {2.0f, 4.0f};
  s.rope_factors_short = {1.0f, 1.5f};
  s.rope_attn_factor = 1.19f;
  auto c = ConfigFromSpec(s).Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_orig_ctx, 1024);
  EXPECT_FLOAT_EQ(c->rope_attn_factor, 1.19f);
  EXPECT_EQ(c->RopeFactorsFor(1024), s.rope_factors_short);
  EXPECT_EQ(c->RopeFactorsFor(1025), s.rope_factors_long);
  s.rope_factors_short.clear();
  s.omit_tensors = {"rope_factors_short.weight"};
  auto half = ConfigFromSpec(s).Read();
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("come as a pair"), std::string::npos);
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

TEST(ModelConfig, MixtureOfExpertsWhereTheFamilyHasOne) {
  TinyModelSpec s;  // Mixtral: llama with expert_count; expert width defaults to n_ff
  s.uint_key_overrides = {{"llama.expert_count", 8}, {"llama.expert_used_count", 2}};
  auto mixtral = ConfigFromSpec(s).Read();
  ASSERT_TRUE(mixtral.ok()) << mixtral.status().ToString();
  EXPECT_EQ(mixtral->n_expert, 8);
  EXPECT_EQ(mixtral->n_expert_used, 2);
  EXPECT_EQ(mixtral->n_ff_exp, s.n_ff);
  EXPECT_TRUE(mixtral->expert_norm_topk);
  EXPECT_EQ(mixtral->n_ff_shexp, 0);
  s.uint_key_overrides = {{"llama.expert_count", 8}};  // no expert_used_count
  EXPECT_EQ(ConfigFromSpec(s).Read().status().code(), StatusCode::kNotFound);
  s.uint_key_overrides = {{"llama.expert_count", 8}, {"llama.expert_used_count", 9}};
  EXPECT_EQ(ConfigFromSpec(s).Read().status().code(), StatusCode::kOutOfRange);
  // Families without a mixture-of-experts variant refuse expert_count.
  TinyModelSpec g;
  g.arch = "gemma";
  g.uint_key_overrides = {{"gemma.expert_count", 8}, {"gemma.expert_used_count", 2}};
  EXPECT_EQ(ConfigFromSpec(g).Read().status().code(), StatusCode::kUnimplemented);
  // qwen2moe: expert width defaults to n_ff / used, a shared expert of n_ff, no renormalising.
  TinyModelSpec q;
  q.arch = "qwen2moe";
  q.uint_key_overrides = {{"qwen2moe.expert_count", 4}, {"qwen2moe.expert_used_count", 2}};
  auto qc = ConfigFromSpec(q).Read();
  ASSERT_TRUE(qc.ok()) << qc.status().ToString();
  EXPECT_EQ(qc->n_ff_exp, q.n_ff / 2);
  EXPECT_EQ(qc->n_ff_shexp, q.n_ff);
  EXPECT_FALSE(qc->expert_norm_topk);
  q.uint_key_overrides.clear();  // a qwen2moe without experts is malformed
  EXPECT_EQ(ConfigFromSpec(q).Read().status().code(), StatusCode::kNotFound);
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
