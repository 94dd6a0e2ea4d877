// Random numbers for the bootstrap and the simulator: GSL's MT19937 behind a small owner, and
// a seed derivation so that each replicate (or each simulated scenario) has its own stream
// decided by (seed, purpose, index) only. GSL's generators and samplers are the same on every
// platform, unlike the standard library's distributions, so outputs reproduce bit for bit.
//
// Ownership: Rng owns its gsl_rng. Thread-safety: one Rng per thread. Failure: allocation
// failure aborts (GSL's default error handler is turned off by the callers).
#pragma once

#include <cstdint>
#include <memory>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

namespace lifeline::analysis {

// splitmix64 of a combination of the inputs: well-spread 64-bit seeds from small integers.
inline uint64_t DeriveSeed(uint64_t seed, uint64_t purpose, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + purpose * 0xBF58476D1CE4E5B9ull + index + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : r_(gsl_rng_alloc(gsl_rng_mt19937), &gsl_rng_free) {
    // MT19937 takes an unsigned long seed; 0 maps to GSL's default, so avoid it.
    gsl_rng_set(r_.get(), static_cast<unsigned long>(seed % 0xFFFFFFFFull) + 1);
  }
  gsl_rng* get() const { return r_.get(); }
  double Uniform() const { return gsl_rng_uniform(r_.get()); }      // [0, 1)
  uint64_t Below(uint64_t n) const { return gsl_rng_uniform_int(r_.get(), n); }  // n <= 2^32

 private:
  std::unique_ptr<gsl_rng, void (*)(gsl_rng*)> r_;
};

}  // namespace lifeline::analysis
