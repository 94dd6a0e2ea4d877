#include "analysis/impact.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

namespace lifeline::analysis {

namespace {

using nlohmann::json;

Status Field(const json& j, std::string_view source, const std::string& path, double* out) {
  // path "a.b": walk objects.
  const json* cur = &j;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = std::min(path.find('.', pos), path.size());
    const std::string key = path.substr(pos, dot - pos);
    if (!cur->is_object() || !cur->contains(key)) {
      return InvalidArgument(std::string(source) + ": " + path + ": missing");
    }
    cur = &(*cur)[key];
    pos = dot + 1;
  }
  if (!cur->is_number() || !std::isfinite(cur->get<double>())) {
    return InvalidArgument(std::string(source) + ": " + path + ": expected a finite number");
  }
  *out = cur->get<double>();
  return Status::Ok();
}

double Relative(double v, double base) {
  return std::isfinite(v) && std::isfinite(base) && base != 0 ? v / base - 1 : NAN;
}

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json ExpectationJson(const Expectation& e) {
  return {{"requests", e.requests}, {"failed", e.failed}, {"abandonment", Num(e.abandonment)},
          {"ctr", Num(e.ctr)}, {"cvr", Num(e.cvr)}, {"joint", Num(e.joint)}};
}

json ChangeJson(const Expectation& v, const Expectation& b) {
  return {{"abandonment", Num(Relative(v.abandonment, b.abandonment))},
          {"ctr", Num(Relative(v.ctr, b.ctr))},
          {"cvr", Num(Relative(v.cvr, b.cvr))},
          {"joint", Num(Relative(v.joint, b.joint))}};
}

std::string Pct(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f %%", 100 * v);
  return buf;
}

std::string Rate(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// Successful requests' latencies and failure counts per (step, target).
Result<std::vector<LatencySet>> LatencySets(const json& report, std::string_view source,
                                            const std::string& metric) {
  if (!report.is_object() || !report.contains("requests") || !report["requests"].is_array()) {
    return InvalidArgument(std::string(source) + ": requests: missing (not a lifeline bench "
                           "report.json?)");
  }
  const json& reqs = report["requests"];
  if (reqs.size() > kMaxReportRequests) {
    return InvalidArgument(std::string(source) + ": requests: " + std::to_string(reqs.size()) +
                           " entries exceeds " + std::to_string(kMaxReportRequests));
  }
  std::map<std::pair<int, int>, LatencySet> sets;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const json& r = reqs[i];
    const std::string at = std::string(source) + ": requests[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer() ||
        !r.contains("target") || !r["target"].is_number_integer()) {
      return InvalidArgument(at + ": expected an object with integer step and target");
    }
    const int step = r["step"].get<int>(), target = r["target"].get<int>();
    if (step < 0 || target < 0 || step > 100000 || target > 1000) {
      return InvalidArgument(at + ": step or target out of range");
    }
    LatencySet& s = sets[{step, target}];
    s.step = step;
    s.target = target;
    const json err = r.value("error", json(nullptr));
    if (!err.is_null()) {
      if (err != "cancelled") ++s.failed;  // cancelled by an early stop: never finished
      continue;
    }
    // TTFA as the bench counts it: ttfa_ms; without one, the TTFT of a request that did not
    // think (or of a report from before the bench measured TTFA, whose TTFT was already the
    // first answer token), and the e2e of one whose thinking never reached an answer.
    const char* key = metric == "e2e" ? "e2e_ms" : "ttft_ms";
    json v = nullptr;
    if (metric == "ttfa") {
      v = r.value("ttfa_ms", json(nullptr));
      if (!v.is_null()) key = "ttfa_ms";
      const json thought = r.value("reasoning_events", json(0));
      if (v.is_null() && thought.is_number() && thought.get<double>() > 0) key = "e2e_ms";
    }
    if (v.is_null()) v = r.value(key, json(nullptr));
    if (v.is_null() && metric != "e2e") v = r.value("e2e_ms", json(nullptr));
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      return InvalidArgument(at + "." + key + ": expected a non-negative number");
    }
    s.latency_ms.push_back(v.get<double>());
  }
  std::vector<LatencySet> out;
  for (auto& [key, s] : sets) {
    std::string label = "target " + std::to_string(s.target);
    if (report.contains("targets") && report["targets"].is_array() &&
        static_cast<size_t>(s.target) < report["targets"].size()) {
      label = report["targets"][static_cast<size_t>(s.target)].value("label", label);
    }
    if (report.contains("steps") && report["steps"].is_array() &&
        static_cast<size_t>(s.step) < report["steps"].size()) {
      s.load = report["steps"][static_cast<size_t>(s.step)].value("load", 0.0);
      if (report["steps"].size() > 1) {
        char buf[48];
        std::snprintf(buf, sizeof buf, " @ %g", s.load);
        label += buf;
      }
    }
    s.label = label;
    out.push_back(std::move(s));
  }
  if (out.empty()) return InvalidArgument(std::string(source) + ": requests: empty");
  return out;
}

