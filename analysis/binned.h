// Binary outcomes against latency, aggregated into narrow latency bins, and the breakpoint
// model (segmented logistic regression) the search fits at each candidate cut.
//
// Why bins: the breakpoint search fits hundreds of logistic regressions per profile and the
// bootstrap runs hundreds of profiles, so each fit must cost O(bins), not O(sessions). Bins
// are `resolution_ms` wide (1 ms by default, coarsened until at most kMaxBins are non-empty;
// in sparse tails up to 10 neighbours merge until one holds 1/2000 of the sessions); each
// keeps the mean latency of its sessions, so the trend terms use the exact mean and only the
// breakpoint is restricted to bin edges.
//
// Why a hand-written Newton solver here: the problem has four parameters with a closed-form
// solve, called ~10^5 times per command; a general library call would cost more in set-up
// than the solve. The nonlinear decay fits use GSL (decay.cpp).
//
// Ownership: value types. Thread-safety: pure functions. Failure: none; a fit that does not
// converge in kMaxNewtonIterations reports converged = false with its last iterate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lifeline::analysis {

inline constexpr int64_t kMaxBins = 8192;
inline constexpr int kMaxNewtonIterations = 60;

struct Bin {
  int64_t index = 0;      // first floor(latency / resolution) it holds
  int64_t end_index = 1;  // one past the last (sparse stretches merge several widths)
  double t_ms = 0;        // mean latency of the sessions in the bin
  double v = 0;           // TrendCovariate(t_ms): the regressions' latency term
  double n = 0;       // sessions
  double y = 0;       // sessions with the outcome (abandoned)
};

struct BinnedOutcomes {
  double resolution_ms = 1;
  std::vector<Bin> bins;                 // ascending index, non-empty
  std::vector<int32_t> bin_of_session;   // per input session, its bin's position in `bins`
  double t_center_ms = 0;                // c: mean latency
  double t_scale_ms = 1;                 // s: standard deviation of latency (>= 1e-9)
};

// Bins sessions (latency_ms[i], outcome[i]); both vectors have the same non-zero length.
BinnedOutcomes BinOutcomes(const std::vector<double>& latency_ms,
                           const std::vector<uint8_t>& outcome, double resolution_ms);

// The breakpoint model at a fixed cut k (bins [0, k) left, [k, end) right):
//   logit p(t) = (a_left or a_right) + b1 v + b2 v^2,   v = clamp((t - c) / s, -4, 4)
// a level shift (the jump) with one smooth latency trend on both sides. The quadratic lets
// the trend bend (a rate rising linearly in probability is curved in log-odds) so that
// curvature is not mistaken for a jump; the clamp at 4 standard deviations keeps a few
// extreme latencies from steering the trend. k = 0 is the no-break model (a_right only).
// Maximum likelihood by Newton's method with step halving; a tiny ridge (1e-8) keeps
// separated data finite.
struct JumpFit {
  double a_left = 0;
  double a_right = 0;
  double b1 = 0;
  double b2 = 0;
  double loglik = 0;
  bool converged = false;
};
JumpFit FitJump(const std::vector<Bin>& bins, size_t k, const JumpFit& start);

// The trend covariate v of a latency, and the probability a fit gives on one side.
double TrendCovariate(double t_ms, double c, double s);
double JumpProb(const JumpFit& f, bool right, double v);

}  // namespace lifeline::analysis
