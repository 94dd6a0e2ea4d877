// Real files from ../shared: facts from models/README.md and reference/README.md, and the
// tensor bytes of stories260K.gguf against the independent llama2.c checkpoint of the model.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

using lifeline::testing::SharedPath;

std::unique_ptr<GgufFile> OpenShared(const std::string& rel) {
  auto f = GgufFile::Open(SharedPath(rel));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

void ExpectShape(const GgufFile& f, const std::string& name, std::vector<int64_t> ne,
                 GgmlType type) {
  const GgufTensorInfo* t = f.FindTensor(name);
  ASSERT_NE(t, nullptr) << name;
  ASSERT_EQ(t->n_dims, static_cast<int>(ne.size())) << name;
  for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(t->ne[d], ne[d]) << name << " dim " << d;
  EXPECT_EQ(t->type, type) << name;
}

TEST(GgufModels, Stories260KHeaderMatchesTheReadme) {
  auto f = OpenShared("models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->kvs().size(), 19u);
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->data_offset(), 14176u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetString("general.name"), "llama");
  EXPECT_EQ(*f->GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->GetUint("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(*f->GetUint("llama.context_length"), 2048u);
  EXPECT_NEAR(*f->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-11);
  EXPECT_EQ(f->GetFloat("llama.rope.freq_base").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f->GetUint("general.file_type").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.padding_token_id"), 4294967295u);
}

TEST(GgufModels, Stories260KVocabMatchesTheReadme) {
  auto f = OpenShared("models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  auto types = f->GetInt32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  ASSERT_EQ(types->size(), 512u);
  std::set<std::string> byte_tokens;
  for (size_t i = 0; i < 512; ++i) {
    if ((*types)[i] == 6) byte_tokens.insert(std::string((*tokens)[i]));
  }
  EXPECT_EQ(byte_tokens.size(), 256u);
  EXPECT_EQ(byte_tokens.count("<0x00>"), 1u);
  EXPECT_EQ(byte_tokens.count("<0xFF>"), 1u);
  auto scores = f->GetFloatArray("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  ASSERT_EQ(scores->size(), 512u);
  EXPECT_EQ(*std::max_element(scores->begin(), scores->end()), 0.0f);
  EXPECT_EQ(*std::min_element(scores->begin(), scores->end()), -252.0f);
}

TEST(GgufModels, Stories260KTensorTableMatchesTheReadme) {
  auto f = OpenShared("models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  for (const auto& t : f->tensors()) EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
  ExpectShape(*f, "token_embd.weight", {64, 512}, GgmlType::kF32);
  ExpectShape(*f, "output_norm.weight", {64}, GgmlType::kF32);
  ExpectShape(*f, "output.weight", {64, 512}, GgmlType::kF32);
  for (int l = 0; l < 5; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ExpectShape(*f, p + "attn_q.weight", {64, 64}, GgmlType::kF32);
    ExpectShape(*f, p + "attn_k.weight", {64, 32}, GgmlType::kF32);
    ExpectShape(*f, p + "attn_v.weight", {64, 32}, GgmlType::kF32);
    ExpectShape(*f, p + "attn_output.weight", {64, 64}, GgmlType::kF32);
    ExpectShape(*f, p + "ffn_gate.weight", {64, 172}, GgmlType::kF32);
    ExpectShape(*f, p + "ffn_up.weight", {64, 172}, GgmlType::kF32);
    ExpectShape(*f, p + "ffn_down.weight", {172, 64}, GgmlType::kF32);
    ExpectShape(*f, p + "attn_norm.weight", {64}, GgmlType::kF32);
    ExpectShape(*f, p + "ffn_norm.weight", {64}, GgmlType::kF32);
  }
  // 292,800 stored parameters; the data ends exactly at the end of the file.
  uint64_t params = 0, end = 0;
  for (const auto& t : f->tensors()) {
    params += t.n_elements();
    end = std::max(end, f->data_offset() + t.offset + t.size_bytes);
  }
  EXPECT_EQ(params, 292800u);
  EXPECT_EQ(end, f->file_size());
  // output.weight is a byte-identical copy of token_embd.weight.
  const GgufTensorInfo* emb = f->FindTensor("token_embd.weight");
  const GgufTensorInfo* out = f->FindTensor("output.weight");
  ASSERT_EQ(emb->size_bytes, out->size_bytes);
  EXPECT_EQ(std::memcmp(emb->data, out->data, emb->size_bytes), 0);
}

TEST(GgufModels, Stories260KWeightsEqualTheLlama2cCheckpoint) {
  auto f = OpenShared("models/stories260K.gguf");
  ASSERT_NE(f, nullptr);
  const std::vector<uint8_t> bin = testing::ReadFileBytes(SharedPath("models/stories260K.bin"));
  ASSERT_EQ(bin.size(), 1056540u);
  // llama2.c layout: 7 int32 header, then F32 arrays in this order (elements per layer x 5).
  struct Section { const char* gguf; int64_t per_layer; bool layered; };
  const Section sections[] = {
      {"token_embd", 512 * 64, false}, {"attn_norm", 64, true},   {"attn_q", 64 * 64, true},
      {"attn_k", 32 * 64, true},       {"attn_v", 32 * 64, true}, {"attn_output", 64 * 64, true},
      {"ffn_norm", 64, true},          {"ffn_gate", 172 * 64, true},
      {"ffn_down", 64 * 172, true},    {"ffn_up", 172 * 64, true}, {"output_norm", 64, false},
  };
  uint64_t pos = 28;
  for (const Section& s : sections) {
    const int layers = s.layered ? 5 : 1;
    for (int l = 0; l < layers; ++l) {
      const std::string name = s.layered ? "blk." + std::to_string(l) + "." + s.gguf + ".weight"
                                         : std::string(s.gguf) + ".weight";
      const GgufTensorInfo* t = f->FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      const uint64_t bytes = static_cast<uint64_t>(s.per_layer) * 4;
      ASSERT_EQ(t->size_bytes, bytes) << name;
      ASSERT_LE(pos + bytes, bin.size());
      EXPECT_EQ(std::memcmp(t->data, bin.data() + pos, bytes), 0) << name;
      pos += bytes;
    }
  }
}

TEST(GgufModels, TinyRandomLlamaMatchesTheReadme) {
  auto f = OpenShared("models/llama-2-tiny-random.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->kvs().size(), 18u);
  EXPECT_EQ(f->tensors().size(), 12u);
  EXPECT_EQ(f->data_offset(), 724416u);
  EXPECT_EQ(*f->GetUint("general.file_type"), 1u);
  EXPECT_EQ(*f->GetString("general.name"), "LLaMA v2");
  EXPECT_EQ(*f->GetUint("llama.embedding_length"), 8u);
  EXPECT_EQ(*f->GetUint("llama.context_length"), 4096u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f->GetFloatArray("tokenizer.ggml.scores")->size(), 32000u);
  ExpectShape(*f, "token_embd.weight", {8, 32000}, GgmlType::kF16);
  ExpectShape(*f, "output.weight", {8, 32000}, GgmlType::kF16);
  ExpectShape(*f, "blk.0.attn_norm.weight", {8}, GgmlType::kF32);
  ExpectShape(*f, "blk.0.ffn_norm.weight", {8}, GgmlType::kF32);
  ExpectShape(*f, "output_norm.weight", {8}, GgmlType::kF32);
  ExpectShape(*f, "blk.0.ffn_gate.weight", {8, 32}, GgmlType::kF16);
}

// Every synthetic reference model: the shared shape, and the weight type its name promises.
TEST(GgufModels, EveryReferenceModelParses) {
  const std::pair<const char*, const char*> files[] = {
      {"f32", "f32"},   {"f16", "f16"},   {"bf16", "bf16"}, {"q8_0", "q8_0"},
      {"q4_0", "q4_0"}, {"q4_1", "q4_1"}, {"q5_0", "q5_0"}, {"q5_1", "q5_1"},
      {"q4_k_m", "q4_k"}, {"q5_k_m", "q5_k"}, {"q6_k", "q6_k"}, {"q3_k_m", "q3_k"},
      {"q2_k", "q2_k"},
  };
  for (const auto& [suffix, type_name] : files) {
    const std::string rel = std::string("reference/models/syn-a-") + suffix + ".gguf";
    SCOPED_TRACE(rel);
    auto f = OpenShared(rel);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(*f->GetString("general.architecture"), "llama");
    EXPECT_EQ(*f->GetUint("llama.embedding_length"), 256u);
    EXPECT_EQ(*f->GetUint("llama.block_count"), 2u);
    EXPECT_EQ(*f->GetUint("llama.attention.head_count"), 8u);
    EXPECT_EQ(*f->GetUint("llama.attention.head_count_kv"), 2u);
    EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 768u);
    EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
    ExpectShape(*f, "blk.0.attn_norm.weight", {256}, GgmlType::kF32);
    const GgufTensorInfo* emb = f->FindTensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->ne[0], 256);
    EXPECT_EQ(emb->ne[1], 512);
    bool has_type = false;
    for (const auto& t : f->tensors()) has_type |= TypeTraits(t.type).name == type_name;
    EXPECT_TRUE(has_type) << "no tensor of type " << type_name;
  }
}

TEST(GgufModels, EveryTokenizerVocabParses) {
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm", "falcon", "starcoder"}) {
    const std::string rel = std::string("reference/tokenizer/ggml-vocab-") + name + ".gguf";
    SCOPED_TRACE(rel);
    auto f = OpenShared(rel);
    ASSERT_NE(f, nullptr);
    EXPECT_GT(f->GetStringArray("tokenizer.ggml.tokens")->size(), 1000u);
    EXPECT_TRUE(f->GetString("tokenizer.ggml.model").ok());
  }
}

}  // namespace
}  // namespace lifeline
