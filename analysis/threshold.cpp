#include "analysis/threshold.h"

#include <algorithm>
#include <cmath>

#include "analysis/parallel.h"
#include "analysis/rng.h"

namespace lifeline::analysis {

namespace {

constexpr int kCoarseGrid = 64;     // breakpoint candidates of the first pass
constexpr int kRefineAround = 3;    // best coarse points refined edge by edge
constexpr uint64_t kPurposeInterval = 1;
constexpr uint64_t kPurposeNull = 2;
// The null simulation stops once this many replicates reach the observed statistic: the
// p-value is then clearly large (Besag & Clifford's sequential Monte Carlo test).
constexpr int kNullStopExceedances = 20;
constexpr int kNullBlock = 16;      // replicates between stopping checks (fixed: reproducible)

struct SearchLimits {
  double min_side_n = 0;
  double min_side_events = 0;
  int direction = 1;  // +1: only jumps up count; -1: only jumps down
};

struct Breakpoint {
  bool ok = false;
  size_t k = 0;  // first bin of the right side
  double loglik = -INFINITY;
  JumpFit fit;
};

// The no-trend, no-jump start of the Newton iterations: the overall log-odds.
JumpFit StartAt(double y, double n) {
  JumpFit f;
  const double p = std::clamp((y + 0.5) / (n + 1), 1e-6, 1 - 1e-6);
  f.a_left = f.a_right = std::log(p / (1 - p));
  return f;
}

// Candidate right-side starts k: both sides big enough and holding both outcomes.
std::vector<size_t> ValidCuts(const std::vector<Bin>& bins, const SearchLimits& lim) {
  double total_n = 0, total_y = 0;
  for (const Bin& b : bins) {
    total_n += b.n;
    total_y += b.y;
  }
  std::vector<size_t> cuts;
  double n = 0, y = 0;
  for (size_t k = 1; k < bins.size(); ++k) {
    n += bins[k - 1].n;
    y += bins[k - 1].y;
    if (bins[k].n == 0) continue;  // an empty bin's edge is the same cut as the next one's
    const double rn = total_n - n, ry = total_y - y;
    if (n < lim.min_side_n || rn < lim.min_side_n) continue;
    if (y < lim.min_side_events || n - y < lim.min_side_events) continue;
    if (ry < lim.min_side_events || rn - ry < lim.min_side_events) continue;
    cuts.push_back(k);
  }
  return cuts;
}

// A jump against the searched direction is not a candidate: under the constraint
// direction * jump >= 0 its best fit is the no-break trend (LR 0), which never wins.
Breakpoint Evaluate(const std::vector<Bin>& bins, size_t k, int direction, const JumpFit& start) {
  Breakpoint b;
  b.k = k;
  b.fit = FitJump(bins, k, start);
  const double jump = b.fit.a_right - b.fit.a_left;
  b.ok = std::isfinite(b.fit.loglik) && direction * jump > 0;
  b.loglik = b.ok ? b.fit.loglik : -INFINITY;
  return b;
}

// Profile likelihood over the valid cuts: a coarse grid by session count, then every cut
// between the neighbours of the best grid points. Each fit starts from its neighbour's.
Breakpoint Search(const std::vector<Bin>& bins, const SearchLimits& lim) {
  const std::vector<size_t> cuts = ValidCuts(bins, lim);
  if (cuts.empty()) return {};
  std::vector<size_t> grid;  // positions in `cuts`
  const size_t step = std::max<size_t>(1, cuts.size() / kCoarseGrid);
  for (size_t i = 0; i < cuts.size(); i += step) grid.push_back(i);
  if (grid.back() != cuts.size() - 1) grid.push_back(cuts.size() - 1);

  double total_n = 0, total_y = 0;
  for (const Bin& b : bins) {
    total_n += b.n;
    total_y += b.y;
  }
  JumpFit warm = StartAt(total_y, total_n);
  std::vector<Breakpoint> coarse;
  coarse.reserve(grid.size());
  for (size_t g : grid) {
    coarse.push_back(Evaluate(bins, cuts[g], lim.direction, warm));
    warm = coarse.back().fit;
  }
  std::vector<size_t> order(grid.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return coarse[a].loglik > coarse[b].loglik; });
  Breakpoint best = coarse[order[0]];
  if (!best.ok) return {};
  const size_t refine = std::min<size_t>(kRefineAround, order.size());
  for (size_t r = 0; r < refine && coarse[order[r]].ok; ++r) {
    const size_t gi = order[r];
    const size_t lo = gi == 0 ? 0 : grid[gi - 1] + 1;
    const size_t hi = gi + 1 < grid.size() ? grid[gi + 1] : cuts.size();
    JumpFit w = coarse[gi].fit;
    for (size_t i = lo; i < hi; ++i) {
      if (i == grid[gi]) continue;
      const Breakpoint b = Evaluate(bins, cuts[i], lim.direction, w);
      w = b.fit;
      if (b.ok && b.loglik > best.loglik) best = b;
    }
  }
  return best;
}

double CutMs(const BinnedOutcomes& d, size_t k) {
  const double upper_left = static_cast<double>(d.bins[k - 1].end_index) * d.resolution_ms;
  const double lower_right = static_cast<double>(d.bins[k].index) * d.resolution_ms;
  return 0.5 * (upper_left + lower_right);
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// The searched direction: the option's, or (0: auto) whether the no-break curve rises from
// the 5th to the 95th latency percentile.
int Direction(int option, const JumpFit& line, const std::vector<Bin>& bins) {
  if (option != 0) return option > 0 ? 1 : -1;
  double total = 0;
  for (const Bin& b : bins) total += b.n;
  double seen = 0, v05 = 0, v95 = 0;
  bool low = false;
  for (const Bin& b : bins) {
    seen += b.n;
    if (!low && seen >= 0.05 * total) {
      v05 = b.v;
      low = true;
    }
    if (seen >= 0.95 * total) {
      v95 = b.v;
      break;
    }
  }
  const double rise = line.b1 * (v95 - v05) + line.b2 * (v95 * v95 - v05 * v05);
  return rise >= 0 ? 1 : -1;
}

struct Context {
  const ThresholdInput* in;
  const ThresholdOptions* o;
  const BinnedOutcomes* d;
  SearchLimits lim;
};

// One null replicate: outcomes redrawn from the no-break trend; its LR statistic.
double NullReplicate(const Context& cx, const JumpFit& line, uint64_t r) {
  const BinnedOutcomes& d = *cx.d;
  Rng rng(DeriveSeed(cx.o->seed, kPurposeNull, r));
  std::vector<Bin> bins = d.bins;
  double total_y = 0, total_n = 0;
  for (Bin& b : bins) {
    const double p = JumpProb(line, true, b.v);
    b.y = gsl_ran_binomial(rng.get(), p, static_cast<unsigned>(b.n));
    total_y += b.y;
    total_n += b.n;
  }
  const JumpFit l0 = FitJump(bins, 0, StartAt(total_y, total_n));
  SearchLimits lim = cx.lim;
  lim.direction = Direction(cx.o->direction, l0, bins);  // decided as for the observed data
  const Breakpoint bp = Search(bins, lim);
  if (!bp.ok) return 0;
  return std::max(0.0, 2 * (bp.loglik - l0.loglik));
}

// One interval replicate: sessions (or groups) resampled with replacement; its breakpoint.
std::optional<double> IntervalReplicate(const Context& cx,
                                        const std::vector<std::vector<int32_t>>& members,
                                        uint64_t r) {
  const BinnedOutcomes& d = *cx.d;
  const ThresholdInput& in = *cx.in;
  Rng rng(DeriveSeed(cx.o->seed, kPurposeInterval, r));
  std::vector<Bin> bins = d.bins;
  for (Bin& b : bins) b.n = b.y = 0;
  auto add = [&](size_t i) {
    Bin& b = bins[static_cast<size_t>(d.bin_of_session[i])];
    b.n += 1;
    b.y += in.outcome[i];
  };
  if (members.empty()) {
    const uint64_t n = in.latency_ms.size();
    for (uint64_t i = 0; i < n; ++i) add(rng.Below(n));
  } else {
    for (size_t g = 0; g < members.size(); ++g) {
      for (int32_t i : members[rng.Below(members.size())]) add(static_cast<size_t>(i));
    }
  }
  const Breakpoint bp = Search(bins, cx.lim);  // direction fixed as found
  if (!bp.ok) return std::nullopt;
  // The cut between non-empty bins of this replicate.
  size_t prev = bp.k - 1;
  while (prev > 0 && bins[prev].n == 0) --prev;
  const double upper_left = static_cast<double>(bins[prev].end_index) * d.resolution_ms;
  const double lower_right = static_cast<double>(bins[bp.k].index) * d.resolution_ms;
  return 0.5 * (upper_left + lower_right);
}

// Monte Carlo p-value (1 + exceedances) / (1 + replicates), in blocks so that the run can
// stop early once the p-value is clearly large.
double NullPValue(const Context& cx, const JumpFit& line, double lr, int* replicates) {
  const int total = cx.o->null_replicates;
  int done = 0, exceed = 0;
  while (done < total && exceed < kNullStopExceedances) {
    const int count = std::min(kNullBlock, total - done);
    std::vector<double> stats(static_cast<size_t>(count));
    ParallelFor(count, cx.o->threads, [&](int64_t i) {
      stats[static_cast<size_t>(i)] = NullReplicate(cx, line, static_cast<uint64_t>(done + i));
    });
    for (double s : stats) exceed += s >= lr ? 1 : 0;
    done += count;
  }
  *replicates = done;
  return (1.0 + exceed) / (1.0 + done);
}

}  // namespace

Result<ThresholdResult> FindThreshold(const ThresholdInput& in, const ThresholdOptions& o) {
  const std::string who = "scenario '" + in.name + "'";
  if (in.latency_ms.size() != in.outcome.size() || in.latency_ms.empty()) {
    return InvalidArgument(who + ": no sessions");
  }
  ThresholdResult res;
  res.name = in.name;
  res.n = static_cast<int64_t>(in.latency_ms.size());
  for (uint8_t y : in.outcome) res.events += y;
  res.rate = static_cast<double>(res.events) / static_cast<double>(res.n);
  if (res.events == 0 || res.events == res.n) {
    return InvalidArgument(who + ": every session has outcome " +
                           std::to_string(res.events == 0 ? 0 : 1) +
                           "; a threshold needs both outcomes");
  }
  const BinnedOutcomes d = BinOutcomes(in.latency_ms, in.outcome, o.resolution_ms);
  Context cx{&in, &o, &d, {}};
  cx.lim.min_side_n = std::max<double>(static_cast<double>(o.min_side_sessions),
                                       o.min_side_fraction * static_cast<double>(res.n));
  cx.lim.min_side_events = static_cast<double>(o.min_side_events);
  res.t_center_ms = d.t_center_ms;
  res.t_scale_ms = d.t_scale_ms;
  res.line = FitJump(d.bins, 0, StartAt(static_cast<double>(res.events), static_cast<double>(res.n)));
  cx.lim.direction = res.direction = Direction(o.direction, res.line, d.bins);
  if (ValidCuts(d.bins, cx.lim).empty()) {
    return InvalidArgument(who + ": too few sessions to place a breakpoint (each side needs " +
                           std::to_string(static_cast<int64_t>(cx.lim.min_side_n)) +
                           " sessions and " + std::to_string(o.min_side_events) +
                           " of each outcome)");
  }
  const Breakpoint bp = Search(d.bins, cx.lim);
  if (!bp.ok) {  // no jump in the searched direction anywhere: LR 0
    res.p_value = 1;
    return res;
  }
  res.jump = bp.fit;
  res.candidate_ms = CutMs(d, bp.k);
  res.lr = std::max(0.0, 2 * (bp.loglik - res.line.loglik));
  res.p_value = NullPValue(cx, res.line, res.lr, &res.null_replicates);
  res.found = res.p_value < o.alpha;
  if (!res.found) return res;

  res.threshold_ms = *res.candidate_ms;
  double n_below = 0, y_below = 0;
  for (size_t i = 0; i < in.latency_ms.size(); ++i) {
    if (in.latency_ms[i] < res.threshold_ms) {
      n_below += 1;
      y_below += in.outcome[i];
    }
  }
  const double n_above = static_cast<double>(res.n) - n_below;
  const double y_above = static_cast<double>(res.events) - y_below;
  res.rate_below = n_below > 0 ? y_below / n_below : 0;
  res.rate_above = n_above > 0 ? y_above / n_above : 0;
  res.relative_increase = res.rate_below > 0 ? res.rate_above / res.rate_below - 1 : INFINITY;

  std::vector<std::vector<int32_t>> members;
  if (!in.group.empty()) {
    members.resize(static_cast<size_t>(in.groups));
    for (size_t i = 0; i < in.group.size(); ++i) {
      members[static_cast<size_t>(in.group[i])].push_back(static_cast<int32_t>(i));
    }
  }
  std::vector<std::optional<double>> taus(static_cast<size_t>(std::max(0, o.bootstrap)));
  ParallelFor(o.bootstrap, o.threads, [&](int64_t r) {
    taus[static_cast<size_t>(r)] = IntervalReplicate(cx, members, static_cast<uint64_t>(r));
  });
  std::vector<double> valid;
  for (const auto& t : taus) {
    if (t) valid.push_back(*t);
  }
  res.bootstrap_replicates = static_cast<int>(valid.size());
  if (valid.empty()) {
    res.ci_lo_ms = res.ci_hi_ms = res.threshold_ms;
  } else {
    res.ci_lo_ms = std::min(res.threshold_ms, Percentile(valid, 0.025));
    res.ci_hi_ms = std::max(res.threshold_ms, Percentile(valid, 0.975));
  }
  return res;
}

double TargetForThreshold(const ThresholdResult& r, double margin) {
  const double t = std::min(r.ci_lo_ms, r.threshold_ms * (1 - margin));
  return std::max(1.0, std::floor(t));
}

nlohmann::json ThresholdJson(const std::vector<ThresholdResult>& results,
                             const ThresholdOptions& o) {
  nlohmann::json out;
  out["scenarios"] = nlohmann::json::array();
  for (const ThresholdResult& r : results) {
    nlohmann::json s;
    s["name"] = r.name;
    s["n"] = r.n;
    s["events"] = r.events;
    s["rate"] = r.rate;
    s["found"] = r.found;
    s["p_value"] = r.p_value;
    s["lr_statistic"] = r.lr;
    s["null_replicates"] = r.null_replicates;
    s["candidate_ms"] = r.candidate_ms ? nlohmann::json(*r.candidate_ms) : nullptr;
    s["direction"] = r.direction > 0 ? "up" : "down";
    if (r.found) {
      s["threshold_ms"] = r.threshold_ms;
      s["ci95_ms"] = {r.ci_lo_ms, r.ci_hi_ms};
      s["rate_below"] = r.rate_below;
      s["rate_above"] = r.rate_above;
      s["relative_increase"] =
          std::isfinite(r.relative_increase) ? nlohmann::json(r.relative_increase) : nullptr;
      s["bootstrap_replicates"] = r.bootstrap_replicates;
    } else {
      s["threshold_ms"] = nullptr;
      s["ci95_ms"] = nullptr;
      s["rate_below"] = nullptr;
      s["rate_above"] = nullptr;
      s["relative_increase"] = nullptr;
    }
    out["scenarios"].push_back(std::move(s));
  }
  out["alpha"] = o.alpha;
  out["bootstrap"] = o.bootstrap;
  out["seed"] = o.seed;
  return out;
}

}  // namespace lifeline::analysis
