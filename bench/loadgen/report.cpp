#include "bench/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace lifeline::loadgen {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LayerStats Layer(const std::vector<double>& v) {
  const LatencySummary s = Summarize(v);
  return {s.mean, s.p95};
}

nlohmann::json Num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json SummaryJson(const LatencySummary& s) {
  return {{"count", s.count}, {"mean", Num(s.mean)}, {"p50", Num(s.p50)}, {"p90", Num(s.p90)},
          {"p95", Num(s.p95)}, {"p99", Num(s.p99)},  {"max", Num(s.max)}};
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Cell(const std::string& s) { return TableCell(s); }

std::string HardwareText(const ReportInputs& in, int target) {
  const TargetSpec& t = in.options->targets[static_cast<size_t>(target)];
  if (!t.hardware.empty()) return t.hardware;
  std::string hw = in.hardware.cpu_model.empty() ? "unknown CPU" : in.hardware.cpu_model;
  if (in.hardware.logical_cores > 0) hw += ", " + std::to_string(in.hardware.logical_cores) + " threads";
  // Facts come from this machine: exact for a loopback target, an assumption otherwise.
  const std::string& h = t.url.host;
  const bool local = h == "localhost" || h == "::1" || h.starts_with("127.");
  return local ? hw : hw + " (client host; set hw= on the target)";
}

std::string BucketName(const std::vector<int64_t>& edges, size_t b) {
  if (edges.empty()) return "any";
  if (b == 0) return "<= " + std::to_string(edges[0]);
  if (b < edges.size()) return std::to_string(edges[b - 1] + 1) + "-" + std::to_string(edges[b]);
  return "> " + std::to_string(edges.back());
}

size_t BucketOf(const std::vector<int64_t>& edges, int64_t words) {
  size_t b = 0;
  while (b < edges.size() && words > edges[b]) ++b;
  return b;
}

int64_t MedianOf(std::vector<int64_t> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// The server declined the request (rate limited or overloaded) rather than failing it.
bool Refused(const RequestRecord& r) {
  return r.x.error == "http_status" && (r.x.http_status == 429 || r.x.http_status == 503);
}

// "heavy 40, light 20" (successful requests per served model; "?" for an unnamed one).
std::string ServedByText(const std::map<std::string, int64_t>& served_by) {
  std::string out;
  for (const auto& [model, n] : served_by) {
    out += (out.empty() ? "" : ", ") + (model.empty() ? std::string("?") : model) + " " +
           std::to_string(n);
  }
  return out;
}

// Whether a prompts file line asks for its own thinking budget or effort.
bool PromptsSetThinking(const WorkloadSpec& w) {
  for (const ThinkingParams& t : w.prompt_thinking) {
    if (t.any()) return true;
  }
  return false;
}

// "Requests asked for thinking: thinking_budget_tokens 256, reasoning_effort low. TTFT counts
// the first token, thinking included; TTFA the first answer token." ("" when none asked).
std::string ThinkingText(const WorkloadSpec& w) {
  std::string asked;
  if (w.thinking.budget_tokens) {
    asked += "thinking_budget_tokens " + std::to_string(*w.thinking.budget_tokens);
  }
  if (!w.thinking.reasoning_effort.empty()) {
    asked += (asked.empty() ? "" : ", ") + std::string("reasoning_effort ") +
             w.thinking.reasoning_effort;
  }
  if (PromptsSetThinking(w)) {
    asked += (asked.empty() ? "" : "; ") + std::string("the prompts file sets its own per line");
  }
  if (asked.empty()) return "";
  return "Requests asked for thinking: " + asked +
         ". TTFT counts the first token, thinking included; TTFA the first answer token.";
}

// One target's requests of one step in one input class.
struct ClassSample {
  std::vector<double> slo;           // SLO metric of every request; failed or cancelled: +inf
  std::vector<double> finished_slo;  // the same without the cancelled ones: what was measured
  std::vector<double> ttft, ttfa, e2e;  // successful requests
  std::vector<int64_t> words, tokens;
};

ClassSample SampleOfClass(const std::vector<const RequestRecord*>& records,
                          const std::vector<int64_t>& edges, size_t bucket, SloMetric metric) {
  ClassSample c;
  for (const RequestRecord* r : records) {
    if (BucketOf(edges, r->prompt_words) != bucket) continue;
    c.slo.push_back(r->SloValue(metric));
    if (r->x.error != "cancelled") c.finished_slo.push_back(r->SloValue(metric));
    if (r->ok()) {
      c.ttft.push_back(TtftOrE2e(*r));
      c.ttfa.push_back(TtfaOrE2e(*r));
      c.e2e.push_back(r->x.e2e_ms);
    }
    c.words.push_back(r->prompt_words);
    if (r->prompt_tokens >= 0) c.tokens.push_back(r->prompt_tokens);
  }
  return c;
}

// Model, parameters and quantization: the target spec, else /v1/models, else the model name.
void DescribeModel(const ReportInputs& in, size_t k, VerdictRow* v) {
  const TargetFacts& f = in.facts[k];
  const TargetSpec& t = in.options->targets[k];
  v->model = !f.model.id.empty() ? f.model.id : (t.model.empty() ? t.label : t.model);
  v->parameters = !t.params.empty() ? t.params
                  : !f.model.parameters.empty() ? f.model.parameters
                                                : ParametersFromName(v->model);
  v->quantization = !t.quant.empty() ? t.quant
                    : !f.model.quantization.empty() ? f.model.quantization
                                                    : QuantizationFromName(v->model);
}

VerdictRow BuildVerdictRow(const ReportInputs& in, int s, int k, size_t bucket,
                           const ClassSample& c) {
  const RunOptions& o = *in.options;
  const StepData& step = in.run->steps[static_cast<size_t>(s)];
  VerdictRow v;
  v.target = k;
  v.step = s;
  DescribeModel(in, static_cast<size_t>(k), &v);
  v.hardware = HardwareText(in, k);
  v.scenario = LoadName(o.mode, step.load);
  if (!o.workload.slo_class.empty()) v.scenario += ", class " + o.workload.slo_class;
  v.input_length = BucketName(in.input_buckets, bucket) + " words (median " +
                   std::to_string(MedianOf(c.words)) + " words";
  if (!c.tokens.empty()) v.input_length += ", " + std::to_string(MedianOf(c.tokens)) + " tokens";
  v.input_length += ")";
  v.requests = static_cast<int64_t>(c.slo.size());
  v.stopped_early = step.targets[static_cast<size_t>(k)].stopped_early;
  // An early-stopped step failed by construction; what its finished requests measured is
  // kept beside the verdict.
  v.measured_p95_ms = Percentile(c.finished_slo, 95);
  v.p95_ms = v.stopped_early ? std::numeric_limits<double>::infinity() : Percentile(c.slo, 95);
  v.finished = static_cast<int64_t>(c.finished_slo.size());
  v.small_sample = SmallSampleForP95(v.finished);
  v.ttft_p95_ms = Percentile(c.ttft, 95);
  v.ttfa_p95_ms = Percentile(c.ttfa, 95);
  v.e2e_p95_ms = Percentile(c.e2e, 95);
  v.target_ms = o.threshold_ms;
  v.pass = v.p95_ms <= o.threshold_ms;
  return v;
}

double ErrorShare(const TargetStepSummary& s) {
  return s.finished > 0 ? static_cast<double>(s.errors) / static_cast<double>(s.finished) : kNaN;
}

// "stopped early (past the cliff) after 12 finished requests of 50 planned, 3 in flight
// cancelled; measured TTFT P95 1700 ms, 25% of them failed".
std::string StoppedEarlyText(const TargetStepSummary& s, SloMetric metric) {
  std::string t = "stopped early (past the cliff) after " + std::to_string(s.finished) +
                  " finished requests";
  if (s.planned > 0) t += " of " + std::to_string(s.planned) + " planned";
  if (s.cancelled > 0) t += ", " + std::to_string(s.cancelled) + " in flight cancelled";
  t += "; measured " + MetricLabel(metric) + " P95 " + FormatMs(s.measured_slo_p95_ms) + " ms";
  if (s.errors > 0) t += ", " + FormatShare(s.errors, s.finished) + " of them failed";
  return t;
}

// The throughput table's note on how a step ended (errors by kind are appended after it).
std::string StepNote(const TargetStepSummary& s, SloMetric metric) {
  if (!s.ran) return "skipped (failed a lower load)";
  std::string note = s.stopped_early ? StoppedEarlyText(s, metric) : "";
  if (s.small_sample) note += (note.empty() ? "" : "; ") + SmallSampleText(s.finished);
  return note;
}

}  // namespace

std::string TableCell(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '|') ? '/' : (c == '\n' ? ' ' : c);
  return out.empty() ? "-" : out;
}

