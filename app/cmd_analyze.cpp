// lifeline analyze threshold|decay|impact|simulate: latency economics from logs. Wiring only:
// flags -> CSV/JSON files -> analysis/ functions -> text, JSON, TOML and SVG outputs.
// Method and limits: docs/analysis.md.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/csv.h"
#include "analysis/decay.h"
#include "analysis/emit_config.h"
#include "analysis/impact.h"
#include "analysis/parallel.h"
#include "analysis/plot.h"
#include "analysis/rng.h"
#include "analysis/simulate.h"
#include "analysis/threshold.h"
#include "app/commands.h"

namespace lifeline::app {
namespace {

namespace an = analysis;

struct ThresholdFlags {
  std::string input, latency_col = "latency_ms", outcome_col = "abandoned";
  std::string scenario_col = "scenario", group_col;
  bool scenario_col_given = false, latency_col_given = false, outcome_col_given = false;
  int bootstrap = 400, null_replicates = 299, threads = 0;
  uint64_t seed = 1;
  double alpha = 0.01, margin = 0.10, resolution_ms = 1;
  std::string direction = "auto", config_metric = "ttft";
  bool json = false;
  std::string emit_config, plot;
};

struct DecayFlags {
  std::string input, latency_col = "latency_ms", click_col = "clicked", convert_col = "converted";
  bool latency_col_given = false;
  int bins = 20;
  bool json = false;
  std::string plot;
};

struct ImpactFlags {
  std::string report, fit, threshold_fit, scenario, baseline_report, metric;
  bool json = false;
};

struct SimulateFlags {
  std::string kind, out = "-", truth;
  uint64_t seed = 1;
  std::vector<std::string> scenarios;
  an::EventSpec events;
};

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "lifeline analyze %s: %s\n", what.c_str(), s.message().c_str());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

Status WriteFile(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return Status::Ok();
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(text.data(), static_cast<std::streamsize>(text.size()))) {
    return IoError("cannot write '" + path + "'");
  }
  return Status::Ok();
}

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  return j;
}

// ---- threshold ----

Result<std::vector<an::ThresholdInput>> LoadSessions(const ThresholdFlags& f) {
  LL_ASSIGN_OR_RETURN(an::CsvTable t, an::ReadCsvFile(f.input));
  std::string latency_name = f.latency_col, outcome_name = f.outcome_col;
  std::string scenario_name = f.scenario_col;
  if (an::IsRequestLog(t)) {
    // `serve --request-log`: the client that hung up is the outcome, the wait it saw the
    // latency, the SLO class the scenario (each unless named otherwise).
    LL_ASSIGN_OR_RETURN(t, an::RequestLogSessions(t));
    if (!f.latency_col_given) latency_name = "wait_ms";
    if (!f.outcome_col_given) outcome_name = "abandoned";
    if (!f.scenario_col_given) scenario_name = "class";
  }
  LL_ASSIGN_OR_RETURN(size_t lat_col, an::FindColumn(t, latency_name, "--latency-col"));
  LL_ASSIGN_OR_RETURN(size_t out_col, an::FindColumn(t, outcome_name, "--outcome-col"));
  LL_ASSIGN_OR_RETURN(std::vector<double> lat, an::LatencyColumn(t, lat_col));
  LL_ASSIGN_OR_RETURN(std::vector<uint8_t> y, an::BinaryColumn(t, out_col));
  LL_RETURN_IF_ERROR(an::RequireBothClasses(t, out_col, y, {}, ""));
  std::vector<std::string> scen(t.rows.size(), "all");
  auto sc = an::FindColumn(t, scenario_name, "--scenario-col");
  if (sc.ok()) {
    LL_ASSIGN_OR_RETURN(scen, an::TextColumn(t, *sc));
  } else if (f.scenario_col_given) {
    return sc.status();
  }
  std::vector<std::string> groups;
  if (!f.group_col.empty()) {
    LL_ASSIGN_OR_RETURN(size_t gc, an::FindColumn(t, f.group_col, "--group-col"));
    LL_ASSIGN_OR_RETURN(groups, an::TextColumn(t, gc));
  }
  std::vector<an::ThresholdInput> inputs;
  std::vector<std::vector<size_t>> rows;
  std::map<std::string, size_t> index;
  std::vector<std::map<std::string, int32_t>> group_ids;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    auto [it, fresh] = index.emplace(scen[r], inputs.size());
    if (fresh) {
      inputs.emplace_back();
      inputs.back().name = scen[r];
      rows.emplace_back();
      group_ids.emplace_back();
    }
    an::ThresholdInput& in = inputs[it->second];
    in.latency_ms.push_back(lat[r]);
    in.outcome.push_back(y[r]);
    rows[it->second].push_back(r);
    if (!groups.empty()) {
      auto& ids = group_ids[it->second];
      auto [g, added] = ids.emplace(groups[r], static_cast<int32_t>(ids.size()));
      in.group.push_back(g->second);
      in.groups = static_cast<int32_t>(ids.size());
    }
  }
  for (size_t s = 0; s < inputs.size(); ++s) {
    LL_RETURN_IF_ERROR(
        an::RequireBothClasses(t, out_col, y, rows[s], "scenario '" + inputs[s].name + "'"));
  }
  return inputs;
}

