#include "analysis/binned.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace lifeline::analysis {

namespace {

constexpr double kRidge = 1e-8;
// Newton's convergence is quadratic: once the predicted gain of a step is below this, the step
// is taken without evaluating its likelihood (the error of the predicted gain is of the order
// of gain^1.5 ~ 1e-6, far below any likelihood-ratio difference that matters).
constexpr double kAcceptGain = 1e-4;
constexpr double kMergeShare = 1.0 / 2000;
constexpr int64_t kMaxMergedBins = 10;
constexpr double kTrendClamp = 4;

// log(1 + e^x) without overflow.
}  // namespace

BinnedOutcomes BinOutcomes(const std::vector<double>& latency_ms,
                           const std::vector<uint8_t>& outcome, double resolution_ms) {
  BinnedOutcomes out;
  const size_t n = latency_ms.size();
  double mean = 0, m2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = latency_ms[i] - mean;
    mean += d / static_cast<double>(i + 1);
    m2 += d * (latency_ms[i] - mean);
  }
  out.t_center_ms = mean;
  out.t_scale_ms = std::max(1e-9, std::sqrt(m2 / std::max<double>(1, static_cast<double>(n))));
  // Coarsen until the non-empty bins fit the cap (heavy tails spread sessions thinly).
  double res = resolution_ms;
  std::map<int64_t, size_t> index;
  for (;;) {
    index.clear();
    for (double t : latency_ms) {
      index.emplace(static_cast<int64_t>(std::floor(t / res)), 0);
      if (static_cast<int64_t>(index.size()) > kMaxBins) break;
    }
    if (static_cast<int64_t>(index.size()) <= kMaxBins) break;
    res *= 2;
  }
  out.resolution_ms = res;
  // Sparse stretches (tails) merge neighbouring bins until one holds kMergeShare of the
  // sessions or spans kMaxMergedBins widths: fewer bins make every fit cheaper, and where
  // sessions are that sparse the data cannot place a breakpoint more finely anyway.
  const double min_n = std::max(1.0, static_cast<double>(n) * kMergeShare);
  std::map<int64_t, int64_t> fine_count;
  for (double t : latency_ms) ++fine_count[static_cast<int64_t>(std::floor(t / res))];
  for (const auto& [k, count] : fine_count) {
    Bin* last = out.bins.empty() ? nullptr : &out.bins.back();
    if (last != nullptr && last->n < min_n && k + 1 - last->index <= kMaxMergedBins) {
      last->end_index = k + 1;
      last->n += static_cast<double>(count);
    } else {
      out.bins.push_back(Bin{k, k + 1, 0, 0, static_cast<double>(count), 0});
    }
    index[k] = out.bins.size() - 1;
  }
  for (Bin& b : out.bins) b.n = 0;
  out.bin_of_session.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t pos = index[static_cast<int64_t>(std::floor(latency_ms[i] / res))];
    Bin& b = out.bins[pos];
    b.n += 1;
    b.y += outcome[i];
    b.t_ms += latency_ms[i];
    out.bin_of_session[i] = static_cast<int32_t>(pos);
  }
  for (Bin& b : out.bins) {
    b.t_ms /= b.n;
    b.v = TrendCovariate(b.t_ms, out.t_center_ms, out.t_scale_ms);
  }
  return out;
}

double TrendCovariate(double t_ms, double c, double s) {
  return std::clamp((t_ms - c) / s, -kTrendClamp, kTrendClamp);
}

double JumpProb(const JumpFit& f, bool right, double v) {
  const double eta = (right ? f.a_right : f.a_left) + f.b1 * v + f.b2 * v * v;
  return 1.0 / (1.0 + std::exp(-eta));
}

