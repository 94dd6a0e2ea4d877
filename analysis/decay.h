// Click-through and conversion decay with latency, fitted by maximum likelihood:
//   CTR(t)   = c0 exp(-a t)                 P(click | t), every event
//   CVR(t)   = v0 exp(-b t - g t^2)         P(conversion | click, t) (or per event, below)
//   joint(t) = CTR(t) CVR(t) = c0 v0 exp(-a t) exp(-b t) exp(-g t^2)
// and the independent-exponentials comparison: the same with g = 0.
//
// Why maximum likelihood and not least squares on binned rates: each event is a Bernoulli
// trial, so the likelihood uses every event at its own latency with the right variance
// (rates near 0 are precise, mid rates noisy), needs no choice of bins, and its curvature
// gives the standard errors. Binned rates are used only to report R^2 and to plot.
// The optimiser is GSL's BFGS (gsl_multimin_fdfminimizer_vector_bfgs2) with analytic
// gradients, in seconds internally (a, b ~ 1, g ~ 1) so that the problem is well scaled;
// standard errors come from the inverse observed information (GSL Cholesky).
//
// Conversions are counted per click when every converted event was clicked ("cvr_base":
// "clicks"); otherwise per event ("events"). Either way joint(t) is the model of the
// fraction of events that were clicked and converted.
//
// Ownership: value types. Thread-safety: pure functions (GSL's error handler must be off;
// FitDecay turns it off). Failure: InvalidArgument for one-class outcomes or too few events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::analysis {

struct DecayInput {
  std::vector<double> latency_ms;
  std::vector<uint8_t> clicked;
  std::vector<uint8_t> converted;
};

struct ExpFit {  // p(t) = p0 exp(-k1 t - k2 t^2), rates per ms (per ms^2)
  double p0 = 0, k1 = 0, k2 = 0;
  double p0_se = 0, k1_se = 0, k2_se = 0;
  double loglik = 0;
  bool converged = false;
  int iterations = 0;
};

struct RateBin {  // equal-count latency bins, for R^2 and plots
  double t_lo_ms = 0, t_hi_ms = 0, t_mean_ms = 0;
  double events = 0, clicks = 0, conversions = 0, joint = 0;  // joint: clicked and converted
};

struct DecayResult {
  int64_t n = 0, clicks = 0, conversions = 0;
  bool cvr_per_click = true;
  ExpFit ctr;          // c0, a
  ExpFit cvr;          // v0, b, g
  ExpFit cvr_no_g;     // v0, b with g = 0 (the independent exponentials)
  double ctr_r2 = 0, cvr_r2 = 0, joint_r2 = 0, independent_r2 = 0;
  double g_lr = 0, g_p_value = 1;  // likelihood-ratio test of g = 0 (chi-square, 1 df)
  std::vector<RateBin> bins;
};

Result<DecayResult> FitDecay(const DecayInput& in, int n_bins = 20);

// {"ctr":{"c0","a"},"cvr":{"v0","b","g"},"joint":{"a","b","g","r2"},"independent":{"r2"}}
// plus standard errors and counts (docs/analysis.md).
nlohmann::json DecayJson(const DecayResult& r);

// The curve at latency t_ms (capped at 1).
double ExpAt(const ExpFit& f, double t_ms);

}  // namespace lifeline::analysis
