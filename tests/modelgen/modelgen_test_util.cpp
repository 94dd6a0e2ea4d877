#include "modelgen/modelgen_test_util.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "engine/kernels/ref/quants_ref.h"

namespace lifeline::testing {

std::string ScratchPath(const std::string& stem) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "/ll_modelgen_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + stem;
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> DequantizeTensor(const GgufTensorInfo& t) {
  const int64_t n = t.ne[0];
  const int64_t rows = static_cast<int64_t>(t.n_elements()) / n;
  const uint64_t row_bytes = *RowBytes(t.type, n);
  std::vector<float> out(t.n_elements());
  for (int64_t r = 0; r < rows; ++r) {
    ref::DequantizeRow(t.type, t.data + static_cast<uint64_t>(r) * row_bytes,
                       out.data() + r * n, n);
  }
  return out;
}

}  // namespace lifeline::testing
