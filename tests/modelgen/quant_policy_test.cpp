// Quantization type policy: hand-derived cases from llama.cpp's rules, and the per-tensor types
// of the shared reference files (written by llama.cpp's own quantizer) as an independent check.
#include "modelgen/quant_policy.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "test_paths.h"

namespace lifeline::modelgen {
namespace {

// The LLAMA_FTYPE ids from llama.cpp's llama.h, typed in by hand.
TEST(QuantPolicy, FileTypeIdsMatchLlamaCpp) {
  const std::pair<const char*, uint32_t> expected[] = {
      {"f32", 0},     {"f16", 1},     {"q4_0", 2},    {"q4_1", 3},    {"q8_0", 7},
      {"q5_0", 8},    {"q5_1", 9},    {"q2_k", 10},   {"q3_k_s", 11}, {"q3_k_m", 12},
      {"q3_k_l", 13}, {"q4_k_s", 14}, {"q4_k_m", 15}, {"q5_k_s", 16}, {"q5_k_m", 17},
      {"q6_k", 18},   {"bf16", 32},
  };
  for (const auto& [name, id] : expected) {
    const auto t = FileTypeFromName(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(static_cast<uint32_t>(t->ftype), id) << name;
    ASSERT_TRUE(FileTypeFromId(id).has_value()) << id;
    EXPECT_EQ(FileTypeFromId(id)->name, name);
  }
  EXPECT_FALSE(FileTypeFromName("q4_k").has_value());  // a ggml type, not a file type
  EXPECT_FALSE(FileTypeFromName("Q4_0").has_value());
  EXPECT_FALSE(FileTypeFromId(4).has_value());  // retired Q4_1_SOME_F16
}

TEST(QuantPolicy, WhichTensorsAreReencoded) {
  EXPECT_TRUE(IsQuantizableTensor("blk.0.attn_q.weight", 2));
  EXPECT_TRUE(IsQuantizableTensor("token_embd.weight", 2));
  EXPECT_TRUE(IsQuantizableTensor("output.weight", 2));
  EXPECT_FALSE(IsQuantizableTensor("blk.0.attn_norm.weight", 1));
  EXPECT_FALSE(IsQuantizableTensor("blk.0.attn_norm.weight", 2));  // norms never, any rank
  EXPECT_FALSE(IsQuantizableTensor("output_norm.weight", 1));
  EXPECT_FALSE(IsQuantizableTensor("blk.0.attn_q.bias", 1));
  EXPECT_FALSE(IsQuantizableTensor("blk.0.attn_q.bias", 2));
  EXPECT_FALSE(IsQuantizableTensor("some.weight", 1));  // 1-D
}

TEST(QuantPolicy, LayerOfTensor) {
  EXPECT_EQ(LayerOfTensor("blk.0.attn_v.weight"), 0);
  EXPECT_EQ(LayerOfTensor("blk.21.ffn_down.weight"), 21);
  EXPECT_FALSE(LayerOfTensor("output.weight").has_value());
  EXPECT_FALSE(LayerOfTensor("blk.x.attn_v.weight").has_value());
  EXPECT_FALSE(LayerOfTensor("blk.3").has_value());
}

// TinyLlama-1.1B: 22 layers, 32 heads, 4 KV heads. use_more_bits(i, 22) is
// i < 22/8 = 2, or i >= 7*22/8 = 19, or (i - 2) % 3 == 2, i.e. {0,1,4,7,10,13,16,19,20,21}.
TEST(QuantPolicy, Q4KMUsesQ6KOnMoreBitsLayers) {
  const ModelTypeContext m{22, 32, 4, true};
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int i = 0; i < 22; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const GgmlType want = more_bits.count(i) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, p + "attn_v.weight", 2048), want) << i;
    EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, p + "ffn_down.weight", 5632), want)
        << i;
    EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, p + "attn_q.weight", 2048),
              GgmlType::kQ4_K);
    EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, p + "ffn_up.weight", 2048),
              GgmlType::kQ4_K);
  }
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, "output.weight", 2048), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, "token_embd.weight", 2048),
            GgmlType::kQ4_K);
}

TEST(QuantPolicy, OutputTensorRules) {
  const ModelTypeContext m{4, 8, 8, true};
  // Legacy types: the classifier gets Q6_K, except Q8_0 files keep Q8_0.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_0, "output.weight", 512), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ5_1, "output.weight", 512), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ8_0, "output.weight", 512), GgmlType::kQ8_0);
  // Row of 64: Q4_0 blocks fit, Q6_K's 256 don't -> Q6_K falls back to Q8_0.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_0, "output.weight", 64), GgmlType::kQ8_0);
  // Row not a multiple of the file type's own block -> Q8_0 directly.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, "output.weight", 96), GgmlType::kQ8_0);
  // Float file types re-type everything to that type, classifier included.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyF16, "output.weight", 512), GgmlType::kF16);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyBF16, "blk.0.attn_v.weight", 512),
            GgmlType::kBF16);
  EXPECT_EQ(ChooseTensorType(m, FileType::kAllF32, "token_embd.weight", 512), GgmlType::kF32);
  // Tied classifier: token_embd takes output.weight's role.
  const ModelTypeContext tied{4, 8, 8, false};
  EXPECT_EQ(ChooseTensorType(tied, FileType::kMostlyQ4_0, "token_embd.weight", 512),
            GgmlType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_0, "token_embd.weight", 512),
            GgmlType::kQ4_0);
}

