// Attention kernels over a paged K/V cache:
//   - the scalar reference against a naive two-pass softmax written here (double precision,
//     full score vector, values decoded by this file's own F16 / Q8_0 decoders);
//   - every SIMD level the CPU supports against the scalar reference, over random shapes
//     (head dims 64 / 128 / odd, different K and V dims, GQA groups 1 / 4 / 8, positions not
//     a multiple of 16, many blocks, tiles of many query tokens, scattered block tables);
//   - the SIMD exp against std::exp in double over the softmax's input range;
//   - stale bytes (NaN) in unused cache memory never reach an output;
//   - soft-capped scores and sliding windows (a window's earlier blocks hold NaN bytes: the
//     kernels must not read them at all).
#include "engine/kernels/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/dispatch.h"
#include "engine/kernels/fp16.h"

namespace lifeline {
namespace {

// Scalar reference vs naive softmax: both exact up to f32 rounding of a few hundred terms.
constexpr double kRefVsNaiveAbsTol = 5e-6;
// SIMD vs scalar reference: different summation order (16-lane dots, two accumulation chains)
// and the polynomial exp (AttnExpMaxRelError); outputs are convex combinations of V values of
// magnitude ~1-4, so an absolute bound.
constexpr double kSimdVsRefAbsTol = 2e-5;

const char* TypeName(AttnKvType t) {
  return t == AttnKvType::kF32 ? "f32" : t == AttnKvType::kF16 ? "f16" : "q8_0";
}

// Encodes a head row of n values into the storage type (test's own encoders).
void EncodeHead(AttnKvType type, const float* x, int64_t n, uint8_t* dst) {
  if (type == AttnKvType::kF32) {
    std::memcpy(dst, x, static_cast<size_t>(n) * 4);
  } else if (type == AttnKvType::kF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = Fp32ToFp16(x[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    for (int64_t b = 0; b * 32 < n; ++b) {
      const int64_t m = std::min<int64_t>(32, n - b * 32);
      float amax = 0;
      for (int64_t i = 0; i < m; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      const float d = amax / 127.0f;
      const uint16_t dh = Fp32ToFp16(d);
      uint8_t* blk = dst + b * 34;
      std::memcpy(blk, &dh, 2);
      std::memset(blk + 2, 0, 32);
      for (int64_t i = 0; i < m; ++i) {
        const int q = d == 0 ? 0 : static_cast<int>(std::lround(x[b * 32 + i] / d));
        blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127, 127)));
      }
    }
  }
}

double DecodeHead(AttnKvType type, const uint8_t* src, int64_t i) {
  if (type == AttnKvType::kF32) {
    float f;
    std::memcpy(&f, src + 4 * i, 4);
    return f;
  }
  if (type == AttnKvType::kF16) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    return Fp16ToFp32(h);
  }
  const uint8_t* blk = src + (i / 32) * 34;
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  return static_cast<double>(Fp16ToFp32(dh)) * static_cast<int8_t>(blk[2 + i % 32]);
}

struct Case {
  AttnKvType type = AttnKvType::kF16;
  int64_t n_kv_heads = 2;
  int64_t n_group = 1;
  int64_t hdk = 64;
  int64_t hdv = 64;
  int64_t block_tokens = 16;
  int64_t pos0 = 0;
  int64_t n_tokens = 1;
  uint32_t seed = 1;
  float q_sigma = 1.0f;
  float softcap = 0.0f;
  int64_t window = 0;
};

std::string Describe(const Case& c) {
  return std::string(TypeName(c.type)) + " kv_heads " + std::to_string(c.n_kv_heads) +
         " group " + std::to_string(c.n_group) + " hdk " + std::to_string(c.hdk) + " hdv " +
         std::to_string(c.hdv) + " bt " + std::to_string(c.block_tokens) + " pos0 " +
         std::to_string(c.pos0) + " tokens " + std::to_string(c.n_tokens) + " softcap " +
         std::to_string(c.softcap) + " window " + std::to_string(c.window);
}

// A paged cache with a scattered block table; unused memory (other blocks, slots past the
// last position, row padding) is filled with NaN bytes.
struct Fixture {
  Case c;
  int64_t k_head_bytes = 0, v_head_bytes = 0;
  uint64_t k_row_bytes = 0, v_row_bytes = 0;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> blocks;
  std::vector<float> q;  // [n_tokens][n_kv_heads * n_group][hdk]
  int64_t q_stride = 0, out_stride = 0;