std::string SmallSampleText(int64_t finished) {
  return "small sample: " + std::to_string(finished) + " finished requests (< " +
         std::to_string(kMinRequestsForP95) + "), so the P95 is the slowest of them";
}

std::string LoadName(LoadMode mode, double load) {
  return mode == LoadMode::kRate ? Fmt("%g req/s", load) : Fmt("concurrency %g", load);
}

std::string FormatMs(double ms) {
  if (std::isnan(ms)) return "-";
  if (std::isinf(ms)) return "inf";
  return ms >= 100 ? Fmt("%.0f", ms) : Fmt("%.1f", ms);
}

double OfferedDurationS(const RunOptions& o, double load, const TargetStep& ts) {
  if (o.mode == LoadMode::kRate && ts.planned > 0 && load > 0) {
    return static_cast<double>(ts.planned) / load;
  }
  return std::max(ts.wall_s, o.duration_s);
}

std::string ItemsPerSecondLabel(Api api) {
  return api == Api::kRerank ? "documents/s" : "inputs/s";
}

std::string ItemsPerSecondKey(Api api) {
  return api == Api::kRerank ? "documents_per_s" : "inputs_per_s";
}

std::string ApiText(const WorkloadSpec& w) {
  if (!IsRetrievalApi(w.api)) return "";
  // "32 words" for a fixed length, "uniform:4:200 words" for a drawn one.
  const LengthDist& d = w.prompt_words;
  const std::string len = d.kind == LengthDist::Kind::kFixed ? Fmt("%g", d.a) : d.ToString();
  const std::string words = w.prompts.empty() ? len + " words" : "a line of the prompts file";
  std::string t = std::string("API: ") + ApiName(w.api) + " (POST /v1/" + ApiName(w.api) + "), ";
  if (w.api == Api::kEmbeddings) {
    t += std::to_string(BatchInputs(w)) + " input(s) of " + words +
         " per request, encoding_format " + (RequestsBase64(w) ? "base64" : "float");
  } else {
    t += "a query of " + words + " and " + std::to_string(Documents(w)) + " documents of " +
         std::to_string(DocumentWords(w)) + " words per request";
  }
  return t + ". Not streamed: a request's latency is the whole request (TTFT = TTFA = e2e, the "
             "time to the answer); a 2xx answer with the wrong number of entries or an empty "
             "vector or score counts as an error (malformed_answer).";
}

