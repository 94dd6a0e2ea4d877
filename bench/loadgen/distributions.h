// Random workload shapes for the load generator: a small portable RNG (the same seed gives the
// same numbers on every platform and standard library, unlike <random>'s distributions),
// request-length distributions and arrival schedules.
//
// Arrivals: open-loop Poisson at `rate` (exponential gaps, mean 1/rate), or bursty: gamma gaps
// with shape `burstiness` and scale 1/(rate * burstiness), so the mean gap stays 1/rate and
// the squared coefficient of variation is 1/burstiness (burstiness 1 = Poisson, < 1 burstier,
// > 1 more regular).
//
// Ownership: values. Thread-safety: an Rng is not shared between threads. Failure: Parse*
// returns InvalidArgument naming the flag and the offending text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/status.h"

namespace lifeline::loadgen {

// The project's xoshiro256** (base/rng.h) with the distributions the workload draws from.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform01();                 // [0, 1), 53 random bits
  double Exponential(double rate);    // mean 1/rate
  double Normal(double mean, double stddev);  // Box-Muller
  double Gamma(double shape, double scale);   // Marsaglia-Tsang
  int64_t UniformInt(int64_t lo, int64_t hi);  // inclusive; lo <= hi

 private:
  Xoshiro256StarStar gen_;
};

// Stable 64-bit mix of several values (seed, step, request index) into one seed.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

struct LengthDist {
  enum class Kind { kFixed, kUniform, kNormal };
  Kind kind = Kind::kFixed;
  double a = 1;  // fixed value; uniform low; normal mean
  double b = 0;  // uniform high; normal stddev
  // Draws a length >= 1 (normal draws are rounded and clamped to [1, mean + 6 stddev]).
  int64_t Sample(Rng& rng) const;
  std::string ToString() const;  // round-trips through ParseLengthDist
};

// "N" or "fixed:N", "uniform:LO:HI" (inclusive), "normal:MEAN:STDDEV". Values >= 1 (stddev
// >= 0), at most 1,000,000.
Result<LengthDist> ParseLengthDist(const std::string& flag, const std::string& text);

struct ArrivalSpec {
  double rate_rps = 1;     // > 0
  double burstiness = 1;   // gamma shape, > 0; 1 = Poisson
  int64_t max_requests = 0;  // stop after this many arrivals (0: no cap)
  double duration_s = 0;     // stop at the first arrival >= duration_s (0: no cap)
};

// Arrival times in seconds from the start of a step, ascending, the first at 0. At least one
// of max_requests / duration_s must be set; the list is capped at 10,000,000 entries.
std::vector<double> ArrivalTimes(const ArrivalSpec& spec, uint64_t seed);

// Parses "1,2,4.5" (positive numbers, ascending after sorting, duplicates removed).
Result<std::vector<double>> ParseLoadList(const std::string& flag, const std::string& text);

}  // namespace lifeline::loadgen