  explicit Fixture(const Case& cs) : c(cs) {
    std::mt19937 rng(c.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    k_head_bytes = AttnKvHeadBytes(c.type, c.hdk);
    v_head_bytes = AttnKvHeadBytes(c.type, c.hdv);
    // Rows carry 6 bytes of padding past the last head: strides are not just head sizes.
    k_row_bytes = static_cast<uint64_t>(c.n_kv_heads * k_head_bytes + 6);
    v_row_bytes = static_cast<uint64_t>(c.n_kv_heads * v_head_bytes + 6);
    const int64_t n_pos = c.pos0 + c.n_tokens;
    const int64_t n_used = (n_pos + c.block_tokens - 1) / c.block_tokens;
    const int64_t n_phys = n_used + 3;
    blocks.resize(static_cast<size_t>(n_phys));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    k.assign(static_cast<size_t>(n_phys * c.block_tokens) * k_row_bytes, 0xff);  // NaN bytes
    v.assign(static_cast<size_t>(n_phys * c.block_tokens) * v_row_bytes, 0xff);
    std::vector<float> row(static_cast<size_t>(std::max(c.hdk, c.hdv)));
    for (int64_t p = 0; p < n_pos; ++p) {
      const uint64_t slot = static_cast<uint64_t>(blocks[static_cast<size_t>(p / c.block_tokens)] *
                                                  c.block_tokens + p % c.block_tokens);
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        for (int64_t i = 0; i < c.hdk; ++i) row[i] = nd(rng);
        EncodeHead(c.type, row.data(), c.hdk, &k[slot * k_row_bytes + h * k_head_bytes]);
        for (int64_t i = 0; i < c.hdv; ++i) row[i] = 2.0f * nd(rng);
        EncodeHead(c.type, row.data(), c.hdv, &v[slot * v_row_bytes + h * v_head_bytes]);
      }
    }
    // Blocks wholly before the first token's window may already hold another sequence's
    // data: NaN bytes here, which reach an output only if a kernel reads them.
    const int64_t first_block = AttnFirstVisible(c.pos0, c.window) / c.block_tokens;
    for (int64_t b = 0; b < first_block; ++b) {
      const uint64_t base = static_cast<uint64_t>(blocks[static_cast<size_t>(b)] * c.block_tokens);
      std::fill_n(k.begin() + static_cast<int64_t>(base * k_row_bytes),
                  c.block_tokens * static_cast<int64_t>(k_row_bytes), uint8_t{0xff});
      std::fill_n(v.begin() + static_cast<int64_t>(base * v_row_bytes),
                  c.block_tokens * static_cast<int64_t>(v_row_bytes), uint8_t{0xff});
    }
    q_stride = c.n_kv_heads * c.n_group * c.hdk + 3;
    out_stride = c.n_kv_heads * c.n_group * c.hdv + 5;
    q.resize(static_cast<size_t>(c.n_tokens * q_stride));
    for (float& x : q) x = c.q_sigma * nd(rng);
  }

  AttnKvView View(int64_t head) const {
    AttnKvView view;
    view.type = c.type;
    view.k_head = k.data() + head * k_head_bytes;
    view.v_head = v.data() + head * v_head_bytes;
    view.k_block_bytes = k_row_bytes * static_cast<uint64_t>(c.block_tokens);
    view.v_block_bytes = v_row_bytes * static_cast<uint64_t>(c.block_tokens);
    view.k_row_bytes = k_row_bytes;
    view.v_row_bytes = v_row_bytes;
    view.blocks = blocks.data();
    view.block_tokens = c.block_tokens;
    return view;
  }