std::string MetricLabel(SloMetric m) {
  switch (m) {
    case SloMetric::kTtft: return "TTFT";
    case SloMetric::kTtfa: return "TTFA";
    case SloMetric::kE2e: break;
  }
  return "e2e";
}

std::string MetricChoiceText(const RunOptions& o) {
  const std::string name = MetricLabel(o.metric);
  if (o.metric_from_flag) {
    if (o.metric == SloMetric::kTtfa) {
      return "judged by TTFA, the first answer token after any thinking (set by --slo-metric)";
    }
    return "judged by " + name + " (set by --slo-metric)";
  }
  if (o.metric == SloMetric::kTtft) {
    return "judged by TTFT, the default for streamed requests (--slo-metric ttfa judges the "
           "first answer token after any thinking, --slo-metric e2e end-to-end latency)";
  }
  return "judged by end-to-end latency, the default for non-streamed requests, whose first "
         "token arrives with the last (--slo-metric ttft overrides)";
}

TargetStepSummary SummarizeTargetStep(const std::vector<const RequestRecord*>& records,
                                      double threshold_ms, SloMetric metric, double wall_s,
                                      double offered_duration_s) {
  TargetStepSummary s;
  s.wall_s = wall_s;
  s.offered_duration_s = offered_duration_s;
  std::vector<double> ttft, ttfa, tpot, itl, e2e, slo, net, svc, cmp;
  int64_t out_tokens = 0;
  int64_t inputs = 0;
  for (const RequestRecord* r : records) {
    ++s.sent;
    if (r->x.http_status == 429) ++s.http_429;
    if (r->x.error == "cancelled") {
      ++s.cancelled;
    } else {
      slo.push_back(r->SloValue(metric));
    }
    if (!r->ok()) {
      if (r->x.error != "cancelled") {
        ++s.errors;
        ++s.errors_by_kind[r->x.error];
        ++(Refused(*r) ? s.refused : s.failed);
      }
      continue;
    }
    ++s.ok;
    ++s.served_by[r->x.served_model];
    ttft.push_back(TtftOrE2e(*r));
    ttfa.push_back(TtfaOrE2e(*r));
    e2e.push_back(r->x.e2e_ms);
    if (r->tpot_ms >= 0) tpot.push_back(r->tpot_ms);
    itl.insert(itl.end(), r->x.itl_ms.begin(), r->x.itl_ms.end());
    out_tokens += std::max<int64_t>(0, r->output_tokens);
    inputs += r->inputs;
    if (r->network_ms >= 0) {
      ++s.layered;
      net.push_back(r->network_ms);
      svc.push_back(r->service_ms);
      cmp.push_back(r->compute_ms);
    }
  }
  s.ttft = Summarize(ttft);
  s.ttfa = Summarize(ttfa);
  s.tpot = Summarize(tpot);
  s.itl = Summarize(itl);
  s.e2e = Summarize(e2e);
  s.slo_p95_ms = Percentile(slo, 95);
  s.measured_slo_p95_ms = s.slo_p95_ms;
  if (wall_s > 0) {
    s.throughput_rps = static_cast<double>(s.ok) / wall_s;
    s.output_tok_s = static_cast<double>(out_tokens) / wall_s;
    s.inputs_per_s = static_cast<double>(inputs) / wall_s;
  }
  s.finished = s.ok + s.errors;
  s.small_sample = SmallSampleForP95(s.finished);
  s.met_slo = CountMeetingSlo(slo, threshold_ms);
  s.goodput_rps = GoodputRps(slo, threshold_ms, offered_duration_s);
  s.smooth_goodput_rps = SmoothGoodputRps(s.met_slo, s.refused, s.failed, offered_duration_s);
  s.network = Layer(net);
  s.service = Layer(svc);
  s.compute = Layer(cmp);
  return s;
}

