#include "analysis/decay.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_multimin.h>

namespace lifeline::analysis {

namespace {

constexpr int kMaxIterations = 1000;
// log(1 - e^eta) is extended quadratically past eta0 so that a trial step of the line search
// that puts a rate above 0.9999 gets a large, finite, smooth penalty instead of NaN.
const double kEta0 = std::log(0.9999);

struct Rows {
  std::vector<double> t_s;  // latency in seconds (the fit's internal unit)
  std::vector<uint8_t> y;
  int params = 3;           // 2: g fixed at 0
};

// h(eta) = log(1 - e^eta) and its first two derivatives, extended past kEta0.
void LogOneMinusExp(double eta, double* h, double* h1, double* h2) {
  const double e = std::exp(std::min(eta, kEta0));
  const double v = std::log1p(-e), d1 = -e / (1 - e), d2 = -e / ((1 - e) * (1 - e));
  if (eta <= kEta0) {
    *h = v;
    *h1 = d1;
    *h2 = d2;
    return;
  }
  const double x = eta - kEta0;
  *h = v + d1 * x + 0.5 * d2 * x * x;
  *h1 = d1 + d2 * x;
  *h2 = d2;
}

// Negative mean log-likelihood and its gradient at x = (log p0, k1, k2) (seconds).
void NegLogLik(const gsl_vector* x, void* params, double* f, gsl_vector* df) {
  const Rows& r = *static_cast<const Rows*>(params);
  const double th0 = gsl_vector_get(x, 0), k1 = gsl_vector_get(x, 1);
  const double k2 = r.params == 3 ? gsl_vector_get(x, 2) : 0;
  double ll = 0, g0 = 0, g1 = 0, g2 = 0;
  for (size_t i = 0; i < r.t_s.size(); ++i) {
    const double t = r.t_s[i];
    const double eta = th0 - k1 * t - k2 * t * t;
    double d;  // d loglik / d eta
    if (r.y[i]) {
      ll += eta;
      d = 1;
    } else {
      double h, h1, h2;
      LogOneMinusExp(eta, &h, &h1, &h2);
      ll += h;
      d = h1;
    }
    g0 += d;
    g1 -= d * t;
    g2 -= d * t * t;
  }
  const double inv_n = 1.0 / static_cast<double>(r.t_s.size());
  if (f != nullptr) *f = -ll * inv_n;
  if (df != nullptr) {
    gsl_vector_set(df, 0, -g0 * inv_n);
    gsl_vector_set(df, 1, -g1 * inv_n);
    if (r.params == 3) gsl_vector_set(df, 2, -g2 * inv_n);
  }
}

double F(const gsl_vector* x, void* p) {
  double f;
  NegLogLik(x, p, &f, nullptr);
  return f;
}
void Df(const gsl_vector* x, void* p, gsl_vector* df) { NegLogLik(x, p, nullptr, df); }
void Fdf(const gsl_vector* x, void* p, double* f, gsl_vector* df) { NegLogLik(x, p, f, df); }

// Standard errors from the inverse observed information at x (seconds units).
std::vector<double> StandardErrors(const Rows& r, const gsl_vector* x) {
  const int k = r.params;
  gsl_matrix* info = gsl_matrix_calloc(static_cast<size_t>(k), static_cast<size_t>(k));
  const double th0 = gsl_vector_get(x, 0), k1 = gsl_vector_get(x, 1);
  const double k2 = k == 3 ? gsl_vector_get(x, 2) : 0;
  for (size_t i = 0; i < r.t_s.size(); ++i) {
    if (r.y[i]) continue;  // log p is linear in the parameters: no curvature from successes
    const double t = r.t_s[i];
    double h, h1, h2;
    LogOneMinusExp(th0 - k1 * t - k2 * t * t, &h, &h1, &h2);
    const double xv[3] = {1, -t, -t * t};
    for (int a = 0; a < k; ++a) {
      for (int b = 0; b < k; ++b) {
        *gsl_matrix_ptr(info, static_cast<size_t>(a), static_cast<size_t>(b)) -= h2 * xv[a] * xv[b];
      }
    }
  }
  std::vector<double> se(3, NAN);
  if (gsl_linalg_cholesky_decomp1(info) == GSL_SUCCESS &&
      gsl_linalg_cholesky_invert(info) == GSL_SUCCESS) {
    for (int a = 0; a < k; ++a) {
      se[static_cast<size_t>(a)] =
          std::sqrt(std::max(0.0, gsl_matrix_get(info, static_cast<size_t>(a), static_cast<size_t>(a))));
    }
  }
  gsl_matrix_free(info);
  return se;
}

ExpFit FitExp(const Rows& r) {
  const size_t k = static_cast<size_t>(r.params);
  double mean = 0;
  for (uint8_t y : r.y) mean += y;
  mean /= static_cast<double>(r.y.size());
  gsl_vector* x = gsl_vector_calloc(k);
  gsl_vector_set(x, 0, std::log(mean));  // constant rate: a feasible start
  gsl_multimin_function_fdf fn{&F, &Df, &Fdf, k, const_cast<Rows*>(&r)};
  gsl_multimin_fdfminimizer* m =
      gsl_multimin_fdfminimizer_alloc(gsl_multimin_fdfminimizer_vector_bfgs2, k);
  gsl_multimin_fdfminimizer_set(m, &fn, x, 0.1, 0.1);
  ExpFit fit;
  int status = GSL_CONTINUE;
  for (fit.iterations = 0; fit.iterations < kMaxIterations && status == GSL_CONTINUE;
       ++fit.iterations) {
    if (gsl_multimin_fdfminimizer_iterate(m) != GSL_SUCCESS) break;  // no further progress
    status = gsl_multimin_test_gradient(m->gradient, 1e-9);
  }
  // A stalled line search at a zero gradient is convergence too.
  fit.converged = status == GSL_SUCCESS || gsl_multimin_test_gradient(m->gradient, 1e-6) == GSL_SUCCESS;
  const gsl_vector* best = m->x;
  fit.loglik = -m->f * static_cast<double>(r.y.size());
  const std::vector<double> se = StandardErrors(r, best);
  fit.p0 = std::exp(gsl_vector_get(best, 0));
  fit.p0_se = fit.p0 * se[0];  // delta method
  fit.k1 = gsl_vector_get(best, 1) / 1e3;
  fit.k1_se = se[1] / 1e3;
  if (k == 3) {
    fit.k2 = gsl_vector_get(best, 2) / 1e6;
    fit.k2_se = se[2] / 1e6;
  }
  gsl_multimin_fdfminimizer_free(m);
  gsl_vector_free(x);
  return fit;
}

std::vector<RateBin> MakeBins(const DecayInput& in, int n_bins) {
  std::vector<size_t> order(in.latency_ms.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return in.latency_ms[a] < in.latency_ms[b]; });
  std::vector<RateBin> bins;
  const size_t n = order.size();
  const size_t k = std::clamp<size_t>(static_cast<size_t>(std::max(1, n_bins)), 1, n);
  for (size_t b = 0; b < k; ++b) {
    const size_t lo = b * n / k, hi = (b + 1) * n / k;
    if (hi <= lo) continue;
    RateBin r;
    r.t_lo_ms = in.latency_ms[order[lo]];
    r.t_hi_ms = in.latency_ms[order[hi - 1]];
    for (size_t i = lo; i < hi; ++i) {
      const size_t e = order[i];
      r.t_mean_ms += in.latency_ms[e];
      r.events += 1;
      r.clicks += in.clicked[e];
      r.conversions += in.converted[e];
      r.joint += in.clicked[e] && in.converted[e];
    }
    r.t_mean_ms /= r.events;
    bins.push_back(r);
  }
  return bins;
}

// Weighted R^2 of binned rates: 1 - sum w (obs - pred)^2 / sum w (obs - mean)^2, where pred is
// the model's mean over the bin's events (not the curve at the bin's mean latency).
struct R2Acc {
  std::vector<double> obs, pred, w;
  double Value() const {
    double sw = 0, mean = 0;
    for (size_t i = 0; i < obs.size(); ++i) {
      sw += w[i];
      mean += w[i] * obs[i];
    }
    if (sw <= 0) return NAN;
    mean /= sw;
    double res = 0, tot = 0;
    for (size_t i = 0; i < obs.size(); ++i) {
      res += w[i] * (obs[i] - pred[i]) * (obs[i] - pred[i]);
      tot += w[i] * (obs[i] - mean) * (obs[i] - mean);
    }
    return tot > 0 ? 1 - res / tot : NAN;
  }
};

void ComputeR2(const DecayInput& in, DecayResult* r) {
  std::vector<size_t> order(in.latency_ms.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return in.latency_ms[a] < in.latency_ms[b]; });
  R2Acc ctr, cvr, joint, indep;
  size_t pos = 0;
  for (const RateBin& b : r->bins) {
    double p_ctr = 0, p_cvr = 0, p_joint = 0, p_indep = 0, cvr_w = 0;
    for (size_t i = 0; i < static_cast<size_t>(b.events); ++i, ++pos) {
      const size_t e = order[pos];
      const double t = in.latency_ms[e];
      const double c = ExpAt(r->ctr, t), v = ExpAt(r->cvr, t);
      p_ctr += c;
      p_joint += c * v;
      p_indep += c * ExpAt(r->cvr_no_g, t);
      // CVR per click: the expected rate over this bin's clicks weights each event by CTR.
      const double wt = r->cvr_per_click ? c : 1.0;
      p_cvr += wt * v;
      cvr_w += wt;
    }
    ctr.obs.push_back(b.clicks / b.events);
    ctr.pred.push_back(p_ctr / b.events);
    ctr.w.push_back(b.events);
    joint.obs.push_back(b.joint / b.events);
    joint.pred.push_back(p_joint / b.events);
    joint.w.push_back(b.events);
    indep.obs.push_back(b.joint / b.events);
    indep.pred.push_back(p_indep / b.events);
    indep.w.push_back(b.events);
    const double denom = r->cvr_per_click ? b.clicks : b.events;
    if (denom > 0) {
      cvr.obs.push_back(b.conversions / denom);
      cvr.pred.push_back(p_cvr / cvr_w);
      cvr.w.push_back(denom);
    }
  }
  r->ctr_r2 = ctr.Value();
  r->cvr_r2 = cvr.Value();
  r->joint_r2 = joint.Value();
  r->independent_r2 = indep.Value();
}

}  // namespace