  AttnShape Shape() const {
    return AttnShape{c.n_group, c.hdk, c.hdv,
                     static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hdk))), c.softcap,
                     c.window};
  }

  // All KV heads through one kernel, the tile split into runs of `tile` tokens.
  std::vector<float> Run(const AttentionKernels& kern, int64_t tile) const {
    std::vector<float> out(static_cast<size_t>(c.n_tokens * out_stride), -777.0f);
    AttnScratch scratch;
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      for (int64_t t0 = 0; t0 < c.n_tokens; t0 += tile) {
        AttnTile tl;
        tl.q = q.data() + t0 * q_stride + h * c.n_group * c.hdk;
        tl.q_token_stride = q_stride;
        tl.out = out.data() + t0 * out_stride + h * c.n_group * c.hdv;
        tl.out_token_stride = out_stride;
        tl.n_tokens = std::min(tile, c.n_tokens - t0);
        tl.pos0 = c.pos0 + t0;
        kern.attend(View(h), Shape(), tl, scratch);
      }
    }
    return out;
  }

  // Naive: full score vector in double, two-pass softmax over the visible positions.
  double Naive(int64_t t, int64_t head, int64_t j, int64_t d) const {
    const int64_t n_kv = c.pos0 + t + 1;
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, n_kv - c.window) : 0;
    std::vector<double> sc(static_cast<size_t>(n_kv));
    double mx = -1e300;
    for (int64_t p = first; p < n_kv; ++p) {
      const uint64_t slot = static_cast<uint64_t>(blocks[static_cast<size_t>(p / c.block_tokens)] *
                                                  c.block_tokens + p % c.block_tokens);
      const uint8_t* kr = &k[slot * k_row_bytes + head * k_head_bytes];
      double dot = 0;
      for (int64_t e = 0; e < c.hdk; ++e) {
        dot += static_cast<double>(q[t * q_stride + (head * c.n_group + j) * c.hdk + e]) *
               DecodeHead(c.type, kr, e);
      }
      double score = dot / std::sqrt(static_cast<double>(c.hdk));
      if (c.softcap > 0) score = c.softcap * std::tanh(score / c.softcap);
      sc[static_cast<size_t>(p)] = score;
      mx = std::max(mx, sc[static_cast<size_t>(p)]);
    }
    double den = 0, num = 0;
    for (int64_t p = first; p < n_kv; ++p) {
      const uint64_t slot = static_cast<uint64_t>(blocks[static_cast<size_t>(p / c.block_tokens)] *
                                                  c.block_tokens + p % c.block_tokens);
      const double w = std::exp(sc[static_cast<size_t>(p)] - mx);
      den += w;
      num += w * DecodeHead(c.type, &v[slot * v_row_bytes + head * v_head_bytes], d);
    }
    return num / den;
  }

  // Only the output fields the kernel owns; the stride padding must stay untouched.
  template <class F>
  void ForEachOut(F f) const {
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        for (int64_t j = 0; j < c.n_group; ++j) {
          for (int64_t d = 0; d < c.hdv; ++d) {
            f(t, h, j, d, t * out_stride + (h * c.n_group + j) * c.hdv + d);
          }
        }
      }
    }
  }
};

std::vector<IsaLevel> SimdLevels() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : {IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (l <= DetectIsa()) out.push_back(l);
  }
  return out;
}

TEST(AttentionKernels, ScalarMatchesNaiveSoftmax) {
  const AttentionKernels& ref = AttentionKernelsFor(IsaLevel::kScalar);
  ASSERT_EQ(ref.isa, IsaLevel::kScalar);
  std::vector<Case> cases;
  for (AttnKvType type : {AttnKvType::kF32, AttnKvType::kF16, AttnKvType::kQ8_0}) {
    cases.push_back({type, 2, 2, 3, 5, 16, 30, 9, 11});
    cases.push_back({type, 1, 4, 64, 64, 16, 0, 40, 12});
    cases.push_back({type, 2, 1, 40, 24, 8, 77, 3, 13});
    // Soft-capped (large scores, so the cap bends them), windows shorter and longer than a
    // block, a tile spanning more than the window.
    cases.push_back({type, 2, 2, 32, 32, 16, 20, 9, 14, 8.0f, 5.0f, 0});
    cases.push_back({type, 1, 4, 64, 64, 16, 40, 30, 15, 1.0f, 0.0f, 7});
    cases.push_back({type, 2, 1, 40, 24, 8, 77, 20, 16, 2.0f, 50.0f, 33});
    cases.push_back({type, 2, 2, 16, 16, 16, 0, 50, 17, 1.0f, 0.0f, 16});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(Describe(c));
    const Fixture fx(c);
    const std::vector<float> out = fx.Run(ref, 7);
    double max_err = 0;
    fx.ForEachOut([&](int64_t t, int64_t h, int64_t j, int64_t d, int64_t idx) {
      const double err = std::fabs(out[static_cast<size_t>(idx)] - fx.Naive(t, h, j, d));
      max_err = std::max(max_err, err);
      ASSERT_LE(err, kRefVsNaiveAbsTol) << "t " << t << " head " << h << " j " << j << " d " << d;
    });
    std::printf("[attn] scalar vs naive %-50s max err %.2e\n", Describe(c).c_str(), max_err);
  }
}

