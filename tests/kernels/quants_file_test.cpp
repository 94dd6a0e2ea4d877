// Cross-check against files written by an independent implementation (llama.cpp's converter
// and quantizer): the shared reference models ../shared/reference/models/syn-a-*.gguf hold
// the same weights once in f32 and once per quantized type. For every quantized tensor we
//   1. dequantize it and compare with the f32 tensor: the error must be small, within the
//      same per-type bounds as our own round trips, and ordered by bit width. A wrong block
//      layout (nibble order, scale packing, high-bit placement) produces errors of the order
//      of the data itself, far above any bound;
//   2. quantize the f32 tensor with our reference quantizer and compare bytes with the file:
//      the file was written by ggml's round-to-nearest quantizers (no importance matrix), so
//      matching bytes show the quantizers make the same choices.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/kernels/ggml_type.h"
#include "engine/kernels/ref/quants_ref.h"
#include "test_paths.h"

namespace lifeline {
namespace {

struct TypeStats {
  double err2 = 0;  // sum of squared dequantization error
  double ref2 = 0;  // sum of squared f32 values
  uint64_t rows = 0;
  uint64_t rows_bytes_equal = 0;  // rows our quantizer reproduces byte for byte
  double RelRms() const { return std::sqrt(err2 / ref2); }
};

std::unique_ptr<GgufFile> OpenShared(const std::string& name) {
  auto f = GgufFile::Open(testing::SharedPath("reference/models/" + name));
  EXPECT_TRUE(f.ok()) << name << ": " << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Compares one quantized tensor with its f32 twin, adding to stats[type].
void CompareTensor(const GgufTensorInfo& q, const GgufTensorInfo& f, const std::string& file,
                   std::map<GgmlType, TypeStats>* stats) {
  const int64_t cols = q.ne[0];
  const int64_t rows = static_cast<int64_t>(q.n_elements()) / cols;
  const uint64_t row_bytes = RowBytes(q.type, cols).value();
  std::vector<float> want(static_cast<size_t>(cols));  // [cols] f32 row from the f32 file
  std::vector<float> got(static_cast<size_t>(cols));   // [cols] dequantized row
  std::vector<uint8_t> requant(row_bytes);
  TypeStats& s = (*stats)[q.type];
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(want.data(), f.data + static_cast<uint64_t>(r * cols) * 4,
                static_cast<size_t>(cols) * 4);
    const uint8_t* qrow = q.data + static_cast<uint64_t>(r) * row_bytes;
    ref::DequantizeRow(q.type, qrow, got.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_TRUE(std::isfinite(got[c])) << file << " " << q.name << " row " << r;
      const double d = static_cast<double>(got[c]) - want[c];
      s.err2 += d * d;
      s.ref2 += static_cast<double>(want[c]) * want[c];
    }
    ref::QuantizeRow(q.type, want.data(), requant.data(), cols);
    ++s.rows;
    if (std::memcmp(requant.data(), qrow, row_bytes) == 0) ++s.rows_bytes_equal;
  }
}

// Relative RMS bounds for these normally distributed weights: the derivation in
// quants_roundtrip_test.cpp (same data distribution, same formats) with the same headroom.
const std::map<GgmlType, double> kRmsBounds = {
    {GgmlType::kF16, 4e-4},  {GgmlType::kBF16, 3e-3}, {GgmlType::kQ8_0, 0.008},
    {GgmlType::kQ5_0, 0.055}, {GgmlType::kQ5_1, 0.055}, {GgmlType::kQ4_0, 0.11},
    {GgmlType::kQ4_1, 0.11},  {GgmlType::kQ6_K, 0.025}, {GgmlType::kQ5_K, 0.05},
    {GgmlType::kQ4_K, 0.10},  {GgmlType::kQ3_K, 0.19},  {GgmlType::kQ2_K, 0.42},
};

class ReferenceFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stats_ = new std::map<GgmlType, TypeStats>();
    auto f32 = OpenShared("syn-a-f32.gguf");
    if (!f32) return;
    for (const char* name :
         {"syn-a-f16.gguf", "syn-a-bf16.gguf", "syn-a-q8_0.gguf", "syn-a-q4_0.gguf",
          "syn-a-q4_1.gguf", "syn-a-q5_0.gguf", "syn-a-q5_1.gguf", "syn-a-q4_k_m.gguf",
          "syn-a-q5_k_m.gguf", "syn-a-q6_k.gguf", "syn-a-q3_k_m.gguf", "syn-a-q2_k.gguf"}) {
      auto q = OpenShared(name);
      if (!q) continue;
      for (const auto& t : q->tensors()) {
        const GgufTensorInfo* f = f32->FindTensor(t.name);
        ASSERT_NE(f, nullptr) << name << ": " << t.name << " missing from the f32 file";
        ASSERT_EQ(f->type, GgmlType::kF32) << t.name;
        ASSERT_EQ(f->n_elements(), t.n_elements()) << t.name;
        ASSERT_EQ(f->ne[0], t.ne[0]) << t.name;
        if (t.type == GgmlType::kF32) {
          // Norms stay f32 in every file: the bytes must be the same.
          EXPECT_EQ(std::memcmp(f->data, t.data, t.size_bytes), 0) << name << " " << t.name;
          continue;
        }
        ASSERT_TRUE(ref::CanDequantize(t.type)) << name << " " << t.name;
        CompareTensor(t, *f, name, stats_);
        ++tensors_compared_;
      }
    }
    for (const auto& [type, s] : *stats_) {
      std::printf("  %-5s rows %6llu  rel rms %.5f  rows requantized identically %llu\n",
                  std::string(TypeTraits(type).name).c_str(),
                  static_cast<unsigned long long>(s.rows), s.RelRms(),
                  static_cast<unsigned long long>(s.rows_bytes_equal));
    }
  }
  static void TearDownTestSuite() {
    delete stats_;
    stats_ = nullptr;
  }

