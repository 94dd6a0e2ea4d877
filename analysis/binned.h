// Binary outcomes against latency, aggregated into narrow latency bins, and the two-parameter
// logistic regression the breakpoint search runs on each side of a candidate breakpoint.
//
// Why bins: the breakpoint search fits hundreds of logistic regressions per profile and the
// bootstrap runs hundreds of profiles, so each fit must cost O(bins), not O(sessions). Bins
// are `resolution_ms` wide (1 ms by default, coarsened until at most kMaxBins are non-empty;
// in sparse tails up to 10 neighbours merge until one holds 1/4000 of the sessions); each keeps the mean latency of its sessions, so the slope terms use the exact mean and only
// the breakpoint is restricted to bin edges.
//
// Why a hand-written Newton solver here: the problems have two or three parameters with a
// closed-form solve, called ~10^5 times per command; a general library call would cost more in set-up
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
  double n = 0;       // sessions
  double y = 0;       // sessions with the outcome (abandoned)
};

struct BinnedOutcomes {
  double resolution_ms = 1;
  std::vector<Bin> bins;                 // ascending index, non-empty
  std::vector<int32_t> bin_of_session;   // per input session, its bin's position in `bins`
  double t_center_ms = 0;                // mean latency; the regressions use (t - c) / s
  double t_scale_ms = 1;                 // standard deviation of latency (>= 1e-9)
};

// Bins sessions (latency_ms[i], outcome[i]); both vectors have the same non-zero length.
BinnedOutcomes BinOutcomes(const std::vector<double>& latency_ms,
                           const std::vector<uint8_t>& outcome, double resolution_ms);

// logit p(t) = b0 + b1 * (t - c) / s over bins [begin, end).
struct LogisticFit {
  double b0 = 0;
  double b1 = 0;
  double loglik = 0;
  bool converged = false;
};

// Maximum likelihood by Newton's method with step halving, starting from `start`. A tiny
// ridge (1e-8 on both coefficients) keeps separated data finite.
LogisticFit FitLogistic(const std::vector<Bin>& bins, size_t begin, size_t end, double c,
                        double s, const LogisticFit& start);

// The breakpoint model at a fixed cut k (bins [0, k) left, [k, end) right):
//   logit p(t) = a_left or a_right + b * (t - c) / s
// a level shift (the jump) with one latency trend on both sides. Same solver and ridge.
struct JumpFit {
  double a_left = 0;
  double a_right = 0;
  double b = 0;
  double loglik = 0;
  bool converged = false;
};
JumpFit FitJump(const std::vector<Bin>& bins, size_t k, double c, double s, const JumpFit& start);

// The probability the fit gives at latency t_ms.
double LogisticProb(const LogisticFit& f, double t_ms, double c, double s);

}  // namespace lifeline::analysis
