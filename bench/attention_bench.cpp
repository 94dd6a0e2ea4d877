// Attention kernel micro-benchmark: one layer's causal attention over an F16 (or Q8_0) paged
// cache, single thread, per ISA level, levels alternated within each round so that machine
// load hits them alike. Prints medians of thread CPU milliseconds per layer (CPU time, not
// wall time, so that a loaded machine's waits do not count) and the ratio to scalar.
//   prefill: 512 tokens of one sequence (tiles of 128 / n_group tokens per KV head, as
//            AttentionTileTokens in engine/model/attention.cpp)
//   decode:  one token at position 511 (x 64 to get a measurable time)
// Shapes: the 110M synthetic model (12 KV heads, group 1, head dim 64) and the 1.1B
// TinyLlama shape (4 KV heads, group 8, head dim 64). Not a test: no assertions.
#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/attention_kernels.h"
#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"

namespace lifeline {
namespace {

struct Shape {
  const char* name;
  int64_t n_kv_heads, n_group, head_dim;
};

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const AttnKvType type =
      argc > 2 && std::string(argv[2]) == "q8_0" ? AttnKvType::kQ8_0 : AttnKvType::kF16;
  const int64_t n_pos = 512, bt = 16;
  std::vector<IsaLevel> levels = {IsaLevel::kScalar};
  for (IsaLevel l : {IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (l <= DetectIsa()) levels.push_back(l);
  }
  std::printf("attention_bench: %s KV, %d rounds, single thread, thread CPU ms per layer (median)\n",
              type == AttnKvType::kF16 ? "f16" : "q8_0", rounds);
  for (const Shape& sh : {Shape{"110M", 12, 1, 64}, Shape{"1.1B", 4, 8, 64}}) {
    const int64_t hb = AttnKvHeadBytes(type, sh.head_dim);
    const uint64_t row = static_cast<uint64_t>(sh.n_kv_heads * hb);
    const int64_t n_blocks = n_pos / bt;
    std::vector<uint8_t> k(n_blocks * bt * row), v(k.size());
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Random bytes are fine for timing except NaN/Inf: fill with valid encodings.
    if (type == AttnKvType::kF16) {
      for (size_t i = 0; i + 1 < k.size(); i += 2) {
        const uint16_t a = Fp32ToFp16(nd(rng)), b = Fp32ToFp16(nd(rng));
        std::memcpy(&k[i], &a, 2);
        std::memcpy(&v[i], &b, 2);
      }
    } else {
      for (size_t i = 0; i < k.size(); ++i) k[i] = v[i] = static_cast<uint8_t>(rng() % 200);
      for (size_t i = 0; i < k.size(); i += 34) {
        const uint16_t d = Fp32ToFp16(0.01f);
        std::memcpy(&k[i], &d, 2);
        std::memcpy(&v[i], &d, 2);
      }
    }
    std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) blocks[b] = static_cast<int32_t>(n_blocks - 1 - b);
    const int64_t q_dim = sh.n_kv_heads * sh.n_group * sh.head_dim;
    std::vector<float> q(n_pos * q_dim), out(q.size());
    for (float& x : q) x = nd(rng);
    const AttnShape shape{sh.n_group, sh.head_dim, sh.head_dim, 0.125f};
    const int64_t tile = std::max<int64_t>(1, 128 / sh.n_group);
    AttnScratch scratch;
    auto run = [&](const AttentionKernels& kern, bool prefill) {
      for (int64_t h = 0; h < sh.n_kv_heads; ++h) {
        AttnKvView view;
        view.type = type;
        view.k_head = k.data() + h * hb;
        view.v_head = v.data() + h * hb;
        view.k_row_bytes = view.v_row_bytes = row;
        view.k_block_bytes = view.v_block_bytes = row * bt;
        view.blocks = blocks.data();
        view.block_tokens = bt;
        const int64_t t_begin = prefill ? 0 : n_pos - 1;
        const int64_t step = prefill ? tile : 1;
        for (int64_t t0 = t_begin; t0 < n_pos; t0 += step) {
          AttnTile tl;
          tl.q = q.data() + t0 * q_dim + h * sh.n_group * sh.head_dim;
          tl.q_token_stride = q_dim;
          tl.out = out.data() + t0 * q_dim + h * sh.n_group * sh.head_dim;
          tl.out_token_stride = q_dim;
          tl.n_tokens = std::min(step, n_pos - t0);
          tl.pos0 = t0;
          kern.attend(view, shape, tl, scratch);
        }
      }
    };
    for (bool prefill : {true, false}) {
      const int inner = prefill ? 1 : 64;
      std::vector<std::vector<double>> ms(levels.size());
      for (int r = 0; r < rounds; ++r) {
        for (size_t li = 0; li < levels.size(); ++li) {
          const AttentionKernels& kern = AttentionKernelsFor(levels[li]);
          const double t0 = ThreadCpuMs();
          for (int i = 0; i < inner; ++i) run(kern, prefill);
          ms[li].push_back((ThreadCpuMs() - t0) / inner);
        }
      }
      const double base = Median(ms[0]);
      for (size_t li = 0; li < levels.size(); ++li) {
        const double m = Median(ms[li]);
        std::printf("%-5s %-8s %-7s %9.3f ms  x%.1f vs scalar\n", sh.name,
                    prefill ? "pp512" : "tg@511", std::string(IsaLevelName(levels[li])).c_str(),
                    m, base / m);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace lifeline

int main(int argc, char** argv) { return lifeline::Main(argc, argv); }