  static std::map<GgmlType, TypeStats>* stats_;
  static int tensors_compared_;
};

std::map<GgmlType, TypeStats>* ReferenceFiles::stats_ = nullptr;
int ReferenceFiles::tensors_compared_ = 0;

TEST_F(ReferenceFiles, EveryWeightTypeIsCovered) {
  EXPECT_GT(tensors_compared_, 0);
  for (const auto& [type, bound] : kRmsBounds) {
    EXPECT_TRUE(stats_->count(type)) << TypeTraits(type).name << " not found in any file";
  }
}

TEST_F(ReferenceFiles, DequantizedErrorWithinBounds) {
  for (const auto& [type, s] : *stats_) {
    ASSERT_TRUE(kRmsBounds.count(type)) << TypeTraits(type).name;
    EXPECT_LE(s.RelRms(), kRmsBounds.at(type)) << TypeTraits(type).name;
    EXPECT_GT(s.RelRms(), 0.0) << TypeTraits(type).name;
  }
}

TEST_F(ReferenceFiles, ErrorOrderedByBitWidth) {
  auto err = [&](GgmlType t) { return stats_->count(t) ? stats_->at(t).RelRms() : NAN; };
  const GgmlType chain[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                            GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kBF16, GgmlType::kF16};
  for (size_t i = 0; i + 1 < std::size(chain); ++i) {
    EXPECT_GT(err(chain[i]), err(chain[i + 1]))
        << TypeTraits(chain[i]).name << " vs " << TypeTraits(chain[i + 1]).name;
  }
  EXPECT_GT(err(GgmlType::kQ4_0), err(GgmlType::kQ5_0));
  EXPECT_GT(err(GgmlType::kQ4_1), err(GgmlType::kQ5_1));
  EXPECT_GT(err(GgmlType::kQ5_1), err(GgmlType::kQ8_0));
}

TEST_F(ReferenceFiles, QuantizerReproducesFileBytes) {
  for (const auto& [type, s] : *stats_) {
    EXPECT_EQ(s.rows_bytes_equal, s.rows) << TypeTraits(type).name;
  }
}

}  // namespace
}  // namespace lifeline