Status CheckThresholdFlags(const ThresholdFlags& f) {
  if (f.bootstrap < 20 || f.bootstrap > 100000) {
    return InvalidArgument("--bootstrap " + std::to_string(f.bootstrap) + " is outside [20, 100000]");
  }
  if (f.null_replicates < 19 || f.null_replicates > 100000) {
    return InvalidArgument("--null-replicates " + std::to_string(f.null_replicates) +
                           " is outside [19, 100000]");
  }
  if (!(f.alpha > 0 && f.alpha <= 0.5)) return InvalidArgument("--alpha must be in (0, 0.5]");
  if (!(f.margin >= 0 && f.margin <= 0.9)) return InvalidArgument("--margin must be in [0, 0.9]");
  // The floor keeps latency / resolution (latencies up to 1e9 ms) inside a 64-bit bin index.
  if (!(f.resolution_ms >= 0.001 && f.resolution_ms <= 1000)) {
    return InvalidArgument("--resolution-ms must be in [0.001, 1000]");
  }
  if (f.threads < 0 || f.threads > 256) return InvalidArgument("--threads must be in [0, 256]");
  if (f.direction != "auto" && f.direction != "up" && f.direction != "down") {
    return InvalidArgument("--direction '" + f.direction + "': expected auto, up or down");
  }
  if (f.config_metric != "ttft" && f.config_metric != "e2e") {
    return InvalidArgument("--config-metric '" + f.config_metric + "': expected ttft or e2e");
  }
  return Status::Ok();
}

void PrintThresholdText(const std::vector<an::ThresholdResult>& rs, double alpha) {
  std::printf("%-20s %8s %10s %22s %10s %10s %9s %8s\n", "scenario", "n", "threshold",
              "95% interval (ms)", "below", "above", "increase", "p");
  for (const an::ThresholdResult& r : rs) {
    if (!r.found) {
      std::printf("%-20s %8lld %10s %22s %10s %10s %9s %8.3g  (no threshold at alpha %g)\n",
                  r.name.c_str(), static_cast<long long>(r.n), "none", "-", "-", "-", "-",
                  r.p_value, alpha);
      continue;
    }
    char ci[64];
    std::snprintf(ci, sizeof ci, "[%.1f, %.1f]", r.ci_lo_ms, r.ci_hi_ms);
    std::printf("%-20s %8lld %10.1f %22s %10.4f %10.4f %8.1f%% %8.3g\n", r.name.c_str(),
                static_cast<long long>(r.n), r.threshold_ms, ci, r.rate_below, r.rate_above,
                100 * r.relative_increase, r.p_value);
  }
}

