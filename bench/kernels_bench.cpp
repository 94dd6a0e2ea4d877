// Matmul micro-benchmark (not a test): per weight type and thread count,
//   GEMV (1 token) weight-streaming GB/s against the machine's measured DRAM read bandwidth,
//     on a rotating set of copies of the matrix much larger than the last-level cache, and
//     on one cache-resident copy; in the row layout and, where the table asks for it, in the
//     row-interleaved layout a model repacks to at load ("il16");
//   GEMM (--tokens, default 512) GFLOP/s (2 * rows * cols * tokens per call).
// Usage: kernels_bench [--isa=scalar|avx2|avx512] [--types=q4_0,q8_0,...] [--threads=1,2]
//                      [--rows=2048] [--cols=5632] [--tokens=512] [--min-ms=400] [--no-gemm]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/huge_page_buffer.h"
#include "bench/bandwidth_probe.h"
#include "bench/bench_args.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/ggml_type.h"
#include "engine/kernels/interleave.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

using bench::ProcessCpuSeconds;
using bench::SplitCsv;

struct Options {
  IsaLevel isa = DetectIsa();
  std::vector<GgmlType> types = {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                 GgmlType::kQ6_K, GgmlType::kQ5_K, GgmlType::kQ5_0,
                                 GgmlType::kQ4_1, GgmlType::kQ5_1, GgmlType::kF16,
                                 GgmlType::kBF16, GgmlType::kF32};
  std::vector<int> threads = {1, 2};
  int64_t rows = 2048;
  int64_t cols = 5632;
  int64_t tokens = 512;
  double min_ms = 400;
  bool gemm = true;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](std::string_view key) -> std::optional<std::string_view> {
      if (a.rfind(key, 0) == 0 && a.size() > key.size() && a[key.size()] == '=') {
        return a.substr(key.size() + 1);
      }
      return std::nullopt;
    };
    if (auto v = value("--isa")) {
      const auto l = ParseIsaLevel(*v);
      if (!l) return false;
      o->isa = *l;
    } else if (auto v = value("--types")) {
      auto types = bench::ParseTypeList(*v);
      if (!types) return false;
      o->types = std::move(*types);
    } else if (auto v = value("--threads")) {
      o->threads.clear();
      for (const auto& n : SplitCsv(*v)) o->threads.push_back(std::atoi(n.c_str()));
    } else if (auto v = value("--rows")) {
      o->rows = std::atoll(std::string(*v).c_str());
    } else if (auto v = value("--cols")) {
      o->cols = std::atoll(std::string(*v).c_str());
    } else if (auto v = value("--tokens")) {
      o->tokens = std::atoll(std::string(*v).c_str());
    } else if (auto v = value("--min-ms")) {
      o->min_ms = std::atof(std::string(*v).c_str());
    } else if (a == "--no-gemm") {
      o->gemm = false;
    } else {
      return false;
    }
  }
  return true;
}

// One quantized matrix (ref::QuantizeRow of N(0, 1) values), replicated `copies` times.
std::vector<uint8_t> MakeWeights(GgmlType type, int64_t rows, int64_t cols, int copies,
                                 uint64_t* matrix_bytes) {
  const uint64_t row_bytes = RowBytes(type, cols).value();
  *matrix_bytes = row_bytes * static_cast<uint64_t>(rows);
  std::vector<uint8_t> out(*matrix_bytes * static_cast<uint64_t>(copies));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = dist(rng);
    ref::QuantizeRow(type, row.data(), out.data() + r * row_bytes, cols);
  }
  for (int c = 1; c < copies; ++c) {
    std::memcpy(out.data() + c * *matrix_bytes, out.data(), *matrix_bytes);
  }
  return out;
}

struct CallTime {
  double wall_s;  // mean wall-clock seconds per call
  double cpu_s;   // mean process CPU seconds per call (all threads, spin-waits included)
};

// Per-call times of fn(call_index), after one warm-up call, over at least min_ms. On a
// machine shared with other work, cpu_s / threads approximates the time the kernel needs
// while it actually holds the cores.
template <typename Fn>
CallTime TimePerCall(double min_ms, Fn&& fn) {
  fn(0);
  int64_t calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = ProcessCpuSeconds();
  double elapsed = 0;
  do {
    fn(++calls);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed * 1e3 < min_ms);
  const double n = static_cast<double>(calls);
  return {elapsed / n, (ProcessCpuSeconds() - c0) / n};
}

