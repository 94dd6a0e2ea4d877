// The summary that opens report.md and report.html and is stored as "summary_by_load" in
// report.json: for each offered load, which targets meet the SLO (ship them) and by how much
// the others miss, with the measured P95 of a target that stopped early and the small-sample
// caveat, so that the first lines of a report answer "which model can I ship at my load?".
#include <cmath>
#include <cstdio>

#include "bench/loadgen/report.h"

namespace lifeline::loadgen {

namespace {

std::string Label(const ReportInputs& in, int target) {
  return in.options->targets[static_cast<size_t>(target)].label;
}

// "P95 TTFT".
std::string P95Name(const ReportInputs& in) { return "P95 " + MetricLabel(in.options->metric); }

// "12 of 50 requests": finished of planned (sent when the count was open-ended).
std::string FinishedOfPlanned(const TargetStepSummary& s) {
  const int64_t of = s.planned > 0 ? s.planned : s.sent;
  return std::to_string(s.finished) + " of " + std::to_string(of) + " requests";
}

// The reasons a verdict is weaker than it looks, appended inside a clause's parentheses.
std::string Caveats(const TargetStepSummary& s) {
  std::string t;
  if (s.stopped_early) t += "; stopped early past the cliff after " + FinishedOfPlanned(s);
  if (s.small_sample) t += "; " + SmallSampleText(s.finished);
  return t;
}

// "A (P95 TTFT 140 ms <= 387 ms)".
std::string PassClause(const ReportInputs& in, const TargetStepSummary& s) {
  return Label(in, s.target) + " (" + P95Name(in) + " " + FormatMs(s.slo_p95_ms) + " ms <= " +
         FormatMs(in.options->threshold_ms) + " ms" + Caveats(s) + ")";
}

// How a failing target misses, from what it measured over its finished requests.
std::string MissClause(const ReportInputs& in, const TargetStepSummary& s) {
  const double thr = in.options->threshold_ms;
  const double p95 = s.measured_slo_p95_ms;
  const std::string who = Label(in, s.target);
  if (std::isnan(p95)) {
    return who + " misses: no request finished" + (s.stopped_early ? " before the early stop" : "") +
           " (" + std::to_string(s.cancelled) + " cancelled" + Caveats(s) + ")";
  }
  if (std::isinf(p95)) {
    return who + " misses: " + P95Name(in) + " infinite, " + std::to_string(s.errors) + " of " +
           std::to_string(s.finished) + " finished requests failed (" +
           FormatShare(s.errors, s.finished) + Caveats(s) + ")";
  }
  if (p95 > thr) {
    return who + " misses by " + FormatMs(p95 - thr) + " ms at P95 (" + MetricLabel(in.options->metric) +
           " " + FormatMs(p95) + " ms > " + FormatMs(thr) + " ms" + Caveats(s) + ")";
  }
  // The finished requests were fast enough, but the early stop counted in-flight requests
  // already past the threshold: the P95 of all planned requests could no longer pass.
  return who + " misses: in-flight requests were already past the threshold (" + P95Name(in) +
         " of the finished " + FormatMs(p95) + " ms" + Caveats(s) + ")";
}

// "A (...) or B (...)".
std::string JoinOr(const std::vector<std::string>& parts) {
  std::string t;
  for (size_t i = 0; i < parts.size(); ++i) t += (i == 0 ? "" : " or ") + parts[i];
  return t;
}

// "A and B failed a lower load".
std::string NotRunNames(const ReportInputs& in, const LoadAnswer& a) {
  std::string t;
  for (size_t i = 0; i < a.not_run.size(); ++i) {
    t += (i == 0 ? "" : i + 1 == a.not_run.size() ? " and " : ", ") + Label(in, a.not_run[i]);
  }
  return t + " failed a lower load";
}

std::string AnswerText(const ReportInputs& in, const std::vector<const TargetStepSummary*>& row,
                       const LoadAnswer& a) {
  const RunOptions& o = *in.options;
  std::vector<std::string> pass, rest;
  for (const TargetStepSummary* s : row) {
    if (!s->ran) {
      rest.push_back(Label(in, s->target) + " not run (failed a lower load)");
    } else if (s->slo_p95_ms <= o.threshold_ms) {
      pass.push_back(PassClause(in, *s));
    } else {
      rest.push_back(MissClause(in, *s));
    }
  }
  std::string t = "At " + LoadName(o.mode, a.load);
  if (a.pass.empty() && a.miss.empty()) return t + " no target was run (" + NotRunNames(in, a) + ").";
  t += pass.empty() ? " no target meets " + P95Name(in) + " <= " + FormatMs(o.threshold_ms) + " ms"
                    : " ship " + JoinOr(pass);
  for (size_t i = 0; i < rest.size(); ++i) t += (i == 0 && pass.empty() ? ": " : "; ") + rest[i];
  return t + ".";
}

std::string VerdictCell(const TargetStepSummary& s, double threshold_ms) {
  if (!s.ran) return "not run (failed a lower load)";
  return s.slo_p95_ms <= threshold_ms ? "PASS" : "FAIL";
}

// The judged P95, with what an early-stopped step measured.
std::string JudgedCell(const TargetStepSummary& s) {
  if (!s.stopped_early) return FormatMs(s.slo_p95_ms);
  return "inf (stopped early; measured " + FormatMs(s.measured_slo_p95_ms) + ")";
}

// Measured P95 minus the threshold: "-247" is headroom, "+715" a miss.
std::string MarginCell(const TargetStepSummary& s, double threshold_ms) {
  const double d = s.measured_slo_p95_ms - threshold_ms;
  if (!std::isfinite(d)) return FormatMs(d);
  return (d > 0 ? "+" : d < 0 ? "-" : "") + FormatMs(std::fabs(d));
}

std::string SummaryRow(const ReportInputs& in, const TargetStepSummary& s) {
  const double thr = in.options->threshold_ms;
  std::string row = "| " + LoadName(in.options->mode, s.load) + " | " +
                    TableCell(Label(in, s.target)) + " | " + VerdictCell(s, thr) + " | ";
  if (!s.ran) return row + "- | - | - | - | - | - | - | - | - | - |\n";
  char rates[64];
  std::snprintf(rates, sizeof rates, "%.2f | %.2f", s.goodput_rps, s.smooth_goodput_rps);
  return row + FormatMs(s.ttft.p95) + " | " + FormatMs(s.ttfa.p95) + " | " + FormatMs(s.e2e.p95) +
         " | " + JudgedCell(s) +
         " | " + MarginCell(s, thr) + " | " + FinishedOfPlanned(s) + " | " +
         std::to_string(s.errors) + " (" + FormatShare(s.errors, s.finished) + ") | " + rates +
         " | " + (s.small_sample ? SmallSampleText(s.finished) : std::string("-")) + " |\n";
}

}  // namespace

std::string FormatShare(int64_t part, int64_t whole) {
  if (whole <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::vector<LoadAnswer> BuildAnswers(const ReportInputs& in,
                                     const std::vector<TargetStepSummary>& summaries) {
  const size_t n_targets = in.options->targets.size();
  std::vector<LoadAnswer> answers;
  for (size_t first = 0; first + n_targets <= summaries.size(); first += n_targets) {
    std::vector<const TargetStepSummary*> row;
    LoadAnswer a;
    a.step = summaries[first].step;
    a.load = summaries[first].load;
    for (size_t k = 0; k < n_targets; ++k) {
      const TargetStepSummary& s = summaries[first + k];
      row.push_back(&s);
      if (!s.ran) a.not_run.push_back(s.target);
      else if (s.slo_p95_ms <= in.options->threshold_ms) a.pass.push_back(s.target);
      else a.miss.push_back(s.target);
    }
    a.text = AnswerText(in, row, a);
    answers.push_back(std::move(a));
  }
  return answers;
}

std::string SummaryMarkdown(const ReportInputs& in, const Report& rep) {
  std::string md;
  for (const LoadAnswer& a : rep.answers) md += "- " + a.text + "\n";
  md += "\n| load | target | verdict | TTFT P95 ms | TTFA P95 ms | e2e P95 ms | judged " +
        P95Name(in) +
        " ms | vs threshold ms | finished | errors | goodput req/s | smooth goodput req/s | "
        "caveat |\n";
  md += "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const TargetStepSummary& s : rep.summaries) md += SummaryRow(in, s);
  return md;
}

nlohmann::json AnswersJson(const ReportInputs& in, const Report& rep) {
  nlohmann::json out = nlohmann::json::array();
  for (const LoadAnswer& a : rep.answers) {
    out.push_back({{"step", a.step}, {"load", a.load},
                   {"slo_metric", SloMetricName(in.options->metric)},
                   {"threshold_ms", in.options->threshold_ms}, {"pass", a.pass},
                   {"miss", a.miss}, {"not_run", a.not_run}, {"text", a.text}});
  }
  return out;
}

}  // namespace lifeline::loadgen
