// Small, fast, reproducible random numbers for synthetic weights: splitmix64 (seeding and
// hashing) and xoshiro256++ (the stream), plus a Box-Muller normal sampler.
//
// Reproducibility contract: a stream depends only on the 64-bit seed it was built from, and
// FillNormal consumes the stream in a fixed order, so a row seeded from (model seed, tensor
// name, row index) has the same values with any thread count. (Across C libraries the last bit
// of logf/cosf may differ, so byte-identity is promised per build, not across platforms.)
// Note: std::mt19937 + std::normal_distribution was rejected: the distribution's algorithm is
// implementation-defined (different bytes per standard library) and it is several times slower.
//
// Thread-safety: value types; one generator per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "base/rng.h"

namespace lifeline::modelgen {

using lifeline::SplitMix64;  // base/rng.h

// FNV-1a over the bytes of s: a stable name hash (std::hash is not stable across libraries).
inline uint64_t HashName(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Seed for one row of one tensor: mixes the three inputs so neighbouring rows and tensors get
// unrelated streams.
inline uint64_t RowSeed(uint64_t model_seed, uint64_t name_hash, uint64_t row) {
  uint64_t s = model_seed;
  uint64_t a = SplitMix64(&s) ^ name_hash;
  uint64_t b = SplitMix64(&a) ^ row;
  return SplitMix64(&b);
}

class Xoshiro256pp {
 public:
  explicit Xoshiro256pp(uint64_t seed) {
    for (auto& w : s_) w = SplitMix64(&seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[0] + s_[3], 23) + s_[0];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in (0, 1]: 24 random bits, never 0 (log() below needs that).
  float UniformOpenClosed() { return static_cast<float>((Next() >> 40) + 1) * 0x1p-24f; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Fills dst[0..n) with N(0, std_dev^2) samples (Box-Muller: two normals per two uniforms; one
// 64-bit draw supplies both uniforms).
inline void FillNormal(Xoshiro256pp* rng, float std_dev, float* dst, int64_t n) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t bits = rng->Next();
    const float u1 = static_cast<float>((bits >> 40) + 1) * 0x1p-24f;          // (0, 1]
    const float u2 = static_cast<float>((bits >> 16) & 0xffffff) * 0x1p-24f;   // [0, 1)
    const float r = std_dev * std::sqrt(-2.0f * std::log(u1));
    const float a = kTwoPi * u2;
    dst[i] = r * std::cos(a);
    dst[i + 1] = r * std::sin(a);
  }
  if (i < n) {
    const float u1 = rng->UniformOpenClosed();
    const float u2 = rng->UniformOpenClosed();
    dst[i] = std_dev * std::sqrt(-2.0f * std::log(u1)) * std::cos(kTwoPi * u2);
  }
}

}  // namespace lifeline::modelgen