Report BuildReport(const ReportInputs& in) {
  const RunOptions& o = *in.options;
  const RunData& run = *in.run;
  const size_t n_targets = o.targets.size();
  Report rep;
  // records[step][target]
  std::vector<std::vector<std::vector<const RequestRecord*>>> by(
      run.steps.size(), std::vector<std::vector<const RequestRecord*>>(n_targets));
  for (const RequestRecord& r : run.records) {
    by[static_cast<size_t>(r.step)][static_cast<size_t>(r.target)].push_back(&r);
  }
  std::vector<std::vector<SweepPoint>> points(n_targets);
  for (size_t s = 0; s < run.steps.size(); ++s) {
    const StepData& step = run.steps[s];
    for (size_t k = 0; k < n_targets; ++k) {
      const TargetStep& ts = step.targets[k];
      TargetStepSummary sum = SummarizeTargetStep(by[s][k], o.threshold_ms, o.metric, ts.wall_s,
                                                  OfferedDurationS(o, step.load, ts));
      sum.step = static_cast<int>(s);
      sum.target = static_cast<int>(k);
      sum.load = step.load;
      sum.ran = ts.ran;
      sum.stopped_early = ts.stopped_early;
      sum.planned = ts.planned;
      // An early-stopped step failed by construction, even if what was sent looks fine.
      if (ts.stopped_early) sum.slo_p95_ms = std::numeric_limits<double>::infinity();
      points[k].push_back({step.load, sum.slo_p95_ms, ts.ran});
      rep.summaries.push_back(std::move(sum));
    }
  }
  for (size_t k = 0; k < n_targets; ++k) {
    rep.knees.push_back(run.steps.size() > 1 ? FindKnee(points[k], o.threshold_ms)
                                             : std::nullopt);
  }
  // Verdicts: target x step x input class.
  const size_t n_buckets = in.input_buckets.size() + 1;
  for (size_t s = 0; s < run.steps.size(); ++s) {
    for (size_t k = 0; k < n_targets; ++k) {
      if (!run.steps[s].targets[k].ran) continue;
      for (size_t b = 0; b < n_buckets; ++b) {
        const ClassSample c = SampleOfClass(by[s][k], in.input_buckets, b, o.metric);
        if (c.slo.empty()) continue;
        rep.verdicts.push_back(BuildVerdictRow(in, static_cast<int>(s), static_cast<int>(k), b, c));
      }
    }
  }
  rep.answers = BuildAnswers(in, rep.summaries);
  // Ratios against target 0.
  for (size_t s = 0; s < run.steps.size(); ++s) {
    const TargetStepSummary& base = rep.summaries[s * n_targets];
    if (!base.ran) continue;
    for (size_t k = 1; k < n_targets; ++k) {
      const TargetStepSummary& cur = rep.summaries[s * n_targets + k];
      if (!cur.ran) continue;
      auto ratio = [](double a, double b) { return b > 0 && std::isfinite(b) ? a / b : kNaN; };
      RatioRow row{static_cast<int>(s), static_cast<int>(k),
                   ratio(cur.ttft.p95, base.ttft.p95), ratio(cur.e2e.p95, base.e2e.p95),
                   ratio(cur.output_tok_s, base.output_tok_s),
                   ratio(cur.goodput_rps, base.goodput_rps)};
      row.ttfa_p95 = ratio(cur.ttfa.p95, base.ttfa.p95);
      row.inputs_per_s = ratio(cur.inputs_per_s, base.inputs_per_s);
      rep.ratios.push_back(row);
    }
  }
  return rep;
}

