// quantize end to end: error bounds derived from the block formats, the reference files
// written by llama.cpp's quantizer from the same f32 model, metadata copying, and failures.
#include "modelgen/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "test_paths.h"
#include "modelgen/make_model.h"
#include "modelgen/modelgen_test_util.h"

namespace lifeline::modelgen {
namespace {

using testing::DequantizeTensor;
using testing::ScratchPath;

std::unique_ptr<GgufFile> OpenOrDie(const std::string& path) {
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << path << ": " << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

Result<QuantizeStats> Quantize(const std::string& in, const std::string& out, FileType ftype,
                               int* warnings = nullptr) {
  QuantizeOptions o;
  o.in_path = in;
  o.out_path = out;
  o.ftype = ftype;
  o.threads = 2;
  if (warnings) o.warn = [warnings](const std::string&) { ++*warnings; };
  return QuantizeModel(o);
}

const std::string kSynF32 = "reference/models/syn-a-f32.gguf";

// Q8_0 stores per 32 values d = amax/127 (as fp16) and q = round(x/d) in [-127, 127]. The
// error of q * fp16(d) is at most d/2 (rounding of x/d) plus |q| * |d - fp16(d)|
// <= 127 * d * 2^-11 (fp16 keeps 11 significant bits), so |x - x'| <= d * (1/2 + 127/2048).
TEST(Quantize, F32ToQ8_0WithinTheDerivedBound) {
  const std::string out = ScratchPath("q8.gguf");
  auto st = Quantize(testing::SharedPath(kSynF32), out, FileType::kMostlyQ8_0);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto src = OpenOrDie(testing::SharedPath(kSynF32));
  auto dst = OpenOrDie(out);
  ASSERT_TRUE(src && dst);
  for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight"}) {
    const GgufTensorInfo* t = dst->FindTensor(name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, GgmlType::kQ8_0) << name;
    const auto x = DequantizeTensor(*src->FindTensor(name));
    const auto y = DequantizeTensor(*t);
    ASSERT_EQ(x.size(), y.size());
    for (size_t b = 0; b < x.size(); b += 32) {
      float amax = 0;
      for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float d = amax / 127.0f;
      const float bound = d * (0.5f + 127.0f / 2048.0f) * (1 + 1e-5f) + 1e-12f;
      for (size_t i = b; i < b + 32; ++i) {
        ASSERT_LE(std::fabs(x[i] - y[i]), bound) << name << " element " << i;
      }
    }
  }
  std::remove(out.c_str());
}

// syn-a-f32 quantized by us vs the same file quantized by llama.cpp: same type and shape per
// tensor, same metadata, and dequantized values that agree (both use the round-to-nearest
// reference formulas without importance matrix). Reports the share of bit-identical values.
class QuantizeVsReference : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeVsReference, SameTypesAndValues) {
  const std::string type = GetParam();
  const std::string out = ScratchPath("syn-" + type + ".gguf");
  auto st = Quantize(testing::SharedPath(kSynF32), out, FileTypeFromName(type)->ftype);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto mine = OpenOrDie(out);
  auto ref = OpenOrDie(testing::SharedPath("reference/models/syn-a-" + type + ".gguf"));
  auto src = OpenOrDie(testing::SharedPath(kSynF32));
  ASSERT_TRUE(mine && ref && src);
  EXPECT_EQ(mine->GetUint("general.file_type").value(),
            ref->GetUint("general.file_type").value());
  EXPECT_EQ(mine->GetUint("general.quantization_version").value(), 2u);
  ASSERT_EQ(mine->tensors().size(), ref->tensors().size());
  uint64_t n_total = 0, n_identical = 0;
  double worst_ratio = 0;  // max over tensors of rms(mine - ref) / rms(ref - f32)
  std::string worst;
  for (const auto& r : ref->tensors()) {
    const GgufTensorInfo* t = mine->FindTensor(r.name);
    ASSERT_NE(t, nullptr) << r.name;
    ASSERT_EQ(TypeTraits(t->type).name, TypeTraits(r.type).name) << r.name;
    for (int i = 0; i < 4; ++i) ASSERT_EQ(t->ne[i], r.ne[i]) << r.name;
    ASSERT_EQ(t->size_bytes, r.size_bytes) << r.name;
    // Observed: every tensor of every type is byte-identical to llama.cpp's encoding.
    EXPECT_EQ(0, std::memcmp(t->data, r.data, r.size_bytes)) << r.name << " bytes differ";
    const auto a = DequantizeTensor(*t), b = DequantizeTensor(r);
    const auto x = DequantizeTensor(*src->FindTensor(r.name));
    double diff2 = 0, err2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      n_identical += std::memcmp(&a[i], &b[i], 4) == 0;
      diff2 += double(a[i] - b[i]) * (a[i] - b[i]);
      err2 += double(b[i] - x[i]) * (b[i] - x[i]);
    }
    n_total += a.size();
    // Two different but equally good quantizers would differ by about sqrt(2) times the
    // quantization error; the same formulas should differ by far less (float evaluation order
    // only). Lossless tensors (err2 == 0) must match exactly.
    const double ratio = err2 > 0 ? std::sqrt(diff2 / err2) : (diff2 > 0 ? 1e9 : 0);
    if (ratio > worst_ratio) worst_ratio = ratio, worst = r.name;
  }
  const double identical = double(n_identical) / double(n_total);
  std::printf("[ syn-a %-6s ] %.4f%% of %llu values bit-identical to llama.cpp's; worst "
              "rms(diff)/rms(quant error) = %.3g (%s)\n",
              type.c_str(), 100 * identical, (unsigned long long)n_total, worst_ratio,
              worst.c_str());
  EXPECT_LT(worst_ratio, 0.1) << worst;
  std::remove(out.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllSynA, QuantizeVsReference,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"));

TEST(Quantize, CopiesMetadataAndSmallTensors) {
  const std::string out = ScratchPath("copy.gguf");
  ASSERT_TRUE(Quantize(testing::SharedPath(kSynF32), out, FileType::kMostlyQ4_0).ok());
  auto src = OpenOrDie(testing::SharedPath(kSynF32));
  auto dst = OpenOrDie(out);
  ASSERT_TRUE(src && dst);
  for (const auto& kv : src->kvs()) {
    const GgufKv* m = dst->FindKv(kv.key);
    ASSERT_NE(m, nullptr) << kv.key;
    if (kv.key == "general.file_type") {
      EXPECT_EQ(m->value.u64, 2u);
      continue;
    }
    EXPECT_EQ(m->value.type, kv.value.type) << kv.key;
    EXPECT_EQ(m->value.u64, kv.value.u64) << kv.key;
    EXPECT_EQ(m->value.str, kv.value.str) << kv.key;
    ASSERT_EQ(m->value.array_bytes, kv.value.array_bytes) << kv.key;
    if (kv.value.array_bytes) {
      EXPECT_EQ(0, std::memcmp(m->value.array_data, kv.value.array_data, kv.value.array_bytes));
    }
  }
  // Input had no quantization_version: it is appended.
  EXPECT_EQ(dst->kvs().size(), src->kvs().size() + 1);
  EXPECT_EQ(dst->kvs().back().key, "general.quantization_version");
  // Tensor order is kept; 1-D tensors are copied byte for byte.
  ASSERT_EQ(dst->tensors().size(), src->tensors().size());
  for (size_t i = 0; i < src->tensors().size(); ++i) {
    const auto& s = src->tensors()[i];
    const auto& d = dst->tensors()[i];
    EXPECT_EQ(s.name, d.name);
    if (s.n_dims == 1) {
      ASSERT_EQ(d.type, s.type);
      ASSERT_EQ(d.size_bytes, s.size_bytes);
      EXPECT_EQ(0, std::memcmp(d.data, s.data, s.size_bytes)) << s.name;
    }
  }
  std::remove(out.c_str());
}

// stories260K: 64-wide rows and ffn 172. Q4_0 blocks fit 64 but not 172 (ffn_down rows) ->
// F16; the classifier can't take Q6_K's 256-blocks -> Q8_0; norms stay F32.
TEST(Quantize, RealModelWithOddShapesFallsBack) {
  const std::string out = ScratchPath("stories.gguf");
  auto st = Quantize(testing::SharedPath("models/stories260K.gguf"), out, FileType::kMostlyQ4_0);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto f = OpenOrDie(out);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kF16);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_up.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(f->FindTensor("blk.4.attn_k.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(f->FindTensor("output.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("output_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(f->GetUint("general.file_type").value(), 2u);  // absent in the input
  std::remove(out.c_str());
}

TEST(Quantize, RequantizingWarnsOnce) {
  MakeModelOptions m;
  m.shape.dim = 64;
  m.shape.n_layers = 2;
  m.shape.n_head = 4;
  m.shape.n_head_kv = 4;
  m.shape.ffn = 128;
  m.shape.vocab = 300;
  m.ftype = FileType::kMostlyQ8_0;
  m.seed = 5;
  m.out_path = ScratchPath("q8src.gguf");
  ASSERT_TRUE(MakeModel(m).ok());
  const std::string out = ScratchPath("q4.gguf");
  int warnings = 0;
  auto st = Quantize(m.out_path, out, FileType::kMostlyQ4_0, &warnings);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(warnings, 1);
  EXPECT_GT(st->tensors_requantized, 0);
  // Same type again: everything is copied, nothing re-encoded, no warning.
  const std::string again = ScratchPath("q8again.gguf");
  warnings = 0;
  st = Quantize(m.out_path, again, FileType::kMostlyQ8_0, &warnings);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(warnings, 0);
  EXPECT_EQ(st->tensors_converted, 0);
  EXPECT_TRUE(testing::ReadAll(again) == testing::ReadAll(m.out_path));
  // Decoding to a float type is no second rounding: no warning.
  const std::string f32 = ScratchPath("f32.gguf");
  warnings = 0;
  st = Quantize(m.out_path, f32, FileType::kAllF32, &warnings);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(warnings, 0);
  EXPECT_GT(st->tensors_converted, 0);
  for (const auto& p : {m.out_path, out, again, f32}) std::remove(p.c_str());
}

TEST(Quantize, RefusesBadInputAndSelfOverwrite) {
  const std::string junk = ScratchPath("junk.gguf");
  {
    std::ofstream o(junk, std::ios::binary);
    o << "GGUF\x03\x00\x00\x00 this is not a model";
  }
  const std::string out = ScratchPath("never.gguf");
  auto st = Quantize(junk, out, FileType::kMostlyQ4_0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kDataLoss) << st.status().ToString();
  EXPECT_NE(st.status().message().find(junk), std::string::npos);
  EXPECT_TRUE(testing::ReadAll(out).empty());

  st = Quantize("/nonexistent-dir/in.gguf", out, FileType::kMostlyQ4_0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("/nonexistent-dir/in.gguf"), std::string::npos);

  st = Quantize(junk, junk, FileType::kMostlyQ4_0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);

  st = Quantize(testing::SharedPath(kSynF32), "/nonexistent-dir/out.gguf", FileType::kMostlyQ4_0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kIo);
  std::remove(junk.c_str());
}

}  // namespace
}  // namespace lifeline::modelgen