double ExpAt(const ExpFit& f, double t_ms) {
  return std::min(1.0, f.p0 * std::exp(-f.k1 * t_ms - f.k2 * t_ms * t_ms));
}

Result<DecayResult> FitDecay(const DecayInput& in, int n_bins) {
  gsl_set_error_handler_off();
  const size_t n = in.latency_ms.size();
  if (n == 0 || in.clicked.size() != n || in.converted.size() != n) {
    return InvalidArgument("decay: no events");
  }
  DecayResult r;
  r.n = static_cast<int64_t>(n);
  Rows ctr_rows, cvr_rows;
  ctr_rows.params = 2;
  for (size_t i = 0; i < n; ++i) {
    r.clicks += in.clicked[i];
    r.conversions += in.converted[i];
    if (in.converted[i] && !in.clicked[i]) r.cvr_per_click = false;
  }
  for (size_t i = 0; i < n; ++i) {
    ctr_rows.t_s.push_back(in.latency_ms[i] / 1e3);
    ctr_rows.y.push_back(in.clicked[i]);
    if (!r.cvr_per_click || in.clicked[i]) {
      cvr_rows.t_s.push_back(in.latency_ms[i] / 1e3);
      cvr_rows.y.push_back(in.converted[i]);
    }
  }
  const int64_t cvr_trials = static_cast<int64_t>(cvr_rows.y.size());
  if (r.clicks < 10 || r.clicks > r.n - 10) {
    return InvalidArgument("decay: " + std::to_string(r.clicks) + " clicks in " +
                           std::to_string(r.n) + " events; the CTR fit needs at least 10 of "
                           "each outcome");
  }
  if (r.conversions < 10 || r.conversions > cvr_trials - 10) {
    return InvalidArgument("decay: " + std::to_string(r.conversions) + " conversions in " +
                           std::to_string(cvr_trials) +
                           (r.cvr_per_click ? " clicks" : " events") +
                           "; the CVR fit needs at least 10 of each outcome");
  }
  r.ctr = FitExp(ctr_rows);
  r.cvr = FitExp(cvr_rows);
  cvr_rows.params = 2;
  r.cvr_no_g = FitExp(cvr_rows);
  r.g_lr = std::max(0.0, 2 * (r.cvr.loglik - r.cvr_no_g.loglik));
  r.g_p_value = gsl_cdf_chisq_Q(r.g_lr, 1);
  r.bins = MakeBins(in, n_bins);
  ComputeR2(in, &r);
  return r;
}