int RunThreshold(const ThresholdFlags& f) {
  const std::string what = "threshold";
  if (Status s = CheckThresholdFlags(f); !s.ok()) return Fail(what, s);
  auto inputs = LoadSessions(f);
  if (!inputs.ok()) return Fail(what, inputs.status());
  an::ThresholdOptions o;
  o.bootstrap = f.bootstrap;
  o.null_replicates = f.null_replicates;
  o.alpha = f.alpha;
  o.seed = f.seed;
  o.resolution_ms = f.resolution_ms;
  o.threads = f.threads > 0 ? f.threads : an::DefaultAnalysisThreads();
  o.direction = f.direction == "up" ? 1 : f.direction == "down" ? -1 : 0;
  std::vector<an::ThresholdResult> results;
  for (size_t s = 0; s < inputs->size(); ++s) {
    an::ThresholdOptions os = o;
    os.seed = an::DeriveSeed(f.seed, 100, s);  // each scenario its own streams
    auto r = an::FindThreshold((*inputs)[s], os);
    if (!r.ok()) return Fail(what, r.status());
    results.push_back(std::move(r).value());
  }
  if (f.json) {
    std::printf("%s\n", an::ThresholdJson(results, o).dump(2).c_str());
  } else {
    PrintThresholdText(results, f.alpha);
  }
  if (!f.emit_config.empty()) {
    const std::string toml = an::EmitSloToml(results, f.margin, f.config_metric, f.input);
    if (Status s = WriteFile(f.emit_config, toml); !s.ok()) return Fail(what, s);
  }
  if (!f.plot.empty()) {
    if (Status s = WriteFile(f.plot, an::ThresholdPlot(*inputs, results)); !s.ok()) {
      return Fail(what, s);
    }
  }
  return 0;
}

// ---- decay ----

// The decay's exponent with each term's own sign: "-0.002 t - 1e-06 t^2", "+1.8e-05 t" (a
// rate fitted negative). The square term is always written for the CVR form (k2 may be 0).
std::string DecayExponent(double k1, std::optional<double> k2) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s%.4g t", k1 >= 0 ? "-" : "+", std::abs(k1));
  std::string out = buf;
  if (k2) {
    std::snprintf(buf, sizeof buf, " %s %.4g t^2", *k2 >= 0 ? "-" : "+", std::abs(*k2));
    out += buf;
  }
  return out;
}

int RunDecay(const DecayFlags& f) {
  const std::string what = "decay";
  if (f.bins < 2 || f.bins > 1000) return Fail(what, InvalidArgument("--bins must be in [2, 1000]"));
  auto run = [&]() -> Result<an::DecayResult> {
    LL_ASSIGN_OR_RETURN(an::CsvTable t, an::ReadCsvFile(f.input));
    std::string latency_name = f.latency_col;
    if (an::IsRequestLog(t)) {
      // `serve --request-log` with posted outcomes: each served request an impression, its
      // wait the latency, clicks and conversions from the outcome lines.
      LL_ASSIGN_OR_RETURN(t, an::RequestLogSessions(t));
      if (!f.latency_col_given) latency_name = "wait_ms";
    }
    LL_ASSIGN_OR_RETURN(size_t lc, an::FindColumn(t, latency_name, "--latency-col"));
    LL_ASSIGN_OR_RETURN(size_t cc, an::FindColumn(t, f.click_col, "--click-col"));
    LL_ASSIGN_OR_RETURN(size_t vc, an::FindColumn(t, f.convert_col, "--convert-col"));
    an::DecayInput in;
    LL_ASSIGN_OR_RETURN(in.latency_ms, an::LatencyColumn(t, lc));
    LL_ASSIGN_OR_RETURN(in.clicked, an::BinaryColumn(t, cc));
    LL_ASSIGN_OR_RETURN(in.converted, an::BinaryColumn(t, vc));
    LL_RETURN_IF_ERROR(an::RequireBothClasses(t, cc, in.clicked, {}, ""));
    std::vector<size_t> clicked_rows;
    bool nested = true;
    for (size_t i = 0; i < in.clicked.size(); ++i) {
      if (in.clicked[i]) clicked_rows.push_back(i);
      if (in.converted[i] && !in.clicked[i]) nested = false;
    }
    LL_RETURN_IF_ERROR(an::RequireBothClasses(t, vc, in.converted, nested ? clicked_rows : std::vector<size_t>{},
                                              nested ? "among clicked rows" : ""));
    return an::FitDecay(in, f.bins);
  };
  auto r = run();
  if (!r.ok()) return Fail(what, r.status());
  if (f.json) {
    std::printf("%s\n", an::DecayJson(*r).dump(2).c_str());
  } else {
    std::printf("events %lld, clicks %lld, conversions %lld (CVR per %s)\n",
                static_cast<long long>(r->n), static_cast<long long>(r->clicks),
                static_cast<long long>(r->conversions), r->cvr_per_click ? "click" : "event");
    // The exponent as the fit has it, signs included: a fitted rate may come out negative
    // (latency raising the rate), and "exp(--1.8e-05 t)" was printed for it.
    const std::string ctr_exp = DecayExponent(r->ctr.k1, std::nullopt);
    const std::string cvr_exp = DecayExponent(r->cvr.k1, r->cvr.k2);
    std::printf("CTR(t) = %.4g exp(%s)          a = %.4g +- %.2g /ms, R^2 %.3f\n", r->ctr.p0,
                ctr_exp.c_str(), r->ctr.k1, r->ctr.k1_se, r->ctr_r2);
    std::printf("CVR(t) = %.4g exp(%s)  b = %.4g +- %.2g /ms, g = %.4g +- %.2g /ms^2, R^2 %.3f\n",
                r->cvr.p0, cvr_exp.c_str(), r->cvr.k1, r->cvr.k1_se, r->cvr.k2, r->cvr.k2_se,
                r->cvr_r2);
    std::printf("joint R^2 %.3f, independent exponentials (g = 0) R^2 %.3f; test of g = 0: LR %.2f, p %.3g\n",
                r->joint_r2, r->independent_r2, r->g_lr, r->g_p_value);
  }
  if (!f.plot.empty()) {
    if (Status s = WriteFile(f.plot, an::DecayPlot(*r)); !s.ok()) return Fail(what, s);
  }
  return 0;
}