nlohmann::json ReportJson(const ReportInputs& in, const Report& rep) {
  const RunOptions& o = *in.options;
  const RunData& run = *in.run;
  nlohmann::json targets = nlohmann::json::array();
  for (size_t k = 0; k < o.targets.size(); ++k) {
    const TargetSpec& t = o.targets[k];
    const TargetFacts& f = in.facts[k];
    nlohmann::json events = nlohmann::json::array();
    for (const SloEvent& e : f.slo_events) {
      events.push_back({{"t_ms", e.t_ms}, {"kind", e.kind}, {"detail", e.detail}});
    }
    targets.push_back({{"label", t.label},
                       {"url", t.url.ToString()},
                       {"model", t.model},
                       {"knee_load", rep.knees[k] ? nlohmann::json(*rep.knees[k]) : nlohmann::json(nullptr)},
                       {"facts", {{"model_id", f.model.id},
                                  {"parameters", f.model.parameters},
                                  {"quantization", f.model.quantization},
                                  {"context_length", f.model.context_length},
                                  {"source", f.model.source},
                                  {"models_status", f.models_status}}},
                       {"slo_status", f.slo_status},
                       {"slo_events", std::move(events)}});
  }
  const Api api = o.workload.api;
  const bool retrieval = IsRetrievalApi(api);
  nlohmann::json summaries = nlohmann::json::array();
  for (const TargetStepSummary& s : rep.summaries) {
    summaries.push_back({{"step", s.step}, {"target", s.target}, {"load", s.load},
                         {"ran", s.ran}, {"stopped_early", s.stopped_early},
                         {"planned", s.planned}, {"sent", s.sent}, {"ok", s.ok},
                         {"errors", s.errors}, {"http_429", s.http_429},
                         {"cancelled", s.cancelled}, {"errors_by_kind", s.errors_by_kind},
                         {"served_by", s.served_by},
                         {"ttft_ms", SummaryJson(s.ttft)}, {"ttfa_ms", SummaryJson(s.ttfa)},
                         {"tpot_ms", SummaryJson(s.tpot)},
                         {"itl_ms", SummaryJson(s.itl)}, {"e2e_ms", SummaryJson(s.e2e)},
                         {"wall_s", s.wall_s}, {"throughput_rps", s.throughput_rps},
                         {"output_tok_s", s.output_tok_s}, {"goodput_rps", s.goodput_rps},
                         {"offered_duration_s", s.offered_duration_s},
                         {"smooth_goodput_rps", s.smooth_goodput_rps},
                         {"finished", s.finished}, {"met_slo", s.met_slo},
                         {"refused", s.refused}, {"failed", s.failed},
                         {"error_share", s.finished > 0 ? nlohmann::json(ErrorShare(s))
                                                        : nlohmann::json(nullptr)},
                         {"measured_slo_p95_ms", Num(s.measured_slo_p95_ms)},
                         {"small_sample", s.small_sample},
                         {"slo_p95_ms", Num(s.slo_p95_ms)},
                         {"layers", {{"requests_with_server_timings", s.layered},
                                     {"network_ms", {{"mean", Num(s.network.mean_ms)}, {"p95", Num(s.network.p95_ms)}}},
                                     {"service_ms", {{"mean", Num(s.service.mean_ms)}, {"p95", Num(s.service.p95_ms)}}},
                                     {"compute_ms", {{"mean", Num(s.compute.mean_ms)}, {"p95", Num(s.compute.p95_ms)}}}}}});
    if (retrieval) summaries.back()[ItemsPerSecondKey(api)] = s.inputs_per_s;
  }
  nlohmann::json verdicts = nlohmann::json::array();
  for (const VerdictRow& v : rep.verdicts) {
    verdicts.push_back({{"target", v.target}, {"step", v.step}, {"model", v.model},
                        {"parameters", v.parameters}, {"quantization", v.quantization},
                        {"hardware", v.hardware}, {"scenario", v.scenario},
                        {"input_length", v.input_length}, {"requests", v.requests},
                        {"p95_ms", Num(v.p95_ms)}, {"target_ms", v.target_ms}, {"pass", v.pass},
                        {"finished", v.finished}, {"measured_p95_ms", Num(v.measured_p95_ms)},
                        {"ttft_p95_ms", Num(v.ttft_p95_ms)}, {"ttfa_p95_ms", Num(v.ttfa_p95_ms)},
                        {"e2e_p95_ms", Num(v.e2e_p95_ms)},
                        {"stopped_early", v.stopped_early}, {"small_sample", v.small_sample}});
  }
  nlohmann::json ratios = nlohmann::json::array();
  for (const RatioRow& r : rep.ratios) {
    ratios.push_back({{"step", r.step}, {"target", r.target}, {"baseline", 0},
                      {"ttft_p95", Num(r.ttft_p95)}, {"ttfa_p95", Num(r.ttfa_p95)},
                      {"e2e_p95", Num(r.e2e_p95)},
                      {"output_tok_s", Num(r.output_tok_s)}, {"goodput", Num(r.goodput)}});
    if (retrieval) ratios.back()[ItemsPerSecondKey(api)] = Num(r.inputs_per_s);
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const StepData& s : run.steps) {
    nlohmann::json per = nlohmann::json::array();
    for (const TargetStep& t : s.targets) {
      per.push_back({{"ran", t.ran}, {"stopped_early", t.stopped_early}, {"planned", t.planned},
                     {"sent", t.sent}, {"wall_s", t.wall_s}});
    }
    steps.push_back({{"load", s.load}, {"start_ms", s.start_ms}, {"end_ms", s.end_ms},
                     {"targets", std::move(per)}});
  }
  nlohmann::json requests = nlohmann::json::array();
  for (const RequestRecord& r : run.records) requests.push_back(RecordJson(r));
  const WorkloadSpec& w = o.workload;
  nlohmann::json j = {
      {"schema", "lifeline-bench/1"},
      {"command", in.command_line},
      {"start_unix_ms", run.start_unix_ms},
      {"total_s", run.total_s},
      {"config",
       {{"mode", o.mode == LoadMode::kRate ? "rate" : "concurrency"},
        {"loads", o.loads},
        {"burstiness", o.burstiness},
        {"requests", o.requests},
        {"duration_s", o.duration_s},
        {"seed", o.seed},
        {"timeout_s", o.timeout_s},
        {"threshold_ms", o.threshold_ms},
        {"slo_metric", SloMetricName(o.metric)},
        {"slo_metric_source", o.metric_from_flag ? "--slo-metric" : "default"},
        {"percentile_definition", "nearest-rank"},
        {"small_sample_below", kMinRequestsForP95},
        {"api", ApiName(w.api)},
        {"stream", RequestsStream(w)},
        {"prompt_words", w.prompts.empty() ? w.prompt_words.ToString() : "prompts file"},
        // A retrieval request asks for no output tokens.
        {"output_tokens",
         retrieval ? nlohmann::json(nullptr) : nlohmann::json(w.output_tokens.ToString())},
        {"slo_class", w.slo_class},
        {"user_role", w.user_role},
        {"thinking_budget_tokens", w.thinking.budget_tokens
                                       ? nlohmann::json(*w.thinking.budget_tokens)
                                       : nlohmann::json(nullptr)},
        {"reasoning_effort", w.thinking.reasoning_effort},
        {"prompt_thinking", PromptsSetThinking(w)},
        {"conversations", w.conversations},
        {"think_time_ms", w.think_time_ms},
        {"system_words", w.system_words},
        {"reply_words", w.reply_words},
        {"input_buckets_words", in.input_buckets}}},
      {"hardware", {{"cpu_model", in.hardware.cpu_model},
                    {"logical_cores", in.hardware.logical_cores}}},
      {"targets", std::move(targets)},
      {"steps", std::move(steps)},
      {"summaries", std::move(summaries)},
      {"verdicts", std::move(verdicts)},
      {"ratios", std::move(ratios)},
      {"summary_by_load", AnswersJson(in, rep)},
      {"requests", std::move(requests)},
  };
  if (w.api == Api::kEmbeddings) {
    j["config"]["batch_inputs"] = BatchInputs(w);
    j["config"]["encoding_format"] = RequestsBase64(w) ? "base64" : "float";
  } else if (w.api == Api::kRerank) {
    j["config"]["documents"] = Documents(w);
    j["config"]["document_words"] = DocumentWords(w);
  }
  if (o.workload.conversations > 0) j["conversations"] = ConversationsJson(ConversationRows(in));
  if (!in.extra_json.is_null()) j["impact"] = in.extra_json;
  return j;
}

