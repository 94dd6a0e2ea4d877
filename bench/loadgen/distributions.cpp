#include "bench/loadgen/distributions.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>

namespace lifeline::loadgen {

namespace {

constexpr double kMaxLength = 1'000'000;

Result<double> ParseNumber(const std::string& flag, const std::string& whole,
                           const std::string& part) {
  char* end = nullptr;
  const double v = std::strtod(part.c_str(), &end);
  if (part.empty() || end != part.c_str() + part.size() || !std::isfinite(v)) {
    return InvalidArgument(flag + " '" + whole + "': '" + part + "' is not a number");
  }
  return v;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Rng::Rng(uint64_t seed) : gen_(seed) {}

uint64_t Rng::Next() { return gen_.Next(); }

double Rng::Uniform01() { return gen_.Uniform01(); }

double Rng::Exponential(double rate) { return -std::log1p(-Uniform01()) / rate; }

double Rng::Normal(double mean, double stddev) {
  // 1 - u is in (0, 1], so the log is finite.
  const double u1 = 1.0 - Uniform01();
  const double u2 = Uniform01();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::Gamma(double shape, double scale) {
  if (shape < 1.0) {
    // Gamma(k) = Gamma(k + 1) * U^(1/k) for k < 1.
    const double u = 1.0 - Uniform01();
    return Gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0;
    double v = 0;
    do {
      x = Normal(0, 1);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - Uniform01();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
  }
}

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the full 64-bit range
  return lo + static_cast<int64_t>(Next() % span);     // bias <= span / 2^64, negligible
}

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a;
  uint64_t h = SplitMix64(&x);
  x = h ^ b;
  h = SplitMix64(&x);
  x = h ^ c;
  return SplitMix64(&x);
}

int64_t LengthDist::Sample(Rng& rng) const {
  switch (kind) {
    case Kind::kFixed:
      return static_cast<int64_t>(a);
    case Kind::kUniform:
      return rng.UniformInt(static_cast<int64_t>(a), static_cast<int64_t>(b));
    case Kind::kNormal: {
      const double hi = std::max(1.0, a + 6 * b);
      return static_cast<int64_t>(std::clamp(std::round(rng.Normal(a, b)), 1.0, std::round(hi)));
    }
  }
  return 1;
}

std::string LengthDist::ToString() const {
  switch (kind) {
    case Kind::kFixed: return "fixed:" + FormatNumber(a);
    case Kind::kUniform: return "uniform:" + FormatNumber(a) + ":" + FormatNumber(b);
    case Kind::kNormal: return "normal:" + FormatNumber(a) + ":" + FormatNumber(b);
  }
  return "";
}

Result<LengthDist> ParseLengthDist(const std::string& flag, const std::string& text) {
  std::vector<std::string> parts = Split(text, ':');
  if (parts.size() == 1) parts.insert(parts.begin(), "fixed");
  LengthDist d;
  const std::string& kind = parts[0];
  size_t want = 0;
  if (kind == "fixed") {
    d.kind = LengthDist::Kind::kFixed;
    want = 2;
  } else if (kind == "uniform") {
    d.kind = LengthDist::Kind::kUniform;
    want = 3;
  } else if (kind == "normal") {
    d.kind = LengthDist::Kind::kNormal;
    want = 3;
  } else {
    return InvalidArgument(flag + " '" + text +
                           "': expected N, fixed:N, uniform:LO:HI or normal:MEAN:STDDEV");
  }
  if (parts.size() != want) {
    return InvalidArgument(flag + " '" + text + "': " + kind + " takes " +
                           std::to_string(want - 1) + " number(s)");
  }
  LL_ASSIGN_OR_RETURN(d.a, ParseNumber(flag, text, parts[1]));
  if (want == 3) {
    LL_ASSIGN_OR_RETURN(d.b, ParseNumber(flag, text, parts[2]));
  }
  const bool integral = d.kind == LengthDist::Kind::kNormal ||
                        (d.a == std::floor(d.a) && (want == 2 || d.b == std::floor(d.b)));
  if (!integral) return InvalidArgument(flag + " '" + text + "': lengths must be integers");
  if (d.a < 1 || d.a > kMaxLength) {
    return InvalidArgument(flag + " '" + text + "': " + FormatNumber(d.a) +
                           " is outside [1, 1000000]");
  }
  if (d.kind == LengthDist::Kind::kUniform && (d.b < d.a || d.b > kMaxLength)) {
    return InvalidArgument(flag + " '" + text + "': high " + FormatNumber(d.b) +
                           " must be in [low " + FormatNumber(d.a) + ", 1000000]");
  }
  if (d.kind == LengthDist::Kind::kNormal && (d.b < 0 || d.b > kMaxLength)) {
    return InvalidArgument(flag + " '" + text + "': stddev " + FormatNumber(d.b) +
                           " is outside [0, 1000000]");
  }
  return d;
}

std::vector<double> ArrivalTimes(const ArrivalSpec& spec, uint64_t seed) {
  constexpr int64_t kHardCap = 10'000'000;
  const int64_t cap = spec.max_requests > 0 ? std::min(spec.max_requests, kHardCap) : kHardCap;
  const bool bounded = spec.max_requests > 0 || spec.duration_s > 0;
  std::vector<double> out;
  if (!bounded || !(spec.rate_rps > 0) || !(spec.burstiness > 0)) return out;
  Rng rng(seed);
  const bool poisson = spec.burstiness == 1.0;
  const double scale = 1.0 / (spec.rate_rps * spec.burstiness);
  double t = 0;
  while (static_cast<int64_t>(out.size()) < cap) {
    if (spec.duration_s > 0 && t >= spec.duration_s) break;
    out.push_back(t);
    t += poisson ? rng.Exponential(spec.rate_rps) : rng.Gamma(spec.burstiness, scale);
  }
  return out;
}

Result<std::vector<double>> ParseLoadList(const std::string& flag, const std::string& text) {
  std::vector<double> out;
  for (const std::string& part : Split(text, ',')) {
    LL_ASSIGN_OR_RETURN(const double v, ParseNumber(flag, text, part));
    if (!(v > 0) || v > 1e6) {
      return InvalidArgument(flag + " '" + text + "': " + part + " must be in (0, 1000000]");
    }
    out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace lifeline::loadgen