JumpFit FitJump(const std::vector<Bin>& bins, size_t k, const JumpFit& start) {
  // One pass per iteration computes the log-likelihood, gradient and Hessian at the current
  // point; a step that lowers the likelihood is halved and re-evaluated. The Hessian's
  // intercept block is diagonal, so the 4x4 solve eliminates the intercepts first and solves
  // the 2x2 Schur complement for the trend.
  JumpFit f = start;
  f.converged = false;
  JumpFit prev = f;
  double prev_ll = -INFINITY;
  double dl = 0, dr = 0, d1 = 0, d2 = 0, step = 1;
  for (int it = 0; it < kMaxNewtonIterations; ++it) {
    double ll = -0.5 * kRidge *
                (f.a_left * f.a_left + f.a_right * f.a_right + f.b1 * f.b1 + f.b2 * f.b2);
    double gl = -kRidge * f.a_left, gr = -kRidge * f.a_right;
    double g1 = -kRidge * f.b1, g2 = -kRidge * f.b2;
    double hll = kRidge, hrr = kRidge, hl1 = 0, hl2 = 0, hr1 = 0, hr2 = 0;
    double h11 = kRidge, h12 = 0, h22 = kRidge;
    for (size_t i = 0; i < bins.size(); ++i) {
      const Bin& bin = bins[i];
      if (bin.n == 0) continue;
      const bool right = i >= k;
      const double v = bin.v, v2 = v * v;
      const double eta = (right ? f.a_right : f.a_left) + f.b1 * v + f.b2 * v2;
      const double e = std::exp(-std::abs(eta));
      const double p = eta >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      ll += bin.y * eta - bin.n * ((eta > 0 ? eta : 0) + std::log1p(e));
      const double r = bin.y - bin.n * p;
      const double w = bin.n * p * (1 - p);
      if (right) {
        gr += r;
        hrr += w;
        hr1 += w * v;
        hr2 += w * v2;
      } else {
        gl += r;
        hll += w;
        hl1 += w * v;
        hl2 += w * v2;
      }
      g1 += r * v;
      g2 += r * v2;
      h11 += w * v2;
      h12 += w * v2 * v;
      h22 += w * v2 * v2;
    }
    if (ll < prev_ll - 1e-10 && step > 1e-9) {
      step *= 0.5;  // overshoot (nearly separated data): back off along the last direction
      f.a_left = prev.a_left + step * dl;
      f.a_right = prev.a_right + step * dr;
      f.b1 = prev.b1 + step * d1;
      f.b2 = prev.b2 + step * d2;
      continue;
    }
    f.loglik = ll;
    const double s11 = h11 - hl1 * hl1 / hll - hr1 * hr1 / hrr;
    const double s12 = h12 - hl1 * hl2 / hll - hr1 * hr2 / hrr;
    const double s22 = h22 - hl2 * hl2 / hll - hr2 * hr2 / hrr;
    const double q1 = g1 - hl1 * gl / hll - hr1 * gr / hrr;
    const double q2 = g2 - hl2 * gl / hll - hr2 * gr / hrr;
    const double det = s11 * s22 - s12 * s12;
    if (!(det > 0) || !(s11 > 0)) return f;
    d1 = (s22 * q1 - s12 * q2) / det;
    d2 = (s11 * q2 - s12 * q1) / det;
    dl = (gl - hl1 * d1 - hl2 * d2) / hll;
    dr = (gr - hr1 * d1 - hr2 * d2) / hrr;
    // Newton decrement: the predicted gain of the full step. Below kAcceptGain the step is
    // taken without another pass: the quadratic model's gain is then exact to ~1e-6.
    const double gain = 0.5 * (gl * dl + gr * dr + g1 * d1 + g2 * d2);
    if (gain < kAcceptGain) {
      f.a_left += dl;
      f.a_right += dr;
      f.b1 += d1;
      f.b2 += d2;
      f.loglik = ll + gain;
      f.converged = true;
      return f;
    }
    prev = f;
    prev_ll = ll;
    step = 1;
    f.a_left += dl;
    f.a_right += dr;
    f.b1 += d1;
    f.b2 += d2;
  }
  // Out of iterations: the last point whose likelihood was evaluated.
  if (prev_ll > -INFINITY) {
    f = prev;
    f.loglik = prev_ll;
    f.converged = false;
  }
  return f;
}

}  // namespace lifeline::analysis