void BenchType(const Options& o, GgmlType type, double dram_gbs) {
  constexpr uint64_t kColdBytes = uint64_t{512} << 20;  // 16x the 32 MiB L3 of the target
  uint64_t matrix_bytes = 0;
  const uint64_t one = RowBytes(type, o.cols).value() * static_cast<uint64_t>(o.rows);
  const int copies = static_cast<int>(std::max<uint64_t>(2, (kColdBytes + one - 1) / one));
  const std::vector<uint8_t> weights = MakeWeights(type, o.rows, o.cols, copies, &matrix_bytes);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(o.tokens * o.cols));
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(o.tokens * o.rows));
  const KernelTable& k = KernelsFor(o.isa);
  auto view = [&](int copy) {
    WeightMatrix w;
    w.type = type;
    w.data = weights.data() + static_cast<uint64_t>(copy) * matrix_bytes;
    w.rows = o.rows;
    w.cols = o.cols;
    w.row_bytes = RowBytes(type, o.cols).value();
    return w;
  };
  // The row-interleaved copy (what a model loads when the table asks for the type), in
  // huge pages as the model's repacked weights are.
  HugePageBuffer interleaved;
  const bool asked = (k.interleaved_types >> static_cast<uint32_t>(type) & 1u) != 0 &&
                     kernels::CanInterleave(view(0));
  if (asked) {
    Result<HugePageBuffer> buf = HugePageBuffer::Allocate(weights.size());
    if (!buf.ok()) {
      std::fprintf(stderr, "kernels_bench: %s\n", buf.status().ToString().c_str());
      std::exit(1);
    }
    interleaved = std::move(*buf);
    for (int c = 0; c < copies; ++c) {
      kernels::InterleaveRows(view(c), interleaved.data() + static_cast<uint64_t>(c) * matrix_bytes);
    }
  }
  for (const bool il : {false, true}) {
    if (il && !asked) continue;
    auto layout_view = [&](int copy) {
      WeightMatrix w = view(copy);
      if (il) {
        w.data = interleaved.data() + static_cast<uint64_t>(copy) * matrix_bytes;
        w.layout = WeightLayout::kInterleaved16;
      }
      return w;
    };
    for (int nt : o.threads) {
      ComputePool pool(nt);
      const CallTime cold = TimePerCall(o.min_ms, [&](int64_t i) {
        k.matmul(layout_view(static_cast<int>(i % copies)), x.data(), 1, y.data(), pool);
      });
      const CallTime hot = TimePerCall(o.min_ms, [&](int64_t) {
        k.matmul(layout_view(0), x.data(), 1, y.data(), pool);
      });
      const double bytes = static_cast<double>(matrix_bytes);
      const double cold_gbs = bytes / cold.wall_s / 1e9;
      std::printf("%-5s %-6s %-4s thr=%d | GEMV %7.1f us %5.1f GB/s (%5.1f%% of DRAM) cpu-time "
                  "%5.1f GB/s | cache-hot %5.1f GB/s cpu-time %5.1f GB/s",
                  std::string(TypeTraits(type).name).c_str(),
                  std::string(IsaLevelName(k.isa)).c_str(), il ? "il16" : "rows", nt,
                  cold.wall_s * 1e6, cold_gbs, 100.0 * cold_gbs / dram_gbs,
                  bytes / (cold.cpu_s / nt) / 1e9, bytes / hot.wall_s / 1e9,
                  bytes / (hot.cpu_s / nt) / 1e9);
      if (o.gemm) {
        const CallTime gemm = TimePerCall(o.min_ms, [&](int64_t) {
          k.matmul(layout_view(0), x.data(), o.tokens, y.data(), pool);
        });
        const double flops = 2.0 * static_cast<double>(o.rows * o.cols * o.tokens);
        std::printf(" | GEMM(%lld tok) %6.1f GFLOP/s cpu-time %6.1f",
                    static_cast<long long>(o.tokens), flops / gemm.wall_s / 1e9,
                    flops / (gemm.cpu_s / nt) / 1e9);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace lifeline

int main(int argc, char** argv) {
  using namespace lifeline;
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: kernels_bench [--isa=scalar|avx2|avx512] [--types=q4_0,...] "
                 "[--threads=1,2] [--rows=N] [--cols=N] [--tokens=N] [--min-ms=N] [--no-gemm]\n");
    return 2;
  }
  std::printf("matmul %lld x %lld, ISA requested %s (detected %s)\n", static_cast<long long>(o.rows),
              static_cast<long long>(o.cols), std::string(IsaLevelName(o.isa)).c_str(),
              std::string(IsaLevelName(DetectIsa())).c_str());
  double dram_gbs = 0;
  for (int nt : o.threads) {
    ComputePool pool(nt);
    const BandwidthResult bw = MeasureReadBandwidth(pool, uint64_t{1} << 30, 5);
    std::printf("DRAM read bandwidth, %d thread(s): probe median %.1f / max %.1f GB/s\n", nt,
                bw.median_gb_per_s, bw.max_gb_per_s);
    dram_gbs = std::max(dram_gbs, bw.max_gb_per_s);
  }
  for (GgmlType t : o.types) BenchType(o, t, dram_gbs);
  return 0;
}
