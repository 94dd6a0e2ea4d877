#include "bench/bandwidth_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "base/huge_page_buffer.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/dispatch.h"

#if defined(LIFELINE_X86)
#include <immintrin.h>
#endif

namespace lifeline {
namespace {

// Read streams the way the decode kernels read weights: sequentially, with software
// prefetch ahead, from huge pages (the repacked weights live in them). Without the prefetch
// and the huge pages the probe read ~15-25 % less than the kernels themselves streamed,
// which put the decode at over 100 % of its "roofline". 16 KiB ahead read more than 2 KiB
// in sets of 18 alternating pairs of passes over 1 GiB (median ratios 1.028, 1.040, 1.025,
// 1.004 and 1.018 with 16 KiB second in each pair, 1.022 and 1.022 with it first) on the
// development machine while it was busy, when the 2 KiB probe had read less than the decode
// kernels streamed; the probe should be the best reader we have.
constexpr uint64_t kAheadBytes = 16384;

// Eight independent accumulators so the loop is limited by loads, not by an add chain;
// -O3 vectorises it at the baseline ISA.
uint64_t SumSlab(const uint64_t* p, int64_t n) {
  uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __builtin_prefetch(p + i + kAheadBytes / 8);
    for (int j = 0; j < 8; ++j) acc[j] ^= p[i + j];
  }
  for (; i < n; ++i) acc[0] ^= p[i];
  uint64_t s = 0;
  for (uint64_t a : acc) s ^= a;
  return s;
}

#if defined(LIFELINE_X86)
// 256-bit loads, two lines per iteration. Called only when the CPU has AVX2.
__attribute__((target("avx2"))) uint64_t SumSlabAvx2(const uint64_t* words, int64_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(words);
  const int64_t bytes = n * 8;
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i + kAheadBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + i + kAheadBytes + 64), _MM_HINT_T0);
    acc0 = _mm256_xor_si256(acc0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    acc1 = _mm256_xor_si256(acc1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    acc0 = _mm256_xor_si256(acc0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    acc1 = _mm256_xor_si256(acc1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(acc0, acc1);
  uint64_t s = static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
  for (int64_t w = i / 8; w < n; ++w) s ^= words[w];
  return s;
}
#endif

uint64_t Stream(const uint64_t* p, int64_t n) {
#if defined(LIFELINE_X86)
  if (DetectIsa() >= IsaLevel::kAvx2) return SumSlabAvx2(p, n);
#endif
  return SumSlab(p, n);
}

}  // namespace

Result<BandwidthProbe> BandwidthProbe::Create(ComputePool& pool, uint64_t buffer_bytes) {
  const uint64_t bytes = buffer_bytes / sizeof(uint64_t) * sizeof(uint64_t);
  if (bytes == 0) return InvalidArgument("bandwidth probe: buffer of 0 bytes");
  LL_ASSIGN_OR_RETURN(HugePageBuffer mem, HugePageBuffer::Allocate(bytes));
  uint64_t* buf = reinterpret_cast<uint64_t*>(mem.data());
  const int64_t n_words = static_cast<int64_t>(bytes / sizeof(uint64_t));
  pool.Run([&](int ith, int nth) {
    int64_t b, e;
    ComputePool::Split(n_words, ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  });
  return BandwidthProbe(pool, std::move(mem), bytes);
}

double BandwidthProbe::MeasurePass() {
  const uint64_t* buf = reinterpret_cast<const uint64_t*>(mem_.data());
  const int64_t n_words = static_cast<int64_t>(bytes_ / sizeof(uint64_t));
  std::atomic<uint64_t> sink{0};
  const auto t0 = std::chrono::steady_clock::now();
  pool_->Run([&](int ith, int nth) {
    int64_t b, e;
    ComputePool::Split(n_words, ith, nth, &b, &e);
    sink.fetch_xor(Stream(buf + b, e - b), std::memory_order_relaxed);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  checksum_ ^= sink.load();
  return static_cast<double>(bytes_) / s / 1e9;
}

BandwidthResult BandwidthProbe::Measure(int reps) {
  BandwidthResult r;
  r.buffer_bytes = bytes_;
  r.reps = reps;
  (void)MeasurePass();  // warm-up
  std::vector<double> gbs;
  for (int rep = 0; rep < reps; ++rep) gbs.push_back(MeasurePass());
  if (!gbs.empty()) {
    r.median_gb_per_s = MedianOf(gbs);
    r.max_gb_per_s = *std::max_element(gbs.begin(), gbs.end());
  }
  r.checksum = checksum_;
  return r;
}

BandwidthResult MeasureReadBandwidth(ComputePool& pool, uint64_t buffer_bytes, int reps) {
  auto probe = BandwidthProbe::Create(pool, buffer_bytes);
  if (!probe.ok()) return BandwidthResult{};  // no figure: callers print 0 and skip the roofline
  return probe->Measure(reps);
}

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace lifeline