std::string ReportMetric(const json& report) {
  if (report.contains("config") && report["config"].is_object()) {
    const std::string m = report["config"].value("slo_metric", "ttft");
    if (m == "e2e" || m == "ttfa") return m;
  }
  return "ttft";
}

}  // namespace

Result<DecayCurves> DecayCurvesFromJson(const json& fit, std::string_view source) {
  DecayCurves c;
  LL_RETURN_IF_ERROR(Field(fit, source, "ctr.c0", &c.c0));
  LL_RETURN_IF_ERROR(Field(fit, source, "ctr.a", &c.a));
  LL_RETURN_IF_ERROR(Field(fit, source, "cvr.v0", &c.v0));
  LL_RETURN_IF_ERROR(Field(fit, source, "cvr.b", &c.b));
  LL_RETURN_IF_ERROR(Field(fit, source, "cvr.g", &c.g));
  if (c.c0 <= 0 || c.c0 > 1 || c.v0 <= 0 || c.v0 > 1) {
    return InvalidArgument(std::string(source) + ": ctr.c0 and cvr.v0 must be in (0, 1]");
  }
  c.cvr_per_click = fit["cvr"].value("base", "clicks") != "events";
  return c;
}

Result<AbandonCurve> AbandonCurveFromJson(const json& t, std::string_view source,
                                          std::string_view scenario, std::string_view preferred) {
  if (!t.is_object() || !t.contains("scenarios") || !t["scenarios"].is_array() ||
      t["scenarios"].empty()) {
    return InvalidArgument(std::string(source) + ": scenarios: missing or empty");
  }
  const json& list = t["scenarios"];
  std::string names;
  const json* pick = nullptr;
  for (const json& s : list) {
    const std::string name = s.is_object() ? s.value("name", "") : "";
    names += (names.empty() ? "" : ", ") + name;
    if (!scenario.empty() ? name == scenario : name == preferred) pick = &s;
  }
  if (pick == nullptr && scenario.empty() && list.size() == 1) pick = &list[0];
  if (pick == nullptr) {
    return InvalidArgument(std::string(source) + ": " +
                           (scenario.empty() ? std::string("several scenarios; pick one with "
                                                           "--scenario")
                                             : "no scenario '" + std::string(scenario) + "'") +
                           " (scenarios: " + names + ")");
  }
  AbandonCurve c;
  c.scenario = pick->value("name", "");
  const json th = pick->value("threshold_ms", json(nullptr));
  if (th.is_null()) {
    double rate = 0;
    LL_RETURN_IF_ERROR(Field(*pick, source, "rate", &rate));
    c.rate_below = c.rate_above = rate;
    return c;
  }
  double v = 0;
  LL_RETURN_IF_ERROR(Field(*pick, source, "threshold_ms", &v));
  c.threshold_ms = v;
  LL_RETURN_IF_ERROR(Field(*pick, source, "rate_below", &c.rate_below));
  LL_RETURN_IF_ERROR(Field(*pick, source, "rate_above", &c.rate_above));
  return c;
}

