// Cross-check of the GGUF weight binding against the same model in llama2.c's checkpoint
// format (stories260K.bin), read here by a tiny independent loader (layout from
// ../shared/models/README.md).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_model.h"
#include "test_paths.h"

namespace lifeline {
namespace {

struct Llama2cCheckpoint {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  std::vector<float> data;  // every float after the header
  size_t cursor = 0;
  // Takes the next n floats.
  const float* Take(size_t n) {
    EXPECT_LE(cursor + n, data.size());
    const float* p = data.data() + cursor;
    cursor += n;
    return p;
  }
};

bool ReadCheckpoint(const std::string& path, Llama2cCheckpoint* c) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 28 || (bytes.size() - 28) % 4 != 0) return false;
  int32_t h[7];
  std::memcpy(h, bytes.data(), 28);
  c->dim = h[0], c->hidden_dim = h[1], c->n_layers = h[2], c->n_heads = h[3];
  c->n_kv_heads = h[4], c->vocab_size = h[5], c->seq_len = h[6];
  c->data.resize((bytes.size() - 28) / 4);
  std::memcpy(c->data.data(), bytes.data() + 28, bytes.size() - 28);
  return true;
}

// memcmp of n floats of the checkpoint with a bound F32 matrix's bytes.
void ExpectSameMatrix(const float* want, const WeightMatrix& w, const std::string& what) {
  ASSERT_EQ(w.type, GgmlType::kF32) << what;
  EXPECT_EQ(std::memcmp(want, w.data, static_cast<size_t>(w.rows * w.cols) * 4), 0) << what;
}

void ExpectSameVector(const float* want, const std::vector<float>& v, const std::string& what) {
  EXPECT_EQ(std::memcmp(want, v.data(), v.size() * 4), 0) << what;
}

TEST(Llama2c, Stories260KCheckpointHasTheSameWeightsAsTheGguf) {
  Llama2cCheckpoint ck;
  ASSERT_TRUE(ReadCheckpoint(testing::SharedPath("models/stories260K.bin"), &ck));
  auto f = GgufFile::Open(testing::SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto m = LlamaModel::Load(std::move(*f), ReferenceKernels());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  const LlamaWeights& w = (*m)->weights();
  ASSERT_EQ(ck.dim, c.n_embd);
  ASSERT_EQ(ck.hidden_dim, c.n_ff);
  ASSERT_EQ(ck.n_layers, c.n_layer);
  ASSERT_EQ(ck.n_heads, c.n_head);
  ASSERT_EQ(ck.n_kv_heads, c.n_head_kv);
  ASSERT_EQ(ck.vocab_size, c.n_vocab);  // positive: classifier shared with the embedding

  const size_t d = ck.dim, L = ck.n_layers, hid = ck.hidden_dim;
  const size_t kv = d * ck.n_kv_heads / ck.n_heads;
  ExpectSameMatrix(ck.Take(ck.vocab_size * d), w.token_embd, "token_embedding");
  const float* rms_att = ck.Take(L * d);
  const float* wq = ck.Take(L * d * d);
  const float* wk = ck.Take(L * kv * d);
  const float* wv = ck.Take(L * kv * d);
  const float* wo = ck.Take(L * d * d);
  const float* rms_ffn = ck.Take(L * d);
  const float* w1 = ck.Take(L * hid * d);
  const float* w2 = ck.Take(L * d * hid);
  const float* w3 = ck.Take(L * hid * d);
  const float* rms_final = ck.Take(d);
  for (size_t l = 0; l < L; ++l) {
    const LlamaLayerWeights& lw = w.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    ExpectSameVector(rms_att + l * d, lw.attn_norm, p + "rms_att");
    ExpectSameMatrix(wq + l * d * d, lw.wq, p + "wq");
    ExpectSameMatrix(wk + l * kv * d, lw.wk, p + "wk");
    ExpectSameMatrix(wv + l * kv * d, lw.wv, p + "wv");
    ExpectSameMatrix(wo + l * d * d, lw.wo, p + "wo");
    ExpectSameVector(rms_ffn + l * d, lw.ffn_norm, p + "rms_ffn");
    ExpectSameMatrix(w1 + l * hid * d, lw.w_gate, p + "w1 (gate)");
    ExpectSameMatrix(w2 + l * d * hid, lw.w_down, p + "w2 (down)");
    ExpectSameMatrix(w3 + l * hid * d, lw.w_up, p + "w3 (up)");
  }
  ExpectSameVector(rms_final, w.output_norm, "rms_final");
  // The GGUF's separate output.weight is the shared classifier.
  ExpectSameMatrix(ck.data.data(), w.output, "classifier");
  // What remains is the legacy freq_cis tables: [seq_len, head_size / 2] real and imaginary.
  const size_t head_size = d / ck.n_heads;
  EXPECT_EQ(ck.data.size() - ck.cursor, 2u * ck.seq_len * head_size / 2);
}

}  // namespace
}  // namespace lifeline