// ---- impact ----

int RunImpact(const ImpactFlags& f) {
  const std::string what = "impact";
  auto run = [&]() -> Result<an::ImpactReport> {
    if (f.fit.empty() && f.threshold_fit.empty()) {
      return InvalidArgument("--fit FIT.json and/or --threshold-fit T.json are needed");
    }
    // A bench report.json, or a request log of `serve --request-log` (JSON Lines: not one JSON
    // document), read as one target per class.
    auto read = ReadJsonFile(f.report);
    if (!read.ok()) {
      auto log = an::ReadCsvFile(f.report);
      if (!log.ok() || !an::IsRequestLog(*log)) return read.status();
      read = an::ReportFromRequestLog(*log);
    }
    LL_ASSIGN_OR_RETURN(nlohmann::json report, std::move(read));
    an::ImpactModels m;
    if (!f.fit.empty()) {
      LL_ASSIGN_OR_RETURN(nlohmann::json fit, ReadJsonFile(f.fit));
      LL_ASSIGN_OR_RETURN(m.decay, an::DecayCurvesFromJson(fit, f.fit));
    }
    if (!f.threshold_fit.empty()) {
      LL_ASSIGN_OR_RETURN(nlohmann::json t, ReadJsonFile(f.threshold_fit));
      std::string preferred;
      if (report.contains("config") && report["config"].is_object()) {
        preferred = report["config"].value("slo_class", "");
      }
      LL_ASSIGN_OR_RETURN(m.abandon,
                          an::AbandonCurveFromJson(t, f.threshold_fit, f.scenario, preferred));
    }
    an::ImpactOptions o;
    o.metric = f.metric;
    nlohmann::json baseline;
    if (!f.baseline_report.empty()) {
      LL_ASSIGN_OR_RETURN(baseline, ReadJsonFile(f.baseline_report));
      o.baseline_report = &baseline;
    }
    return an::ComputeImpact(report, f.report, m, o);
  };
  auto r = run();
  if (!r.ok()) return Fail(what, r.status());
  if (f.json) {
    std::printf("%s\n", an::ImpactJson(*r).dump(2).c_str());
  } else {
    std::fputs(an::ImpactMarkdown(*r).c_str(), stdout);
  }
  return 0;
}

// ---- simulate ----

std::vector<an::SessionScenarioSpec> DefaultScenarios() {
  const char* specs[] = {
      "name=search,knee=387,below=0.10,above=0.163,median=300,sigma=0.5,rows=30000",
      "name=customer-service,knee=250,below=0.08,above=0.13,median=220,sigma=0.45,rows=20000",
      "name=code-completion,knee=200,below=0.15,above=0.245,median=150,sigma=0.5,rows=20000",
      "name=reports,knee=none,below=0.05,median=800,sigma=0.6,rows=10000"};
  std::vector<an::SessionScenarioSpec> out;
  for (const char* s : specs) out.push_back(*an::ParseScenarioSpec(s, "default"));
  return out;
}

