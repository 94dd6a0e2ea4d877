#include "engine/model/llama_weights.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_model.h"
#include "model/model_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

// Builds the spec into a temp file and tries to load it as a model.
Result<std::unique_ptr<LlamaModel>> LoadSpec(const TinyModelSpec& spec) {
  const std::string path = TempModelPath("weights");
  const Status st = WriteTinyModel(spec, path);
  if (!st.ok()) return st;
  auto f = GgufFile::Open(path);
  std::remove(path.c_str());  // the mapping stays valid after unlink
  if (!f.ok()) return f.status();
  return LlamaModel::Load(std::move(*f), ReferenceKernels());
}

TEST(LlamaWeights, BindsStories260KAsViewsIntoTheMapping) {
  auto f = GgufFile::Open(testing::SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& file = **f;
  auto c = ReadModelConfig(file);
  ASSERT_TRUE(c.ok());
  auto w = BindLlamaWeights(file, *c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->layers.size(), 5u);
  // No copies: the matrix data pointers are the file's tensor pointers.
  EXPECT_EQ(w->token_embd.data, file.FindTensor("token_embd.weight")->data);
  EXPECT_EQ(w->layers[3].wk.data, file.FindTensor("blk.3.attn_k.weight")->data);
  EXPECT_EQ(w->layers[3].wk.rows, 32);  // n_head_kv * head_dim
  EXPECT_EQ(w->layers[3].wk.cols, 64);
  EXPECT_EQ(w->layers[3].wk.row_bytes, 64u * 4u);
  EXPECT_EQ(w->layers[0].w_down.rows, 64);
  EXPECT_EQ(w->layers[0].w_down.cols, 172);
  EXPECT_FALSE(w->output_tied);  // the file stores a separate output.weight
  EXPECT_TRUE(w->layers[0].bq.empty());
  // Norm vectors are owned float copies with the file's values.
  float first;
  std::memcpy(&first, file.FindTensor("blk.2.ffn_norm.weight")->data, 4);
  EXPECT_EQ(w->layers[2].ffn_norm[0], first);
}

TEST(LlamaWeights, EmbeddingLengthDisagreeingWithTensorsIsRejected) {
  TinyModelSpec s;
  s.uint_key_overrides = {{"llama.embedding_length", 24}};  // tensors are built for 16
  auto m = LoadSpec(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("token_embd.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[16, 40]"), std::string::npos) << msg;  // actual
  EXPECT_NE(msg.find("[24, 40]"), std::string::npos) << msg;  // expected
}

TEST(LlamaWeights, WrongLayerTensorShapeIsNamed) {
  TinyModelSpec s;
  s.tensor_shape_overrides = {{"blk.1.ffn_down.weight", {16, 16}}};
  auto m = LoadSpec(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find("blk.1.ffn_down.weight: shape [16, 16]"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("expected [24, 16]"), std::string::npos)
      << m.status().message();
}

TEST(LlamaWeights, MissingTensorIsNamed) {
  TinyModelSpec s;
  s.omit_tensors = {"blk.0.attn_v.weight"};
  auto m = LoadSpec(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("blk.0.attn_v.weight"), std::string::npos);
}

TEST(LlamaWeights, Qwen2RequiresQkvBias) {
  TinyModelSpec s;
  s.arch = "qwen2";
  s.with_qkv_bias = false;
  auto m = LoadSpec(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("blk.0.attn_q.bias"), std::string::npos);
}

TEST(LlamaWeights, AbsentOutputIsTiedToEmbedding) {
  TinyModelSpec s;
  s.tied_output = true;
  auto m = LoadSpec(s);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->weights().output_tied);
  EXPECT_EQ((*m)->weights().output.data, (*m)->weights().token_embd.data);
}

TEST(LlamaWeights, QuantizedMatricesBind) {
  TinyModelSpec s;
  s.n_embd = 64;  // rows must hold whole Q8_0 blocks of 32
  s.n_ff = 96;
  s.matrix_type = GgmlType::kQ8_0;
  auto m = LoadSpec(s);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->weights().layers[0].wq.type, GgmlType::kQ8_0);
  EXPECT_EQ((*m)->weights().layers[0].wq.row_bytes, 2u * (2 + 32));
}

}  // namespace
}  // namespace lifeline