TEST(AttentionKernels, SimdMatchesScalarOnRandomShapes) {
  const std::vector<IsaLevel> levels = SimdLevels();
  if (levels.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  const AttentionKernels& ref = AttentionKernelsFor(IsaLevel::kScalar);
  std::vector<Case> cases;
  uint32_t seed = 100;
  for (AttnKvType type : {AttnKvType::kF16, AttnKvType::kQ8_0, AttnKvType::kF32}) {
    for (int64_t hd : {64, 128, 5, 72, 33}) {
      for (int64_t group : {1, 4, 8}) {
        Case c;
        c.type = type;
        c.n_kv_heads = group == 8 ? 1 : 2;
        c.n_group = group;
        c.hdk = hd;
        c.hdv = hd == 72 ? 40 : hd;  // K and V dims may differ
        c.block_tokens = hd == 33 ? 8 : 16;
        c.pos0 = (seed * 37) % 90;   // not a multiple of 16 in general
        c.n_tokens = group == 1 ? 70 : 1 + seed % 23;
        c.seed = seed++;
        cases.push_back(c);
      }
    }
  }
  // Decode-shaped: one token deep into a long sequence; and sharp softmax (large scores).
  cases.push_back({AttnKvType::kF16, 4, 8, 128, 128, 16, 1000, 1, 7});
  cases.push_back({AttnKvType::kF16, 2, 1, 64, 64, 16, 0, 130, 8, 6.0f});
  // Soft caps and sliding windows (window 1 sees only itself; windows not a block multiple;
  // a decode token far past its window; a long tile crossing window boundaries).
  cases.push_back({AttnKvType::kF16, 2, 2, 64, 64, 16, 50, 40, 20, 6.0f, 5.0f, 0});
  cases.push_back({AttnKvType::kF32, 2, 4, 128, 128, 16, 300, 1, 21, 6.0f, 30.0f, 0});
  cases.push_back({AttnKvType::kF16, 2, 1, 64, 64, 16, 0, 90, 22, 1.0f, 0.0f, 1});
  cases.push_back({AttnKvType::kQ8_0, 2, 4, 72, 40, 16, 37, 60, 23, 1.0f, 0.0f, 24});
  cases.push_back({AttnKvType::kF16, 1, 8, 128, 128, 16, 1000, 1, 24, 1.0f, 0.0f, 100});
  cases.push_back({AttnKvType::kF16, 2, 2, 33, 33, 8, 5, 70, 25, 3.0f, 20.0f, 17});
  // Small KV blocks (a kernel step of several blocks reads each position through its own
  // block), with a window whose first visible block starts inside a step and whose earlier
  // blocks hold NaN; one-position blocks; a tile ending exactly on a 64-position boundary.
  cases.push_back({AttnKvType::kF16, 2, 4, 64, 64, 4, 150, 40, 26, 2.0f, 0.0f, 37});
  cases.push_back({AttnKvType::kQ8_0, 1, 2, 64, 64, 1, 90, 38, 27, 1.0f, 0.0f, 0});
  cases.push_back({AttnKvType::kF16, 2, 1, 64, 64, 16, 0, 128, 28, 1.0f, 0.0f, 0});
  for (IsaLevel level : levels) {
    const AttentionKernels& simd = AttentionKernelsFor(level);
    ASSERT_EQ(simd.isa, level);
    double worst = 0;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(IsaLevelName(level)) + " " + Describe(c));
      const Fixture fx(c);
      const std::vector<float> want = fx.Run(ref, 1);
      const std::vector<float> one_by_one = fx.Run(simd, 1);
      for (int64_t tile : {int64_t{1}, int64_t{16}, c.n_tokens}) {
        const std::vector<float> got = fx.Run(simd, tile);
        // A token's result must not depend on the tile it was computed in (batched prefill
        // and one-token decode must agree exactly).
        ASSERT_EQ(0, std::memcmp(got.data(), one_by_one.data(), got.size() * sizeof(float)))
            << "tile " << tile;
        fx.ForEachOut([&](int64_t t, int64_t h, int64_t j, int64_t d, int64_t idx) {
          const double err = std::fabs(got[static_cast<size_t>(idx)] - want[static_cast<size_t>(idx)]);
          worst = std::max(worst, err);
          ASSERT_LE(err, kSimdVsRefAbsTol)
              << "tile " << tile << " t " << t << " head " << h << " j " << j << " d " << d;
        });
        // Padding between tokens' outputs is not written.
        for (int64_t t = 0; t < c.n_tokens; ++t) {
          for (int64_t i = c.n_kv_heads * c.n_group * c.hdv; i < fx.out_stride; ++i) {
            ASSERT_EQ(got[static_cast<size_t>(t * fx.out_stride + i)], -777.0f);
          }
        }
      }
    }
    std::printf("[attn] %s vs scalar: %zu shapes, max abs err %.2e (tolerance %.1e)\n",
                std::string(IsaLevelName(level)).c_str(), cases.size(), worst, kSimdVsRefAbsTol);
  }
}