int RunSimulate(const SimulateFlags& f) {
  const std::string what = "simulate";
  std::string csv;
  nlohmann::json truth;
  if (f.kind == "sessions") {
    std::vector<an::SessionScenarioSpec> specs;
    for (const std::string& s : f.scenarios) {
      auto spec = an::ParseScenarioSpec(s, "--scenario");
      if (!spec.ok()) return Fail(what, spec.status());
      specs.push_back(*spec);
    }
    if (specs.empty()) specs = DefaultScenarios();
    auto text = an::SimulateSessions(specs, f.seed);
    if (!text.ok()) return Fail(what, text.status());
    csv = std::move(text).value();
    truth = an::SessionTruthJson(specs, f.seed);
  } else if (f.kind == "events") {
    auto text = an::SimulateEvents(f.events, f.seed);
    if (!text.ok()) return Fail(what, text.status());
    csv = std::move(text).value();
    truth = an::EventTruthJson(f.events, f.seed);
  } else {
    return Fail(what, InvalidArgument("--kind '" + f.kind + "': expected sessions or events"));
  }
  if (Status s = WriteFile(f.out, csv); !s.ok()) return Fail(what, s);
  if (!f.truth.empty()) {
    if (Status s = WriteFile(f.truth, truth.dump(2) + "\n"); !s.ok()) return Fail(what, s);
  }
  return 0;
}

// ---- flags ----

// A column option whose default depends on the input (a request log has columns of its own):
// sets the name and records that the user chose it.
void AddColumnOption(CLI::App* c, const char* name, std::string* column, bool* given,
                     const char* help) {
  c->add_option_function<std::string>(
      name, [column, given](const std::string& v) { *column = v; *given = true; }, help);
}

void AddThreshold(CLI::App* parent, ThresholdFlags* f) {
  CLI::App* c = parent->add_subcommand(
      "threshold", "Find the latency at which the abandonment rate jumps, per scenario");
  c->add_option("--input", f->input,
                "Sessions CSV (header line; one row per session), or a request log of "
                "`serve --request-log` (JSON Lines)")
      ->required();
  AddColumnOption(c, "--latency-col", &f->latency_col, &f->latency_col_given,
                  "Latency column in ms (default latency_ms; wait_ms for a request log)");
  AddColumnOption(c, "--outcome-col", &f->outcome_col, &f->outcome_col_given,
                  "Outcome column, 0/1 or true/false (default abandoned; for a request log, the "
                  "posted abandoned / completed, else whether the client hung up)");
  AddColumnOption(c, "--scenario-col", &f->scenario_col, &f->scenario_col_given,
                  "Scenario column (default 'scenario' when present, 'class' for a request log; "
                  "otherwise one scenario 'all')");
  c->add_option("--group-col", f->group_col, "Resample these groups (users) in the bootstrap");
  c->add_option("--bootstrap", f->bootstrap, "Bootstrap replicates for the 95 % interval")
      ->capture_default_str();
  c->add_option("--null-replicates", f->null_replicates,
                "Parametric-bootstrap replicates for the p-value")->capture_default_str();
  c->add_option("--alpha", f->alpha, "Claim a threshold only when p < alpha")->capture_default_str();
  c->add_option("--seed", f->seed, "Bootstrap seed")->capture_default_str();
  c->add_option("--direction", f->direction, "auto, up (abandonment) or down (completion)")
      ->capture_default_str();
  c->add_option("--resolution-ms", f->resolution_ms, "Breakpoint resolution (bin width)")
      ->capture_default_str();
  c->add_option("--threads", f->threads, "Bootstrap threads (0: every CPU this process may use)")
      ->capture_default_str();
  c->add_flag("--json", f->json, "Print JSON");
  c->add_option("--emit-config", f->emit_config, "Write [classes.NAME] TOML for serve --config");
  c->add_option("--margin", f->margin, "P95 target = min(CI low, threshold x (1 - margin))")
      ->capture_default_str();
  c->add_option("--config-metric", f->config_metric, "Target written: ttft or e2e")
      ->capture_default_str();
  c->add_option("--plot", f->plot, "Write an SVG plot");
}

