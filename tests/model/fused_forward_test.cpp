// Fused forward pass: the model runs Q/K/V and gate/up as grouped products with RMSNorm,
// bias, SwiGLU and the residual adds as prologue / epilogue hooks (MatmulGroup). The same
// kernel table with the group entry removed runs the unfused twin (the hooks as whole passes
// around separate matmul calls). Both use the same activation quantization and tile
// kernels, so the logits must be bit-identical (tolerance 0) for prompts (packed GEMM path)
// and single-token decode steps (GEMV tiles), with pools of 1 and 3 threads.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/kernel_table.h"
#include "engine/model/llama_model.h"
#include "model/model_test_util.h"

namespace lifeline {
namespace {

// Prompt of `prompt` tokens in one batch, then `decode` single-token steps; all logits.
std::vector<float> PromptThenDecode(const LlamaModel& m, int n_threads, int prompt, int decode) {
  ComputePool pool(n_threads);
  ContextOptions opts;
  opts.n_ctx = 64;
  auto ctx = LlamaContext::Create(m.config(), opts);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (!ctx.ok()) return {};
  const SeqId seq = (*ctx)->NewSequence();
  const int64_t n_vocab = m.config().n_vocab;
  std::vector<float> all;
  std::vector<BatchToken> batch;
  for (int i = 0; i < prompt; ++i) batch.push_back({(7 * i + 3) % 40, i, seq, true});
  std::vector<float> logits(static_cast<size_t>(prompt * n_vocab));
  Status st = m.Eval(batch, **ctx, pool, logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  all.insert(all.end(), logits.begin(), logits.end());
  for (int i = 0; i < decode; ++i) {
    const BatchToken t{(5 * i + 1) % 40, prompt + i, seq, true};
    std::vector<float> one(static_cast<size_t>(n_vocab));
    st = m.Eval({&t, 1}, **ctx, pool, one);
    EXPECT_TRUE(st.ok()) << st.ToString();
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

void CheckFusedEqualsUnfused(TinyModelSpec spec) {
  const std::string path = TempModelPath("fused");
  ASSERT_TRUE(WriteTinyModel(spec, path).ok());
  KernelTable unfused = BestKernels();
  unfused.matmul_group = nullptr;
  ASSERT_NE(BestKernels().matmul_group, nullptr);
  auto f1 = GgufFile::Open(path);
  auto f2 = GgufFile::Open(path);
  std::remove(path.c_str());
  ASSERT_TRUE(f1.ok() && f2.ok());
  auto fused_model = LlamaModel::Load(std::move(*f1), BestKernels());
  auto plain_model = LlamaModel::Load(std::move(*f2), unfused);
  ASSERT_TRUE(fused_model.ok()) << fused_model.status().ToString();
  ASSERT_TRUE(plain_model.ok()) << plain_model.status().ToString();
  for (int threads : {1, 3}) {
    const std::vector<float> a = PromptThenDecode(**fused_model, threads, 40, 4);
    const std::vector<float> b = PromptThenDecode(**plain_model, threads, 40, 4);
    ASSERT_EQ(a.size(), b.size());
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i] && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << TypeTraits(spec.matrix_type).name << " threads=" << threads
                              << ": first at " << first << " fused " << a[first] << " unfused "
                              << b[first];
  }
}

TinyModelSpec Spec(GgmlType type, int64_t n_embd, int64_t n_ff) {
  TinyModelSpec s;
  s.n_embd = n_embd;
  s.n_ff = n_ff;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.matrix_type = type;
  return s;
}

TEST(FusedForward, Q8_0MatchesUnfused) { CheckFusedEqualsUnfused(Spec(GgmlType::kQ8_0, 128, 352)); }

TEST(FusedForward, Q4_KMatchesUnfused) { CheckFusedEqualsUnfused(Spec(GgmlType::kQ4_K, 256, 512)); }

TEST(FusedForward, F32MatchesUnfused) { CheckFusedEqualsUnfused(Spec(GgmlType::kF32, 64, 96)); }

// qwen2: the Q/K/V biases are added in the grouped product's epilogue.
TEST(FusedForward, Qwen2BiasMatchesUnfused) {
  TinyModelSpec s = Spec(GgmlType::kQ8_0, 128, 160);
  s.arch = "qwen2";
  s.with_qkv_bias = true;
  CheckFusedEqualsUnfused(s);
}

}  // namespace
}  // namespace lifeline