TEST(QuantPolicy, KQuantMixes) {
  const ModelTypeContext gqa4{32, 32, 8, true};  // n_gqa = 4
  const ModelTypeContext gqa1{32, 32, 32, true};
  // Q2_K: attn_v Q4_K with n_gqa >= 4 else Q3_K; ffn_down and attn_output Q3_K.
  EXPECT_EQ(ChooseTensorType(gqa4, FileType::kMostlyQ2_K, "blk.5.attn_v.weight", 4096),
            GgmlType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ2_K, "blk.5.attn_v.weight", 4096),
            GgmlType::kQ3_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ2_K, "blk.5.ffn_down.weight", 4096),
            GgmlType::kQ3_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ2_K, "blk.5.attn_output.weight", 4096),
            GgmlType::kQ3_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ2_K, "blk.5.attn_q.weight", 4096),
            GgmlType::kQ2_K);
  // Q3_K_M: attn_v Q5_K for the first two layers then Q4_K; ffn_down Q5_K below n/16 = 2.
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ3_K_M, "blk.1.attn_v.weight", 4096),
            GgmlType::kQ5_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ3_K_M, "blk.2.attn_v.weight", 4096),
            GgmlType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ3_K_M, "blk.1.ffn_down.weight", 4096),
            GgmlType::kQ5_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ3_K_M, "blk.2.ffn_down.weight", 4096),
            GgmlType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ3_K_M, "blk.9.attn_output.weight", 4096),
            GgmlType::kQ4_K);
  // Q4_K_S: attn_v Q5_K for layers < 4, ffn_down Q5_K for layers < n/8 = 4.
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ4_K_S, "blk.3.attn_v.weight", 4096),
            GgmlType::kQ5_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ4_K_S, "blk.4.ffn_down.weight", 4096),
            GgmlType::kQ4_K);
  EXPECT_EQ(ChooseTensorType(gqa1, FileType::kMostlyQ6_K, "blk.0.attn_v.weight", 4096),
            GgmlType::kQ6_K);
}

// iq4_nl files: IQ4_NL everywhere, the classifier Q6_K (Q8_0 when its rows are not 256s),
// attn_v Q5_K with 4+ query heads per KV head, the first eighth of ffn_down Q5_K.
TEST(QuantPolicy, Iq4NlFileType) {
  const auto info = FileTypeFromName("iq4_nl");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(static_cast<uint32_t>(info->ftype), 25u);  // LLAMA_FTYPE_MOSTLY_IQ4_NL
  const ModelTypeContext gqa4{16, 32, 8, true}, mha{16, 32, 32, true};
  const FileType f = FileType::kMostlyIQ4_NL;
  EXPECT_EQ(ChooseTensorType(gqa4, f, "blk.5.attn_q.weight", 4096), GgmlType::kIQ4_NL);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "blk.5.attn_v.weight", 4096), GgmlType::kQ5_K);
  EXPECT_EQ(ChooseTensorType(mha, f, "blk.5.attn_v.weight", 4096), GgmlType::kIQ4_NL);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "blk.1.ffn_down.weight", 11008), GgmlType::kQ5_K);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "blk.1.ffn_down.weight", 11040), GgmlType::kQ5_1);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "blk.2.ffn_down.weight", 11008), GgmlType::kIQ4_NL);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "output.weight", 4096), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseTensorType(gqa4, f, "output.weight", 96), GgmlType::kQ8_0);
}

TEST(QuantPolicy, RowsThatDontHoldWholeBlocksFallBack) {
  const ModelTypeContext m{2, 4, 4, true};
  // 64-wide rows: K-quants go to the 32-block type of similar size.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, "blk.0.attn_q.weight", 64),
            GgmlType::kQ5_0);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ5_K_M, "blk.0.attn_q.weight", 64),
            GgmlType::kQ5_1);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ6_K, "blk.0.attn_q.weight", 64),
            GgmlType::kQ8_0);
  // Q2_K and Q3_K: IQ4_NL, as current llama.cpp substitutes.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ2_K, "blk.0.attn_q.weight", 64),
            GgmlType::kIQ4_NL);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ2_K, "blk.0.attn_output.weight", 64),
            GgmlType::kIQ4_NL);  // Q3_K there
  // 48-wide rows: no 32-block type fits either -> F16.
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_K_M, "blk.0.attn_q.weight", 48),
            GgmlType::kF16);
  EXPECT_EQ(ChooseTensorType(m, FileType::kMostlyQ4_0, "blk.0.ffn_down.weight", 172),
            GgmlType::kF16);
}

// The reference syn-a-<type>.gguf files were quantized by llama.cpp from the same f32 model:
// for every tensor, the policy applied to the f32 file's tensor must give the reference type.
class QuantPolicyVsReference : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantPolicyVsReference, SameTypePerTensor) {
  const std::string type_name = GetParam();
  auto src = GgufFile::Open(testing::SharedPath("reference/models/syn-a-f32.gguf"));
  auto ref = GgufFile::Open(testing::SharedPath("reference/models/syn-a-" + type_name + ".gguf"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const auto ftype = FileTypeFromName(type_name);
  ASSERT_TRUE(ftype.has_value());
  ASSERT_EQ((*ref)->GetUint("general.file_type").value(), static_cast<uint32_t>(ftype->ftype));
  // syn-a: 2 layers, 8 heads, 2 KV heads (see reference/README.md).
  const ModelTypeContext m{2, 8, 2, (*src)->FindTensor("output.weight") != nullptr};
  ASSERT_EQ((*src)->tensors().size(), (*ref)->tensors().size());
  for (const auto& t : (*src)->tensors()) {
    const GgufTensorInfo* r = (*ref)->FindTensor(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    const GgmlType got =
        IsQuantizableTensor(t.name, t.n_dims) ? ChooseTensorType(m, ftype->ftype, t.name, t.ne[0])
                                              : t.type;
    EXPECT_EQ(TypeTraits(got).name, TypeTraits(r->type).name) << type_name << " " << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllSynA, QuantPolicyVsReference,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"));

}  // namespace
}  // namespace lifeline::modelgen
