// report.html: the Markdown report's tables rendered as HTML plus inline SVG charts (latency
// CDFs, P95 and goodput against offered load, a latency timeline with degradation events, and
// the stacked three-layer bars). One self-contained file: no scripts, styles inline, no
// network fetches.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "bench/loadgen/report.h"
#include "bench/loadgen/svg.h"

namespace lifeline::loadgen {

namespace {

constexpr size_t kMaxCdfPoints = 400;
constexpr size_t kMaxTimelinePoints = 3000;

std::vector<std::string> SplitCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|') {
      const size_t b = cur.find_first_not_of(' ');
      const size_t e = cur.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return cells;
}

// The subset of Markdown that ReportMarkdown writes: headings, paragraphs, "- " lists, pipe
// tables.
std::string MarkdownToHtml(const std::string& md) {
  std::istringstream in(md);
  std::string line, html;
  int table_row = -1;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line.starts_with("- ")) {
      if (!in_list) html += "<ul>\n";
      in_list = true;
      html += "<li>" + XmlEscape(line.substr(2)) + "</li>\n";
      continue;
    }
    if (in_list) {
      html += "</ul>\n";
      in_list = false;
    }
    if (line.starts_with("|")) {
      if (table_row < 0) {
        html += "<table>\n";
        table_row = 0;
      }
      const std::vector<std::string> cells = SplitCells(line);
      if (table_row == 1) {  // the |---| separator
        ++table_row;
        continue;
      }
      const char* tag = table_row == 0 ? "th" : "td";
      html += "<tr>";
      for (const std::string& c : cells) {
        std::string cls;
        if (c == "PASS") cls = " class=\"pass\"";
        if (c == "FAIL") cls = " class=\"fail\"";
        if (c.starts_with("not run")) cls = " class=\"notrun\"";
        if (c.starts_with("small sample")) cls = " class=\"caveat\"";
        html += std::string("<") + tag + cls + ">" + XmlEscape(c) + "</" + tag + ">";
      }
      html += "</tr>\n";
      ++table_row;
      continue;
    }
    if (table_row >= 0) {
      html += "</table>\n";
      table_row = -1;
    }
    if (line.starts_with("## ")) html += "<h2>" + XmlEscape(line.substr(3)) + "</h2>\n";
    else if (line.starts_with("# ")) html += "<h1>" + XmlEscape(line.substr(2)) + "</h1>\n";
    else if (!line.empty()) html += "<p>" + XmlEscape(line) + "</p>\n";
  }
  if (table_row >= 0) html += "</table>\n";
  if (in_list) html += "</ul>\n";
  return html;
}

std::string SeriesName(const ReportInputs& in, int step, int target) {
  std::string name = in.options->targets[static_cast<size_t>(target)].label;
  if (in.run->steps.size() > 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " @ %g", in.run->steps[static_cast<size_t>(step)].load);
    name += buf;
  }
  return name;
}

std::vector<std::pair<double, double>> CdfPoints(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> pts;
  if (v.empty()) return pts;
  const size_t n = v.size();
  const size_t stride = std::max<size_t>(1, n / kMaxCdfPoints);
  for (size_t i = 0; i < n; i += stride) pts.emplace_back(v[i], static_cast<double>(i + 1) / n);
  if (pts.back().second < 1.0) pts.emplace_back(v.back(), 1.0);
  return pts;
}

// The CDF of the first token: TTFT solid and TTFA (the first answer token) dashed, per target
// and step; the two coincide for a server that does not think. Or of the end-to-end latency.
std::string CdfChart(const ReportInputs& in, bool first_token) {
  SvgChart c;
  c.title = first_token ? "Latency CDF: TTFT (solid) and TTFA, the first answer token (dashed), "
                          "successful requests"
                        : "Latency CDF: end-to-end (successful requests)";
  c.x_label = first_token ? "TTFT / TTFA (ms)" : "end-to-end (ms)";
  c.y_label = "fraction of requests";
  const size_t n_targets = in.options->targets.size();
  for (size_t s = 0; s < in.run->steps.size(); ++s) {
    for (size_t k = 0; k < n_targets; ++k) {
      if (!in.run->steps[s].targets[k].ran) continue;
      std::vector<double> v, answer;
      for (const RequestRecord& r : in.run->records) {
        if (r.step != static_cast<int>(s) || r.target != static_cast<int>(k) || !r.ok()) continue;
        v.push_back(first_token ? TtftOrE2e(r) : r.x.e2e_ms);
        answer.push_back(TtfaOrE2e(r));
      }
      // Kept in the legend when nothing succeeded, so that every target shows in every chart.
      std::string name = SeriesName(in, static_cast<int>(s), static_cast<int>(k));
      if (v.empty()) name += " (no successful requests)";
      const std::string color = SeriesColor(s * n_targets + k);
      c.series.push_back({name, color, CdfPoints(std::move(v)), true, false});
      if (!first_token) continue;
      SvgSeries ttfa{name + " TTFA", color, CdfPoints(std::move(answer)), true, false};
      ttfa.dashed = true;
      c.series.push_back(std::move(ttfa));
    }
  }
  const SloMetric m = in.options->metric;
  if (first_token ? m != SloMetric::kE2e : m == SloMetric::kE2e) {
    c.v_lines.emplace_back(in.options->threshold_ms,
                           "SLO threshold (" + MetricLabel(m) + ")");
  }
  return RenderChart(c);
}