std::string ReportMarkdown(const ReportInputs& in, const Report& rep) {
  const RunOptions& o = *in.options;
  const size_t n_targets = o.targets.size();
  // The answer first: which target to ship at each load, and why the others miss.
  std::string md = "# lifeline bench report\n\n## Summary\n\n";
  md += "SLO: P95 " + MetricLabel(o.metric) + " <= " + FormatMs(o.threshold_ms) + " ms, " +
        MetricChoiceText(o) +
        ". Nearest-rank percentiles; failed requests count as infinitely slow. Hardware: " +
        Cell(in.hardware.cpu_model) + ", " + std::to_string(in.hardware.logical_cores) +
        " logical cores.\n\n";
  if (const std::string t = ApiText(o.workload); !t.empty()) md += t + "\n\n";
  if (const std::string t = ThinkingText(o.workload); !t.empty()) md += t + "\n\n";
  md += SummaryMarkdown(in, rep);
  md += ConversationsMarkdown(in, ConversationRows(in));
  md += "\n## Latency (ms, successful requests)\n\n";
  md += "| load | target | metric | P50 | P90 | P95 | P99 | max | n |\n";
  md += "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const TargetStepSummary& s : rep.summaries) {
    if (!s.ran) continue;
    const std::string head = "| " + LoadName(o.mode, s.load) + " | " +
                             Cell(o.targets[static_cast<size_t>(s.target)].label) + " | ";
    const std::pair<const char*, const LatencySummary*> rows[] = {
        {"TTFT", &s.ttft}, {"TTFA", &s.ttfa}, {"TPOT", &s.tpot}, {"ITL", &s.itl},
        {"e2e", &s.e2e}};
    for (const auto& [name, l] : rows) {
      md += head + name + " | " + FormatMs(l->p50) + " | " + FormatMs(l->p90) + " | " +
            FormatMs(l->p95) + " | " + FormatMs(l->p99) + " | " + FormatMs(l->max) + " | " +
            std::to_string(l->count) + " |\n";
    }
  }
  md += "\n## Throughput and goodput\n\n";
  // A retrieval run generates nothing: its column counts the inputs or documents answered.
  const Api api = o.workload.api;
  const bool retrieval = IsRetrievalApi(api);
  const std::string per_s = retrieval ? ItemsPerSecondLabel(api) : "output tok/s";
  md += "| load | target | sent | ok | errors | 429 | cancelled | req/s | " + per_s +
        " | goodput req/s | smooth goodput req/s | SLO P95 ms | served by | note |\n";
  md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n";
  for (const TargetStepSummary& s : rep.summaries) {
    std::string note = StepNote(s, o.metric);
    for (const auto& [kind, n] : s.errors_by_kind) note += (note.empty() ? "" : "; ") + kind + " " + std::to_string(n);
    md += "| " + LoadName(o.mode, s.load) + " | " + Cell(o.targets[static_cast<size_t>(s.target)].label) +
          " | " + std::to_string(s.sent) + " | " + std::to_string(s.ok) + " | " +
          std::to_string(s.errors) + " | " + std::to_string(s.http_429) + " | " +
          std::to_string(s.cancelled) + " | " + Fmt("%.2f", s.throughput_rps) + " | " +
          Fmt("%.1f", retrieval ? s.inputs_per_s : s.output_tok_s) + " | " +
          Fmt("%.2f", s.goodput_rps) + " | " +
          Fmt("%.2f", s.smooth_goodput_rps) + " | " +
          FormatMs(s.slo_p95_ms) + " | " + Cell(ServedByText(s.served_by)) + " | " + Cell(note) + " |\n";
  }
  md += "\n## Three-layer breakdown (ms; network = client residual)\n\n";
  md += "| load | target | with timings | network mean | network P95 | service mean | service P95 | compute mean | compute P95 |\n";
  md += "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const TargetStepSummary& s : rep.summaries) {
    if (!s.ran) continue;
    md += "| " + LoadName(o.mode, s.load) + " | " + Cell(o.targets[static_cast<size_t>(s.target)].label) +
          " | " + std::to_string(s.layered) + " | " + FormatMs(s.network.mean_ms) + " | " +
          FormatMs(s.network.p95_ms) + " | " + FormatMs(s.service.mean_ms) + " | " +
          FormatMs(s.service.p95_ms) + " | " + FormatMs(s.compute.mean_ms) + " | " +
          FormatMs(s.compute.p95_ms) + " |\n";
  }
  if (in.run->steps.size() > 1) {
    md += "\n## Knee (highest load with P95 under the threshold)\n\n| target | knee |\n| --- | --- |\n";
    for (size_t k = 0; k < n_targets; ++k) {
      md += "| " + Cell(o.targets[k].label) + " | " +
            (rep.knees[k] ? LoadName(o.mode, *rep.knees[k]) : std::string("none (lowest load fails)")) +
            " |\n";
    }
  }
  md += "\n## SLA verdict\n\n";
  md += "| target | model | parameters | quantization | hardware | scenario | input length | n | P95 ms | target ms | verdict | caveat |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |\n";
  for (const VerdictRow& v : rep.verdicts) {
    const std::string p95 = v.stopped_early ? "inf (stopped early; measured " +
                                                  FormatMs(v.measured_p95_ms) + ")"
                                            : FormatMs(v.p95_ms);
    md += "| " + Cell(o.targets[static_cast<size_t>(v.target)].label) + " | " + Cell(v.model) + " | " +
          Cell(v.parameters) + " | " + Cell(v.quantization) + " | " + Cell(v.hardware) + " | " +
          Cell(v.scenario) + " | " + Cell(v.input_length) + " | " + std::to_string(v.requests) +
          " | " + p95 + " | " + FormatMs(v.target_ms) + " | " + (v.pass ? "PASS" : "FAIL") +
          " | " + (v.small_sample ? SmallSampleText(v.finished) : std::string("-")) + " |\n";
  }
  if (!rep.ratios.empty()) {
    md += "\n## Ratios against " + Cell(o.targets[0].label) + "\n\n";
    md += "| load | target | TTFT P95 | TTFA P95 | e2e P95 | " + per_s +
          " | goodput |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
    for (const RatioRow& r : rep.ratios) {
      auto x = [](double v) { return std::isfinite(v) ? Fmt("%.2fx", v) : std::string("-"); };
      md += "| " + LoadName(o.mode, in.run->steps[static_cast<size_t>(r.step)].load) + " | " +
            Cell(o.targets[static_cast<size_t>(r.target)].label) + " | " + x(r.ttft_p95) + " | " +
            x(r.ttfa_p95) + " | " + x(r.e2e_p95) + " | " +
            x(retrieval ? r.inputs_per_s : r.output_tok_s) + " | " + x(r.goodput) + " |\n";
    }
  }
  md += "\n## Targets\n\n| target | url | model | /v1/models | /v1/slo | degradation events |\n| --- | --- | --- | --- | --- | ---: |\n";
  for (size_t k = 0; k < n_targets; ++k) {
    const TargetFacts& f = in.facts[k];
    md += "| " + Cell(o.targets[k].label) + " | " + Cell(o.targets[k].url.ToString()) + " | " +
          Cell(f.model.id) + " | " + Cell(f.models_status) + " | " + Cell(f.slo_status) + " | " +
          std::to_string(f.slo_events.size()) + " |\n";
  }
  if (!in.extra_markdown.empty()) md += "\n" + in.extra_markdown;
  return md;
}

Status WriteReports(const std::string& dir, const ReportInputs& in, const Report& rep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("--out '" + dir + "': cannot create: " + ec.message());
  const std::pair<std::string, std::string> files[] = {
      {"report.json", ReportJson(in, rep).dump(1, ' ', false, nlohmann::json::error_handler_t::replace)},
      {"report.md", ReportMarkdown(in, rep)},
      {"report.html", ReportHtml(in, rep)},
  };
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return IoError(path + ": write failed");
  }
  return Status::Ok();
}

}  // namespace lifeline::loadgen
