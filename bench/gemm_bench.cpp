// Prefill GEMM micro-benchmark (not a test): for each weight type and matrix shape, the time
// of one many-token matmul (default 512 tokens, the pp512 prompt) through the kernel table,
// split into activation quantization and the rest (packing + integer GEMM), reported as
// GOP/s (2 * rows * cols * tokens per call) and as a fraction of a given int8 peak.
//
// Usage: gemm_bench [--isa=scalar|avx2|avx512] [--types=q8_0,q4_0,q4_k] [--threads=2]
//                   [--shapes=768x768,2048x768,...] (rows x cols) [--tokens=512]
//                   [--min-ms=300] [--peak-gops=1716] (int8 peak of all threads together)
//                   [--cpu-time] (process CPU time instead of wall time; use with --threads=1)
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_args.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/ggml_type.h"
#include "engine/kernels/kernel_table.h"
#include "engine/kernels/matmul_driver.h"
#include "engine/kernels/quantize_act.h"
#include "engine/kernels/ref/quants_ref.h"

namespace lifeline {
namespace {

using bench::ProcessCpuSeconds;
using bench::SplitCsv;

struct Shape {
  int64_t rows, cols;
};

struct Options {
  IsaLevel isa = DetectIsa();
  std::vector<GgmlType> types = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K};
  int threads = 2;
  // 110M: q/k/v/o 768x768, ffn up/gate 2048x768, down 768x2048. 1.1B: q/o 2048x2048, k/v
  // 256x2048, up/gate 5632x2048, down 2048x5632.
  std::vector<Shape> shapes = {{768, 768},   {2048, 768},  {768, 2048}, {2048, 2048},
                               {256, 2048},  {5632, 2048}, {2048, 5632}};
  int64_t tokens = 512;
  double min_ms = 300;
  double peak_gops = 1716;
  bool cpu_time = false;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](std::string_view key) -> const char* {
      if (a.rfind(key, 0) == 0 && a.size() > key.size() && a[key.size()] == '=') {
        return argv[i] + key.size() + 1;
      }
      return nullptr;
    };
    if (const char* v = value("--isa")) {
      const auto l = ParseIsaLevel(v);
      if (!l) return false;
      o->isa = *l;
    } else if (const char* v = value("--types")) {
      auto types = bench::ParseTypeList(v);
      if (!types) return false;
      o->types = std::move(*types);
    } else if (const char* v = value("--shapes")) {
      o->shapes.clear();
      for (const auto& s : SplitCsv(v)) {
        Shape sh{};
        if (std::sscanf(s.c_str(), "%lldx%lld", reinterpret_cast<long long*>(&sh.rows),
                        reinterpret_cast<long long*>(&sh.cols)) != 2 ||
            sh.rows <= 0 || sh.cols <= 0) {
          return false;
        }
        o->shapes.push_back(sh);
      }
    } else if (const char* v = value("--threads")) {
      o->threads = std::atoi(v);
    } else if (const char* v = value("--tokens")) {
      o->tokens = std::atoll(v);
    } else if (const char* v = value("--min-ms")) {
      o->min_ms = std::atof(v);
    } else if (a == "--cpu-time") {
      o->cpu_time = true;
    } else if (const char* v = value("--peak-gops")) {
      o->peak_gops = std::atof(v);
    } else {
      return false;
    }
  }
  return o->threads >= 1 && o->tokens >= 1;
}

// Median seconds per call of fn over at least min_ms of calls (and at least 5 calls). With
// cpu_time, process CPU seconds instead of wall seconds: on a machine shared with other work
// a single-threaded run then counts only the time it was on a core (cache interference from
// the other work still shows).
template <typename Fn>
double MedianSeconds(double min_ms, bool cpu_time, Fn&& fn) {
  fn();  // warm-up
  std::vector<double> s;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const double c0 = ProcessCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = ProcessCpuSeconds();
    s.push_back(cpu_time ? c1 - c0 : std::chrono::duration<double>(t1 - t0).count());
    if (s.size() >= 5 &&
        std::chrono::duration<double, std::milli>(t1 - start).count() >= min_ms) {
      break;
    }
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

int Main(const Options& o) {
  const KernelTable& table = KernelsFor(o.isa);
  const kernels::MatmulImpl& impl = kernels::MatmulImplFor(table.isa);
  ComputePool pool(o.threads);
  std::printf("prefill GEMM, %lld tokens, ISA %s, %d thread(s), int8 peak %.0f GOP/s, %s time\n",
              static_cast<long long>(o.tokens), std::string(IsaLevelName(table.isa)).c_str(),
              o.threads, o.peak_gops, o.cpu_time ? "cpu" : "wall");
  std::printf("%-6s %11s %10s %10s %9s %9s %7s\n", "type", "shape", "total_ms", "quant_ms",
              "GOP/s", "gemm_GOP/s", "%peak");
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType type : o.types) {
    for (const Shape& s : o.shapes) {
      if (s.cols % TypeTraits(type).block_elems != 0) continue;
      const uint64_t row_bytes = RowBytes(type, s.cols).value();
      std::vector<uint8_t> wbytes(row_bytes * static_cast<uint64_t>(s.rows));
      std::vector<float> row(static_cast<size_t>(s.cols));
      for (int64_t r = 0; r < s.rows; ++r) {
        for (auto& v : row) v = dist(rng);
        ref::QuantizeRow(type, row.data(), wbytes.data() + r * row_bytes, s.cols);
      }
      const WeightMatrix w{type, wbytes.data(), s.rows, s.cols, row_bytes};
      std::vector<float> x(static_cast<size_t>(o.tokens * s.cols));
      for (auto& v : x) v = dist(rng);
      std::vector<float> y(static_cast<size_t>(o.tokens * s.rows));
      const double total_s = MedianSeconds(o.min_ms, o.cpu_time, [&] {
        table.matmul(w, x.data(), o.tokens, y.data(), pool);
      });
      QuantizedActs acts;
      const double quant_s = MedianSeconds(o.min_ms / 4, o.cpu_time, [&] {
        kernels::QuantizeActs(impl, ActFormatFor(type), x.data(), o.tokens, s.cols, acts, pool);
      });
      const double ops = 2.0 * static_cast<double>(s.rows * s.cols * o.tokens);
      const double gemm_s = std::max(1e-9, total_s - quant_s);
      char shape[32];
      std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(s.rows),
                    static_cast<long long>(s.cols));
      std::printf("%-6s %11s %10.3f %10.3f %9.1f %9.1f %6.1f%%\n",
                  std::string(TypeTraits(type).name).c_str(), shape, total_s * 1e3, quant_s * 1e3,
                  ops / total_s / 1e9, ops / gemm_s / 1e9, 100.0 * ops / total_s / 1e9 / o.peak_gops);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace lifeline

int main(int argc, char** argv) {
  lifeline::Options o;
  if (!lifeline::ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: gemm_bench [--isa=scalar|avx2|avx512] [--types=q8_0,q4_0,q4_k] "
                 "[--threads=N] [--shapes=RxC,...] [--tokens=N] [--min-ms=N] [--peak-gops=G] [--cpu-time]\n");
    return 2;
  }
  return lifeline::Main(o);
}