void AddDecay(CLI::App* parent, DecayFlags* f) {
  CLI::App* c = parent->add_subcommand(
      "decay", "Fit click-through and conversion decay with latency (maximum likelihood)");
  c->add_option("--input", f->input,
                "Events CSV (one row per impression), or a request log of `serve --request-log` "
                "with the outcomes posted to /v1/outcomes (JSON Lines)")
      ->required();
  AddColumnOption(c, "--latency-col", &f->latency_col, &f->latency_col_given,
                  "Latency column in ms (default latency_ms; wait_ms for a request log)");
  c->add_option("--click-col", f->click_col, "Clicked column (0/1)")->capture_default_str();
  c->add_option("--convert-col", f->convert_col, "Converted column (0/1)")->capture_default_str();
  c->add_option("--bins", f->bins, "Equal-count bins for R^2 and the plot")->capture_default_str();
  c->add_flag("--json", f->json, "Print JSON");
  c->add_option("--plot", f->plot, "Write an SVG plot");
}

void AddImpact(CLI::App* parent, ImpactFlags* f) {
  CLI::App* c = parent->add_subcommand(
      "impact", "Expected abandonment, CTR, CVR and conversions of a bench report's latencies");
  c->add_option("--report", f->report,
                "lifeline bench report.json, or a request log of `serve --request-log` (one "
                "target per class)")
      ->required();
  c->add_option("--fit", f->fit, "analyze decay --json output");
  c->add_option("--threshold-fit", f->threshold_fit, "analyze threshold --json output");
  c->add_option("--scenario", f->scenario, "Scenario of --threshold-fit (default: the report's "
                                           "SLO class, or the only one)");
  c->add_option("--baseline-report", f->baseline_report, "Compare against this report");
  c->add_option("--metric", f->metric, "ttft, ttfa or e2e (default: the report's slo_metric)");
  c->add_flag("--json", f->json, "Print JSON");
}

void AddSimulate(CLI::App* parent, SimulateFlags* f) {
  CLI::App* c = parent->add_subcommand("simulate", "Write synthetic logs with known ground truth");
  c->add_option("--kind", f->kind, "sessions or events")->required();
  c->add_option("--out", f->out, "CSV file ('-' = stdout)")->capture_default_str();
  c->add_option("--truth", f->truth, "Write the ground truth as JSON here");
  c->add_option("--seed", f->seed, "Seed")->capture_default_str();
  c->add_option("--scenario", f->scenarios,
                "sessions: name=N,knee=MS|none,below=R,above=R,slope=S,median=MS,sigma=S,rows=N,"
                "jitter=MS,users=N,user_sd=S (repeatable)");
  an::EventSpec& e = f->events;
  c->add_option("--rows", e.rows, "events: rows")->capture_default_str();
  c->add_option("--c0", e.c0, "events: CTR at zero latency")->capture_default_str();
  c->add_option("--a", e.a, "events: CTR decay per ms")->capture_default_str();
  c->add_option("--v0", e.v0, "events: CVR at zero latency")->capture_default_str();
  c->add_option("--b", e.b, "events: CVR decay per ms")->capture_default_str();
  c->add_option("--g", e.g, "events: CVR decay per ms^2")->capture_default_str();
  c->add_option("--median-ms", e.median_ms, "events: median latency")->capture_default_str();
  c->add_option("--sigma", e.sigma, "events: log-normal shape")->capture_default_str();
}

}  // namespace

CommandFn RegisterAnalyze(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "analyze", "Latency economics: thresholds, decay curves, impact, synthetic logs");
  cmd->require_subcommand(1);
  auto th = std::make_shared<ThresholdFlags>();
  auto de = std::make_shared<DecayFlags>();
  auto im = std::make_shared<ImpactFlags>();
  auto si = std::make_shared<SimulateFlags>();
  AddThreshold(cmd, th.get());
  AddDecay(cmd, de.get());
  AddImpact(cmd, im.get());
  AddSimulate(cmd, si.get());
  return [cmd, th, de, im, si] {
    if (cmd->got_subcommand("threshold")) return RunThreshold(*th);
    if (cmd->got_subcommand("decay")) return RunDecay(*de);
    if (cmd->got_subcommand("impact")) return RunImpact(*im);
    return RunSimulate(*si);
  };
}

}  // namespace lifeline::app