Expectation Expect(const ImpactModels& m, const std::vector<double>& latency_ms, int64_t failed) {
  Expectation e;
  e.requests = static_cast<int64_t>(latency_ms.size()) + failed;
  e.failed = failed;
  if (e.requests == 0) return e;
  double ab = static_cast<double>(failed), ctr = 0, joint = 0, cvr_sum = 0;
  for (double t : latency_ms) {
    if (m.abandon) {
      const AbandonCurve& a = *m.abandon;
      ab += a.threshold_ms && t >= *a.threshold_ms ? a.rate_above : a.rate_below;
    }
    if (m.decay) {
      const DecayCurves& d = *m.decay;
      const double c = std::min(1.0, d.c0 * std::exp(-d.a * t));
      const double v = std::min(1.0, d.v0 * std::exp(-d.b * t - d.g * t * t));
      ctr += c;
      joint += c * v;
      cvr_sum += v;
    }
  }
  const double n = static_cast<double>(e.requests);
  if (m.abandon) e.abandonment = ab / n;
  if (m.decay) {
    e.ctr = ctr / n;
    e.joint = joint / n;
    // Per click: conversions over clicks; per event: the mean rate over every request.
    e.cvr = m.decay->cvr_per_click ? (ctr > 0 ? joint / ctr : NAN) : cvr_sum / n;
  }
  return e;
}

Result<json> ReportFromRequestLog(const CsvTable& log) {
  auto col = [&](std::string_view name) { return ColumnIndex(log, name); };
  const auto outcome = col("outcome"), reason = col("cancel_reason"), cls = col("class"),
             ttft = col("ttft_ms"), ttfa = col("ttfa_ms"), e2e = col("e2e_ms");
  if (!IsRequestLog(log) || !e2e) return InvalidArgument(log.source + ": not a request log");
  auto number = [](const std::string& cell) -> json {
    if (cell.empty()) return nullptr;
    char* end = nullptr;
    const double v = std::strtod(cell.c_str(), &end);
    return end != cell.c_str() && *end == '\0' && std::isfinite(v) ? json(v) : json(nullptr);
  };
  std::map<std::string, int> target_of;
  json targets = json::array();
  json requests = json::array();
  for (const std::vector<std::string>& row : log.rows) {
    const std::string& out = row[*outcome];
    if (out.empty()) continue;  // an outcome event line, not a request
    const bool user = IsUserOutcome(out, reason ? std::string_view(row[*reason]) : std::string_view());
    if (!user && out == "cancelled") continue;  // shutdown, server-side cuts: no user outcome
    const std::string name = cls && !row[*cls].empty() ? row[*cls] : "unclassified";
    auto [it, fresh] = target_of.emplace(name, static_cast<int>(targets.size()));
    if (fresh) targets.push_back({{"label", "class " + name}});
    json r = {{"step", 0}, {"target", it->second}};
    if (user) {
      const json e = number(row[*e2e]);
      const json t = ttft ? number(row[*ttft]) : json(nullptr);
      r["e2e_ms"] = e;
      r["ttft_ms"] = t.is_null() ? e : t;  // no token: the wait
      if (ttfa) r["ttfa_ms"] = number(row[*ttfa]);
      r["error"] = nullptr;
    } else {
      r["error"] = out;  // refused or error: failed
    }
    requests.push_back(std::move(r));
  }
  if (requests.empty()) return InvalidArgument(log.source + ": no requests in the log");
  return json{{"requests", std::move(requests)},
              {"targets", std::move(targets)},
              {"steps", json::array({{{"load", 0}}})},
              {"config", {{"slo_metric", "ttft"}}}};
}