nlohmann::json DecayJson(const DecayResult& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["ctr"] = {{"c0", num(r.ctr.p0)}, {"a", num(r.ctr.k1)}, {"c0_se", num(r.ctr.p0_se)},
              {"a_se", num(r.ctr.k1_se)}, {"r2", num(r.ctr_r2)}, {"converged", r.ctr.converged}};
  j["cvr"] = {{"v0", num(r.cvr.p0)}, {"b", num(r.cvr.k1)}, {"g", num(r.cvr.k2)},
              {"v0_se", num(r.cvr.p0_se)}, {"b_se", num(r.cvr.k1_se)},
              {"g_se", num(r.cvr.k2_se)}, {"r2", num(r.cvr_r2)},
              {"base", r.cvr_per_click ? "clicks" : "events"}, {"converged", r.cvr.converged}};
  j["joint"] = {{"a", num(r.ctr.k1)}, {"b", num(r.cvr.k1)}, {"g", num(r.cvr.k2)},
                {"r2", num(r.joint_r2)}, {"a_se", num(r.ctr.k1_se)},
                {"b_se", num(r.cvr.k1_se)}, {"g_se", num(r.cvr.k2_se)},
                {"k0", num(r.ctr.p0 * r.cvr.p0)}};
  j["independent"] = {{"r2", num(r.independent_r2)}, {"a", num(r.ctr.k1)},
                      {"b", num(r.cvr_no_g.k1)}, {"v0", num(r.cvr_no_g.p0)},
                      {"b_se", num(r.cvr_no_g.k1_se)}};
  j["g_test"] = {{"lr_statistic", num(r.g_lr)}, {"p_value", num(r.g_p_value)}};
  j["n"] = r.n;
  j["clicks"] = r.clicks;
  j["conversions"] = r.conversions;
  j["units"] = "a, b per ms; g per ms^2";
  j["method"] = "maximum likelihood (Bernoulli), GSL BFGS";
  return j;
}

}  // namespace lifeline::analysis