std::string LoadCharts(const ReportInputs& in, const Report& rep) {
  const RunOptions& o = *in.options;
  const std::string x_label = o.mode == LoadMode::kRate ? "offered load (req/s)" : "concurrency";
  SvgChart p95;
  p95.title = "P95 " + MetricLabel(o.metric) + " vs offered load";
  p95.x_label = x_label;
  p95.y_label = "P95 (ms; failures count as slow)";
  p95.has_h_line = true;
  p95.h_line = o.threshold_ms;
  p95.h_line_label = "threshold " + FormatMs(o.threshold_ms) + " ms";
  p95.clip_note = "off the chart: P95 infinite (over 5% failed) or stopped early past the cliff";
  SvgChart good;
  good.title = "Goodput (solid) and smooth goodput (dashed) vs offered load";
  good.x_label = x_label;
  good.y_label = "requests/s meeting the SLO";
  for (size_t k = 0; k < o.targets.size(); ++k) {
    SvgSeries a{o.targets[k].label, SeriesColor(k), {}, true, true};
    SvgSeries b = a;
    SvgSeries smooth{o.targets[k].label + " (smooth)", SeriesColor(k), {}, true, false};
    smooth.dashed = true;
    for (const TargetStepSummary& s : rep.summaries) {
      if (s.target != static_cast<int>(k) || !s.ran) continue;
      // slo_p95_ms is +inf for a step stopped early or with too many failures: drawn on the
      // top edge, not dropped (the table beside gives what it measured).
      a.points.emplace_back(s.load, s.slo_p95_ms);
      b.points.emplace_back(s.load, s.goodput_rps);
      smooth.points.emplace_back(s.load, s.smooth_goodput_rps);
    }
    p95.series.push_back(std::move(a));
    good.series.push_back(std::move(b));
    good.series.push_back(std::move(smooth));
  }
  return RenderChart(p95) + RenderChart(good);
}

std::string TimelineChart(const ReportInputs& in) {
  const RunOptions& o = *in.options;
  SvgChart c;
  c.title = "Timeline: " + MetricLabel(o.metric) + " of each request by send time";
  c.x_label = "time since the run started (s)";
  c.y_label = MetricLabel(o.metric) + " (ms)";
  c.has_h_line = true;
  c.h_line = o.threshold_ms;
  c.h_line_label = "threshold";
  c.width = 900;
  c.clip_note = "off the chart: failed request";
  const size_t stride = std::max<size_t>(1, in.run->records.size() / kMaxTimelinePoints);
  for (size_t k = 0; k < o.targets.size(); ++k) {
    SvgSeries s{o.targets[k].label, SeriesColor(k), {}, false, true};
    for (size_t i = 0; i < in.run->records.size(); i += stride) {
      const RequestRecord& r = in.run->records[i];
      // Failures are +inf, drawn on the top edge; requests an early stop cancelled are not
      // the server's answer and stay out.
      if (r.target != static_cast<int>(k) || r.x.error == "cancelled") continue;
      s.points.emplace_back(r.start_ms / 1000.0, r.SloValue(o.metric));
    }
    c.series.push_back(std::move(s));
  }
  if (in.run->steps.size() > 1) {
    for (const StepData& st : in.run->steps) {
      bool ran = false;
      for (const TargetStep& t : st.targets) ran |= t.ran;
      if (ran) c.v_lines.emplace_back(st.start_ms / 1000.0, "step " + LoadName(o.mode, st.load));
    }
  }
  for (size_t k = 0; k < in.facts.size(); ++k) {
    for (const SloEvent& e : in.facts[k].slo_events) {
      c.v_lines.emplace_back(e.t_ms / 1000.0, o.targets[k].label + ": " + e.kind +
                                                  (e.detail.empty() ? "" : " (" + e.detail + ")"));
    }
  }
  return RenderChart(c);
}

std::string LayerBars(const ReportInputs& in, const Report& rep) {
  std::vector<SvgBar> bars;
  for (const TargetStepSummary& s : rep.summaries) {
    if (!s.ran) continue;
    bars.push_back({SeriesName(in, s.step, s.target),
                    {s.network.mean_ms, s.service.mean_ms, s.compute.mean_ms}});
  }
  return RenderStackedBars("Three-layer breakdown of end-to-end latency (mean)", "ms",
                           {"network (client residual)", "service", "compute"},
                           {"#9ecae1", "#fdae6b", "#74c476"}, bars);
}

}  // namespace

std::string ReportHtml(const ReportInputs& in, const Report& rep) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>lifeline bench report</title>\n<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}\n"
      "table{border-collapse:collapse;margin:8px 0 20px}\n"
      "th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}\n"
      "th{background:#f3f3f3}\n.pass{background:#d9f2d9}\n.fail{background:#f7d4d4}\n"
      ".caveat{background:#fff3cd}\n.notrun{color:#777}\n"
      "figure{margin:12px 0}\nsvg{background:#fff;border:1px solid #eee}\n"
      "</style></head><body>\n";
  html += MarkdownToHtml(ReportMarkdown(in, rep));
  html += "<h2>Charts</h2>\n";
  html += "<figure>" + CdfChart(in, true) + "</figure>\n";
  html += "<figure>" + CdfChart(in, false) + "</figure>\n";
  html += "<figure>" + LoadCharts(in, rep) + "</figure>\n";
  html += "<figure>" + TimelineChart(in) + "</figure>\n";
  html += "<figure>" + LayerBars(in, rep) + "</figure>\n";
  if (!in.extra_html.empty()) html += "<figure>" + in.extra_html + "</figure>\n";
  html += "</body></html>\n";
  return html;
}

}  // namespace lifeline::loadgen