Result<ImpactReport> ComputeImpact(const json& report, std::string_view source,
                                   const ImpactModels& m, const ImpactOptions& o) {
  if (!m.decay && !m.abandon) return InvalidArgument("impact: give --fit and/or --threshold-fit");
  ImpactReport out;
  out.metric = o.metric.empty() ? ReportMetric(report) : o.metric;
  if (out.metric != "ttft" && out.metric != "e2e" && out.metric != "ttfa") {
    return InvalidArgument("--metric '" + out.metric + "': expected ttft, ttfa or e2e");
  }
  LL_ASSIGN_OR_RETURN(std::vector<LatencySet> sets, LatencySets(report, source, out.metric));
  std::optional<Expectation> fixed;
  if (o.baseline_report != nullptr) {
    LL_ASSIGN_OR_RETURN(std::vector<LatencySet> b,
                        LatencySets(*o.baseline_report, "baseline report", out.metric));
    fixed = Expect(m, b.front().latency_ms, b.front().failed);
    out.baseline = "the baseline report's " + b.front().label;
  } else if (m.abandon && m.abandon->threshold_ms) {
    const double t = *m.abandon->threshold_ms;
    Expectation e = Expect(m, {std::nextafter(t, 0.0)}, 0);  // just within the threshold
    fixed = e;
    char buf[96];
    std::snprintf(buf, sizeof buf, "every request at the threshold (%.0f ms)", t);
    out.baseline = buf;
  }
  bool several_targets = false;
  for (const LatencySet& s : sets) several_targets |= s.target > 0;
  if (!fixed && !several_targets) {
    fixed = Expect(m, {0.0}, 0);
    out.baseline = "zero latency";
  } else if (!fixed) {
    out.baseline = "the first target at the same step";
  }
  for (const LatencySet& s : sets) {
    ImpactRow row;
    row.set = s;
    row.value = Expect(m, s.latency_ms, s.failed);
    if (several_targets) {
      for (const LatencySet& f : sets) {
        if (f.step == s.step && f.target == 0) row.first_target = Expect(m, f.latency_ms, f.failed);
      }
    }
    row.baseline = fixed ? *fixed : row.first_target.value_or(Expectation{});
    out.rows.push_back(std::move(row));
  }
  return out;
}

json ImpactJson(const ImpactReport& r) {
  json j;
  j["metric"] = r.metric;
  j["baseline"] = r.baseline;
  j["rows"] = json::array();
  for (const ImpactRow& row : r.rows) {
    json e = {{"label", row.set.label}, {"target", row.set.target}, {"step", row.set.step},
              {"load", row.set.load}, {"expected", ExpectationJson(row.value)},
              {"baseline", ExpectationJson(row.baseline)},
              {"change_vs_baseline", ChangeJson(row.value, row.baseline)}};
    if (row.first_target) e["change_vs_first_target"] = ChangeJson(row.value, *row.first_target);
    j["rows"].push_back(std::move(e));
  }
  return j;
}

std::string ImpactMarkdown(const ImpactReport& r) {
  std::string o = "## Latency economics\n\n";
  o += "Expected outcomes of each configuration's measured " + r.metric +
       " distribution under the fitted curves; baseline: " + r.baseline +
       ". Failed requests count as abandoned with no click.\n\n";
  o += "| configuration | requests | abandonment | CTR | CVR | joint conversion | abandonment vs baseline | joint vs baseline |\n";
  o += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const ImpactRow& row : r.rows) {
    const Expectation& e = row.value;
    o += "| " + row.set.label + " | " + std::to_string(e.requests) + " | " + Rate(e.abandonment) +
         " | " + Rate(e.ctr) + " | " + Rate(e.cvr) + " | " + Rate(e.joint) + " | " +
         Pct(Relative(e.abandonment, row.baseline.abandonment)) + " | " +
         Pct(Relative(e.joint, row.baseline.joint)) + " |\n";
  }
  o += "\n";
  for (const ImpactRow& row : r.rows) {
    const bool vs_first = row.first_target && row.set.target > 0;
    const Expectation& base = vs_first ? *row.first_target : row.baseline;
    const double joint = Relative(row.value.joint, base.joint);
    const double ab = Relative(row.value.abandonment, base.abandonment);
    const std::string against = vs_first ? "the first target" : r.baseline;
    std::string line = row.set.label + ": ";
    if (std::isfinite(joint)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "this configuration %s %.1f %% of joint conversions against %s",
                    joint < 0 ? "loses" : "gains", std::abs(100 * joint), against.c_str());
      line += buf;
    }
    if (std::isfinite(ab)) {
      line += std::string(std::isfinite(joint) ? "; " : "") + "abandonment " + Pct(ab);
      if (!std::isfinite(joint)) line += " against " + against;
    }
    if (!std::isfinite(joint) && !std::isfinite(ab)) {
      // Say why rather than print "A: ." (an empty sentence).
      line += row.value.requests == 0
                  ? "no change can be estimated: none of its requests finished"
                  : "no change can be estimated against " + against +
                        ": the fitted curves give it no rate to compare";
    }
    o += line + ".\n";
  }
  return o;
}

}  // namespace lifeline::analysis
