// The project's reproducible random numbers: splitmix64 (seeding, hashing small integers into
// well-spread seeds) and xoshiro256** (the stream the sampler and the load generator draw
// from). Fixed, library-independent output for a seed on every platform, unlike the standard
// library's engines-plus-distributions.
//
// Ownership: value types. Thread-safety: one generator per thread. Failure: none.
#pragma once

#include <cstdint>

namespace lifeline {

// One splitmix64 step (Steele, Lea, Flood 2014): advances *state by the golden gamma and
// returns its finalized mix. Every seed gives a full-period, well-mixed sequence.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman, Vigna 2018), its four words seeded from splitmix64(seed).
class Xoshiro256StarStar {
 public:
  explicit Xoshiro256StarStar(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& word : s_) word = SplitMix64(&sm);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace lifeline