TEST(AttentionKernels, SimdExpWithinStatedRelativeError) {
  const std::vector<IsaLevel> levels = SimdLevels();
  if (levels.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  // Dense grid over the softmax's range, plus points near multiples of ln2 / 2 (the reduction
  // boundaries) and the endpoints.
  std::vector<float> x;
  for (int i = 0; i <= 400000; ++i) x.push_back(-87.0f * static_cast<float>(i) / 400000.0f);
  for (int k = 0; k < 250; ++k) {
    const float b = -0.5f * 0.69314718f * static_cast<float>(k);
    x.push_back(std::nextafter(b, 0.0f));
    x.push_back(std::nextafter(b, -100.0f));
  }
  x.push_back(-0.0f);
  for (IsaLevel level : levels) {
    const AttentionKernels& kern = AttentionKernelsFor(level);
    std::vector<float> y(x.size());
    kern.exp_row(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      const double rel = std::fabs(y[i] - want) / want;
      worst = std::max(worst, rel);
      ASSERT_LE(rel, AttnExpMaxRelError) << IsaLevelName(level) << " x " << x[i];
    }
    std::printf("[attn] %s exp max rel err %.2e (stated %.1e)\n",
                std::string(IsaLevelName(level)).c_str(), worst, AttnExpMaxRelError);
    // Masked lanes feed -inf - max; the clamp turns that into exp(-87), which the kernel then
    // zeroes by mask. Tails shorter than a vector go through the same code.
    const float tail[3] = {-1.0f, -2.0f, -3.0f};
    float ty[3];
    kern.exp_row(tail, ty, 3);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(ty[i], std::exp(tail[i]), 1e-6 * std::exp(tail[i]));
  }
}

TEST(AttentionKernels, HeadBytes) {
  EXPECT_EQ(AttnKvHeadBytes(AttnKvType::kF32, 64), 256);
  EXPECT_EQ(AttnKvHeadBytes(AttnKvType::kF16, 64), 128);
  EXPECT_EQ(AttnKvHeadBytes(AttnKvType::kQ8_0, 64), 68);
  EXPECT_EQ(AttnKvHeadBytes(AttnKvType::kQ8_0, 8), 34);   // one partly used block
  EXPECT_EQ(AttnKvHeadBytes(AttnKvType::kQ8_0, 33), 68);
}

}  // namespace
}  // namespace lifeline
