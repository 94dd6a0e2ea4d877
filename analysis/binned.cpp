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
constexpr double kMergeShare = 1.0 / 4000;
constexpr int64_t kMaxMergedBins = 10;

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
      out.bins.push_back(Bin{k, k + 1, 0, static_cast<double>(count), 0});
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
  for (Bin& b : out.bins) b.t_ms /= b.n;
  return out;
}

LogisticFit FitLogistic(const std::vector<Bin>& bins, size_t begin, size_t end, double c,
                        double s, const LogisticFit& start) {
  // One pass per iteration computes the log-likelihood, gradient and Hessian at the current
  // point; a step that lowers the likelihood is halved and re-evaluated.
  LogisticFit f = start;
  f.converged = false;
  double prev_b0 = f.b0, prev_b1 = f.b1, prev_ll = -INFINITY;
  double d0 = 0, d1 = 0, step = 1;
  for (int it = 0; it < kMaxNewtonIterations; ++it) {
    double ll = -0.5 * kRidge * (f.b0 * f.b0 + f.b1 * f.b1);
    double g0 = -kRidge * f.b0, g1 = -kRidge * f.b1;
    double h00 = kRidge, h01 = 0, h11 = kRidge;
    for (size_t i = begin; i < end; ++i) {
      const Bin& b = bins[i];
      if (b.n == 0) continue;
      const double u = (b.t_ms - c) / s;
      const double eta = f.b0 + f.b1 * u;
      const double e = std::exp(-std::abs(eta));
      const double p = eta >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      ll += b.y * eta - b.n * ((eta > 0 ? eta : 0) + std::log1p(e));
      const double r = b.y - b.n * p;
      const double w = b.n * p * (1 - p);
      g0 += r;
      g1 += r * u;
      h00 += w;
      h01 += w * u;
      h11 += w * u * u;
    }
    if (ll < prev_ll - 1e-10 && step > 1e-9) {
      step *= 0.5;  // overshoot (nearly separated data): back off along the last direction
      f.b0 = prev_b0 + step * d0;
      f.b1 = prev_b1 + step * d1;
      continue;
    }
    f.loglik = ll;
    const double det = h00 * h11 - h01 * h01;
    if (!(det > 0)) return f;
    d0 = (h11 * g0 - h01 * g1) / det;
    d1 = (h00 * g1 - h01 * g0) / det;
    // Newton decrement: the predicted gain of the full step. Below kAcceptGain the step is
    // taken without another pass: the quadratic model's gain is then exact to ~1e-6.
    const double gain = 0.5 * (g0 * d0 + g1 * d1);
    if (gain < kAcceptGain) {
      f.b0 += d0;
      f.b1 += d1;
      f.loglik = ll + gain;
      f.converged = true;
      return f;
    }
    prev_b0 = f.b0;
    prev_b1 = f.b1;
    prev_ll = ll;
    step = 1;
    f.b0 += d0;
    f.b1 += d1;
  }
  // Out of iterations: the last point whose likelihood was evaluated.
  if (prev_ll > -INFINITY) {
    f.b0 = prev_b0;
    f.b1 = prev_b1;
    f.loglik = prev_ll;
  }
  return f;
}

JumpFit FitJump(const std::vector<Bin>& bins, size_t k, double c, double s, const JumpFit& start) {
  // As FitLogistic, with parameters (a_left, a_right, b). The Hessian's intercept block is
  // diagonal, so the 3x3 solve eliminates the intercepts first (Schur complement on b).
  JumpFit f = start;
  f.converged = false;
  JumpFit prev = f;
  double prev_ll = -INFINITY;
  double dl = 0, dr = 0, db = 0, step = 1;
  for (int it = 0; it < kMaxNewtonIterations; ++it) {
    double ll = -0.5 * kRidge * (f.a_left * f.a_left + f.a_right * f.a_right + f.b * f.b);
    double gl = -kRidge * f.a_left, gr = -kRidge * f.a_right, gb = -kRidge * f.b;
    double hll = kRidge, hrr = kRidge, hlb = 0, hrb = 0, hbb = kRidge;
    for (size_t i = 0; i < bins.size(); ++i) {
      const Bin& bin = bins[i];
      if (bin.n == 0) continue;
      const bool right = i >= k;
      const double u = (bin.t_ms - c) / s;
      const double eta = (right ? f.a_right : f.a_left) + f.b * u;
      const double e = std::exp(-std::abs(eta));
      const double p = eta >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      ll += bin.y * eta - bin.n * ((eta > 0 ? eta : 0) + std::log1p(e));
      const double r = bin.y - bin.n * p;
      const double w = bin.n * p * (1 - p);
      (right ? gr : gl) += r;
      (right ? hrr : hll) += w;
      (right ? hrb : hlb) += w * u;
      gb += r * u;
      hbb += w * u * u;
    }
    if (ll < prev_ll - 1e-10 && step > 1e-9) {
      step *= 0.5;
      f.a_left = prev.a_left + step * dl;
      f.a_right = prev.a_right + step * dr;
      f.b = prev.b + step * db;
      continue;
    }
    f.loglik = ll;
    const double schur = hbb - hlb * hlb / hll - hrb * hrb / hrr;
    if (!(schur > 0) || !(hll > 0) || !(hrr > 0)) return f;
    db = (gb - hlb * gl / hll - hrb * gr / hrr) / schur;
    dl = (gl - hlb * db) / hll;
    dr = (gr - hrb * db) / hrr;
    const double gain = 0.5 * (gl * dl + gr * dr + gb * db);
    if (gain < kAcceptGain) {  // as in FitLogistic
      f.a_left += dl;
      f.a_right += dr;
      f.b += db;
      f.loglik = ll + gain;
      f.converged = true;
      return f;
    }
    prev = f;
    prev_ll = ll;
    step = 1;
    f.a_left += dl;
    f.a_right += dr;
    f.b += db;
  }
  if (prev_ll > -INFINITY) {
    f = prev;
    f.loglik = prev_ll;
    f.converged = false;
  }
  return f;
}

double LogisticProb(const LogisticFit& f, double t_ms, double c, double s) {
  return 1.0 / (1.0 + std::exp(-(f.b0 + f.b1 * (t_ms - c) / s)));
}

}  // namespace lifeline::analysis
