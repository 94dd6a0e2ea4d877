#include "modelgen/model_plan.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace lifeline::modelgen {
namespace {

ModelShape Tiny() {
  ModelShape s;
  s.dim = 64;
  s.n_layers = 2;
  s.n_head = 8;
  s.n_head_kv = 4;
  s.ffn = 128;
  s.vocab = 300;
  return s;
}

void ExpectInvalid(const ModelShape& s, FileType ftype, const std::string& needle) {
  const Status st = ValidateModelShape(s, ftype);
  ASSERT_FALSE(st.ok()) << needle;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(ModelPlan, ValidationNamesTheFlag) {
  EXPECT_TRUE(ValidateModelShape(Tiny(), FileType::kMostlyQ4_0).ok());
  ModelShape s = Tiny();
  s.arch = "gpt2";
  ExpectInvalid(s, FileType::kAllF32, "--arch 'gpt2'");
  s = Tiny();
  s.n_head = 6;  // 64 / 6
  ExpectInvalid(s, FileType::kAllF32, "--heads 6 does not divide --dim 64");
  s = Tiny();
  s.n_head_kv = 3;
  ExpectInvalid(s, FileType::kAllF32, "--kv-heads 3 does not divide --heads 8");
  s = Tiny();
  s.n_head_kv = 16;
  ExpectInvalid(s, FileType::kAllF32, "--kv-heads 16 is outside [1, 8]");
  s = Tiny();
  s.dim = 72;
  s.n_head = 8;  // head size 9: odd
  ExpectInvalid(s, FileType::kAllF32, "must be even");
  s = Tiny();
  s.dim = 0;
  ExpectInvalid(s, FileType::kAllF32, "--dim 0 is outside");
  s = Tiny();
  s.n_layers = 0;
  ExpectInvalid(s, FileType::kAllF32, "--layers 0");
  s = Tiny();
  s.rope_base = -1;
  ExpectInvalid(s, FileType::kAllF32, "--rope-base");
  // Quantized types need rows that hold whole 32-element blocks; float types don't.
  s = Tiny();
  s.dim = 48;
  s.n_head = 4;
  s.n_head_kv = 4;
  EXPECT_TRUE(ValidateModelShape(s, FileType::kMostlyF16).ok());
  ExpectInvalid(s, FileType::kMostlyQ4_0, "--dim 48 must be a multiple of 32 for --type q4_0");
  s = Tiny();
  s.ffn = 172;
  EXPECT_TRUE(ValidateModelShape(s, FileType::kAllF32).ok());
  ExpectInvalid(s, FileType::kMostlyQ4_K_M, "--ffn 172 must be a multiple of 32");
}

TEST(ModelPlan, LlamaTensorNamesShapesAndOrder) {
  const auto plan = PlanTensors(Tiny(), FileType::kAllF32);
  // token_embd + 2 * 9 per layer + output_norm + output.
  ASSERT_EQ(plan.size(), 1u + 2 * 9 + 2);
  struct Want {
    const char* name;
    std::vector<int64_t> ne;
  };
  // kv_dim = 64 / 8 * 4 = 32. ggml order: ne[0] is the input (row) dimension.
  const Want want[] = {
      {"token_embd.weight", {64, 300}},   {"blk.0.attn_norm.weight", {64}},
      {"blk.0.attn_q.weight", {64, 64}},  {"blk.0.attn_k.weight", {64, 32}},
      {"blk.0.attn_v.weight", {64, 32}},  {"blk.0.attn_output.weight", {64, 64}},
      {"blk.0.ffn_norm.weight", {64}},    {"blk.0.ffn_gate.weight", {64, 128}},
      {"blk.0.ffn_up.weight", {64, 128}}, {"blk.0.ffn_down.weight", {128, 64}},
  };
  for (size_t i = 0; i < std::size(want); ++i) {
    EXPECT_EQ(plan[i].name, want[i].name);
    EXPECT_EQ(plan[i].ne, want[i].ne) << want[i].name;
    EXPECT_EQ(plan[i].type, GgmlType::kF32);
  }
  EXPECT_EQ(plan[10].name, "blk.1.attn_norm.weight");
  EXPECT_EQ(plan[19].name, "output_norm.weight");
  EXPECT_EQ(plan[20].name, "output.weight");
  EXPECT_EQ(plan[20].ne, (std::vector<int64_t>{64, 300}));
}

TEST(ModelPlan, Qwen2HasQkvBiasesAndTiedDropsOutput) {
  ModelShape s = Tiny();
  s.arch = "qwen2";
  s.tied = true;
  const auto plan = PlanTensors(s, FileType::kMostlyQ8_0);
  ASSERT_EQ(plan.size(), 1u + 2 * 12 + 1);
  EXPECT_EQ(plan[3].name, "blk.0.attn_q.bias");
  EXPECT_EQ(plan[3].ne, std::vector<int64_t>{64});
  EXPECT_EQ(plan[5].name, "blk.0.attn_k.bias");
  EXPECT_EQ(plan[5].ne, std::vector<int64_t>{32});
  EXPECT_EQ(plan[7].name, "blk.0.attn_v.bias");
  EXPECT_EQ(plan[3].type, GgmlType::kF32);
  EXPECT_EQ(plan.back().name, "output_norm.weight");
  // Tied: token_embd is the classifier, so it gets the classifier's type (Q6_K doesn't fit a
  // 64-row, so Q8_0) and the classifier's scale.
  EXPECT_EQ(plan[0].type, GgmlType::kQ8_0);
  EXPECT_FLOAT_EQ(plan[0].std_dev, 1.0f / 8.0f);
}

std::vector<std::string> Names(const std::vector<PlannedTensor>& plan, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& t : plan) {
    if (t.name.rfind(prefix, 0) == 0) out.push_back(t.name.substr(prefix.size()));
  }
  return out;
}

// The per-layer tensors of each family, as llama.cpp's loaders ask for them.
TEST(ModelPlan, FamilyTensorNames) {
  using V = std::vector<std::string>;
  const std::pair<const char*, V> want[] = {
      {"qwen3", V{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                  "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight",
                  "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}},
      {"gemma", V{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                  "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                  "ffn_down.weight"}},
      {"gemma2", V{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                   "attn_output.weight", "post_attention_norm.weight", "ffn_norm.weight",
                   "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
                   "post_ffw_norm.weight"}},
      {"gemma3", V{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                   "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight",
                   "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
                   "ffn_up.weight", "ffn_down.weight", "post_ffw_norm.weight"}},
      {"phi3", V{"attn_norm.weight", "attn_qkv.weight", "attn_output.weight",
                 "ffn_norm.weight", "ffn_up.weight", "ffn_down.weight"}},
  };
  for (const auto& [arch, layer] : want) {
    SCOPED_TRACE(arch);
    ModelShape s = Tiny();
    s.arch = arch;
    ASSERT_TRUE(ValidateModelShape(s, FileType::kAllF32).ok());
    const auto plan = PlanTensors(s, FileType::kAllF32);
    EXPECT_EQ(Names(plan, "blk.1."), layer);
    const bool gemma = s.arch.rfind("gemma", 0) == 0;
    EXPECT_EQ(plan.back().name, gemma ? "output_norm.weight" : "output.weight");  // gemma: tied
    for (const auto& t : plan) {
      if (t.name.find("norm") != std::string::npos) {
        EXPECT_EQ(t.init, InitKind::kOnePlusNormal) << t.name;
      }
    }
  }
}

TEST(ModelPlan, FamilyShapes) {
  ModelShape s = Tiny();  // dim 64, 8 heads, 4 KV heads
  s.arch = "qwen3";
  s.head_dim_flag = 16;   // q_dim 128, kv_dim 64 (Qwen3 / Mistral Nemo: wider than dim / heads)
  auto plan = PlanTensors(s, FileType::kAllF32);
  auto find = [&](const std::string& n) -> const PlannedTensor& {
    for (const auto& t : plan) {
      if (t.name == n) return t;
    }
    ADD_FAILURE() << n;
    return plan[0];
  };
  EXPECT_EQ(find("blk.0.attn_q.weight").ne, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(find("blk.0.attn_k.weight").ne, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(find("blk.0.attn_output.weight").ne, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(find("blk.0.attn_q_norm.weight").ne, (std::vector<int64_t>{16}));
  EXPECT_FLOAT_EQ(find("blk.0.attn_output.weight").std_dev,
                  1.0f / std::sqrt(128.0f) / 2);  // fan-in is q_dim
  s = Tiny();
  s.arch = "phi3";
  s.rope_dim = 4;
  s.ctx = 4096;
  s.rope_orig_ctx = 1024;
  plan = PlanTensors(s, FileType::kAllF32);
  EXPECT_EQ(find("blk.0.attn_qkv.weight").ne, (std::vector<int64_t>{64, 64 + 2 * 32}));
  EXPECT_EQ(find("blk.0.ffn_up.weight").ne, (std::vector<int64_t>{64, 2 * 128}));
  EXPECT_EQ(find("rope_factors_long.weight").values, (std::vector<float>{1.0f, 16.0f}));
  EXPECT_EQ(find("rope_factors_short.weight").values, (std::vector<float>{1.0f, 1.1f}));
  // sqrt(1 + ln(4096 / 1024) / ln(1024)), as llama.cpp's Phi-3 converter computes it.
  EXPECT_NEAR(LongRopeAttnFactor(s), std::sqrt(1.0 + std::log(4.0) / std::log(1024.0)), 1e-12);
}

TEST(ModelPlan, FamilyFlagsBelongToTheirFamilies) {
  ModelShape s = Tiny();
  s.sliding_window = 16;
  ExpectInvalid(s, FileType::kAllF32, "--sliding-window, --swa-pattern and --rope-base-swa are "
                                      "for --arch gemma2|gemma3, not llama");
  s.arch = "gemma3";
  EXPECT_TRUE(ValidateModelShape(s, FileType::kAllF32).ok());
  EXPECT_EQ(SlidingWindowOf(s), 16);
  s.sliding_window = -1;
  EXPECT_EQ(SlidingWindowOf(s), 512);
  s.attn_softcap = 10;
  ExpectInvalid(s, FileType::kAllF32, "--attn-softcap and --final-softcap are for --arch gemma2");
  s = Tiny();
  s.arch = "gemma2";
  EXPECT_EQ(SlidingWindowOf(s), 4096);
  s.rope_orig_ctx = 100;
  ExpectInvalid(s, FileType::kAllF32, "--rope-orig-ctx is for --arch phi3");
  s.arch = "phi3";
  s.ctx = 100;
  ExpectInvalid(s, FileType::kAllF32, "--rope-orig-ctx 100 is outside [2, 99]");
  s = Tiny();
  s.rope_dim = 10;  // head size 8
  ExpectInvalid(s, FileType::kAllF32, "--rope-dim 10 is outside [2, 8]");
  s = Tiny();
  s.head_dim_flag = 20;  // q_dim 160: attn_output rows of 160 do not hold 32-blocks... they do
  s.n_head = 6;          // 6 x 20 = 120: they do not
  s.n_head_kv = 3;
  ExpectInvalid(s, FileType::kMostlyQ8_0, "(attn_output rows hold whole blocks)");
  EXPECT_TRUE(ValidateModelShape(s, FileType::kAllF32).ok());  // no --heads | --dim needed
}

TEST(ModelPlan, MixtureOfExpertsTensors) {
  ModelShape s = Tiny();  // dim 64, ffn 128
  s.arch = "qwen2moe";
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.expert_ffn = 32;
  s.shared_ffn = 96;
  ASSERT_TRUE(ValidateModelShape(s, FileType::kMostlyQ8_0).ok());
  const auto plan = PlanTensors(s, FileType::kMostlyQ8_0);
  using V = std::vector<std::string>;
  EXPECT_EQ(Names(plan, "blk.0."),
            (V{"attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight",
               "attn_k.bias", "attn_v.weight", "attn_v.bias", "attn_output.weight",
               "ffn_norm.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
               "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp_shexp.weight",
               "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}));
  auto find = [&](const std::string& n) -> const PlannedTensor& {
    for (const auto& t : plan) {
      if (t.name == n) return t;
    }
    ADD_FAILURE() << n;
    return plan[0];
  };
  EXPECT_EQ(find("blk.0.ffn_gate_inp.weight").ne, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(find("blk.0.ffn_gate_inp.weight").type, GgmlType::kF32);  // routers stay F32
  EXPECT_EQ(find("blk.0.ffn_gate_exps.weight").ne, (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(find("blk.0.ffn_gate_exps.weight").type, GgmlType::kQ8_0);
  EXPECT_EQ(find("blk.0.ffn_down_exps.weight").ne, (std::vector<int64_t>{32, 64, 8}));
  EXPECT_EQ(find("blk.0.ffn_down_shexp.weight").ne, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(find("blk.0.ffn_gate_inp_shexp.weight").ne, (std::vector<int64_t>{64}));
  // Mixtral: a llama with experts of --ffn width, no shared expert.
  s = Tiny();
  s.n_expert = 4;
  s.n_expert_used = 2;
  ASSERT_TRUE(ValidateModelShape(s, FileType::kAllF32).ok());
  const auto mixtral = PlanTensors(s, FileType::kAllF32);
  EXPECT_EQ(Names(mixtral, "blk.1."),
            (V{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
               "attn_output.weight", "ffn_norm.weight", "ffn_gate_inp.weight",
               "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}));
}

TEST(ModelPlan, MixtureOfExpertsFlags) {
  ModelShape s = Tiny();
  s.arch = "qwen3moe";
  ExpectInvalid(s, FileType::kAllF32, "--experts is required for --arch qwen3moe");
  s.n_expert = 8;
  s.n_expert_used = 9;
  ExpectInvalid(s, FileType::kAllF32, "--experts-used 9 is outside [1, 8]");
  s.n_expert_used = 2;
  s.shared_ffn = 64;
  ExpectInvalid(s, FileType::kAllF32, "--shared-ffn is for --arch qwen2moe");
  s = Tiny();
  s.arch = "gemma";
  s.n_expert = 8;
  ExpectInvalid(s, FileType::kAllF32, "--experts, --experts-used, --expert-ffn and --shared-ffn");
  s = Tiny();
  s.n_expert = 4;
  s.n_expert_used = 1;
  s.expert_ffn = 64;
  ExpectInvalid(s, FileType::kAllF32, "--expert-ffn: a Mixtral-style llama's experts are --ffn");
  s = Tiny();
  s.arch = "qwen3moe";
  s.n_expert = 4;
  s.n_expert_used = 1;
  s.expert_ffn = 40;
  ExpectInvalid(s, FileType::kMostlyQ4_0, "--expert-ffn / --shared-ffn must be multiples of 32");
}

TEST(ModelPlan, InitScales) {
  ModelShape s = Tiny();  // dim 64, ffn 128, 2 layers: residual scale 1/sqrt(4) = 1/2
  const auto plan = PlanTensors(s, FileType::kAllF32);
  auto find = [&](const std::string& n) -> const PlannedTensor& {
    for (const auto& t : plan) {
      if (t.name == n) return t;
    }
    ADD_FAILURE() << n;
    return plan[0];
  };
  EXPECT_FLOAT_EQ(find("token_embd.weight").std_dev, 1.0f);
  EXPECT_FLOAT_EQ(find("blk.0.attn_q.weight").std_dev, 1.0f / 8);
  EXPECT_FLOAT_EQ(find("blk.1.ffn_up.weight").std_dev, 1.0f / 8);
  EXPECT_FLOAT_EQ(find("blk.0.attn_output.weight").std_dev, 1.0f / 8 / 2);
  EXPECT_FLOAT_EQ(find("blk.0.ffn_down.weight").std_dev, 1.0f / std::sqrt(128.0f) / 2);
  EXPECT_FLOAT_EQ(find("output.weight").std_dev, 1.0f / 8);
  EXPECT_EQ(find("blk.0.ffn_norm.weight").init, InitKind::kOnes);
  EXPECT_EQ(find("output_norm.weight").init, InitKind::kOnes);
}

TEST(ModelPlan, DataBytesByHand) {
  ModelShape s = Tiny();
  s.n_layers = 1;
  const auto plan = PlanTensors(s, FileType::kMostlyQ8_0);
  // Q8_0 rows of 64 = 2 blocks * 34 bytes = 68 bytes; rows of 128 = 136 bytes.
  // token_embd 300 rows * 68; q 64*68; k,v 32*68 each; o 64*68; gate, up 128*68 each;
  // down 64 rows * 136; norms 3 * 64 * 4; output: Q6_K doesn't fit 64 -> Q8_0, 300 * 68.
  const uint64_t want = 300 * 68 + 64 * 68 + 2 * 32 * 68 + 64 * 68 + 2 * 128 * 68 + 64 * 136 +
                        3 * 64 * 4 + 300 * 68;
  EXPECT_EQ(PlannedDataBytes(plan), want);
}

}  // namespace
}  // namespace lifeline::modelgen
