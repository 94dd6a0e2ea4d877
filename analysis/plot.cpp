#include "analysis/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "base/svg_text.h"

namespace lifeline::analysis {

namespace {

constexpr int kMarginLeft = 64, kMarginRight = 250, kMarginTop = 30, kMarginBottom = 44;
constexpr int kPlotBins = 25;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

struct Frame {
  double x0, x1, y0, y1;
  int w, h;
  double X(double x) const { return kMarginLeft + (x - x0) / (x1 - x0) * (w - kMarginLeft - kMarginRight); }
  double Y(double y) const { return h - kMarginBottom - (y - y0) / (y1 - y0) * (h - kMarginTop - kMarginBottom); }
};

Frame MakeFrame(const PlotSpec& s) {
  double x0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
  auto see_x = [&](double x) {
    if (std::isfinite(x)) x0 = std::min(x0, x), x1 = std::max(x1, x);
  };
  for (const PlotSeries& ser : s.series) {
    for (const PlotPoint& p : ser.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      see_x(p.x);
      y1 = std::max({y1, p.y, std::isfinite(p.hi) ? p.hi : p.y});
    }
  }
  for (const PlotMarker& m : s.markers) see_x(m.x);
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!std::isfinite(y1) || y1 <= 0) y1 = 1;
  return Frame{x0, x1, 0, y1 * 1.08, s.width, s.height};
}

}  // namespace

void Wilson95(double k, double n, double* lo, double* hi) {
  if (n <= 0) {
    *lo = *hi = NAN;
    return;
  }
  const double z = 1.959963984540054, p = k / n, z2n = z * z / n;
  const double centre = (p + z2n / 2) / (1 + z2n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n);
  *lo = std::max(0.0, centre - half);
  *hi = std::min(1.0, centre + half);
}

std::string RenderPlot(const PlotSpec& s) {
  const Frame f = MakeFrame(s);
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(s.width) +
                  "\" height=\"" + std::to_string(s.height) + "\" viewBox=\"0 0 " +
                  std::to_string(s.width) + " " + std::to_string(s.height) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  o += "<text x=\"" + std::to_string(kMarginLeft) + "\" y=\"18\" font-size=\"13\" font-weight=\"bold\">" +
       XmlEscape(s.title) + "</text>\n";
  const double px0 = f.X(f.x0), px1 = f.X(f.x1), py0 = f.Y(f.y0), py1 = f.Y(f.y1);
  for (const PlotMarker& m : s.markers) {  // bands first, under the data
    if (!m.band) continue;
    const double a = f.X(std::max(f.x0, m.lo)), b = f.X(std::min(f.x1, m.hi));
    o += "<rect x=\"" + Num(a) + "\" y=\"" + Num(py1) + "\" width=\"" + Num(std::max(1.0, b - a)) +
         "\" height=\"" + Num(py0 - py1) + "\" fill=\"" + m.color + "\" fill-opacity=\"0.12\"/>\n";
  }
  for (double v : NiceTicks(f.y0, f.y1)) {
    o += "<line x1=\"" + Num(px0) + "\" x2=\"" + Num(px1) + "\" y1=\"" + Num(f.Y(v)) + "\" y2=\"" +
         Num(f.Y(v)) + "\" stroke=\"#eee\"/>\n<text x=\"" + Num(px0 - 6) + "\" y=\"" +
         Num(f.Y(v) + 4) + "\" text-anchor=\"end\">" + Tick(v) + "</text>\n";
  }
  for (double v : NiceTicks(f.x0, f.x1)) {
    o += "<line x1=\"" + Num(f.X(v)) + "\" x2=\"" + Num(f.X(v)) + "\" y1=\"" + Num(py0) +
         "\" y2=\"" + Num(py0 + 4) + "\" stroke=\"#333\"/>\n<text x=\"" + Num(f.X(v)) + "\" y=\"" +
         Num(py0 + 16) + "\" text-anchor=\"middle\">" + Tick(v) + "</text>\n";
  }
  o += "<rect x=\"" + Num(px0) + "\" y=\"" + Num(py1) + "\" width=\"" + Num(px1 - px0) +
       "\" height=\"" + Num(py0 - py1) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text x=\"" + Num((px0 + px1) / 2) + "\" y=\"" + std::to_string(s.height - 8) +
       "\" text-anchor=\"middle\">" + XmlEscape(s.x_label) + "</text>\n";
  o += "<text transform=\"translate(14," + Num((py0 + py1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + XmlEscape(s.y_label) + "</text>\n";
  for (const PlotSeries& ser : s.series) {
    if (ser.line) {
      std::string pts;
      for (const PlotPoint& p : ser.points) {
        if (std::isfinite(p.x) && std::isfinite(p.y)) pts += Num(f.X(p.x)) + "," + Num(f.Y(p.y)) + " ";
      }
      o += "<polyline fill=\"none\" stroke=\"" + ser.color + "\" stroke-width=\"2\"" +
           (ser.dashed ? " stroke-dasharray=\"6,4\"" : "") + " points=\"" + pts + "\"/>\n";
    }
    if (ser.markers) {
      for (const PlotPoint& p : ser.points) {
        if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
        if (std::isfinite(p.lo) && std::isfinite(p.hi) && p.hi > p.lo) {
          o += "<line x1=\"" + Num(f.X(p.x)) + "\" x2=\"" + Num(f.X(p.x)) + "\" y1=\"" +
               Num(f.Y(p.lo)) + "\" y2=\"" + Num(f.Y(p.hi)) + "\" stroke=\"" + ser.color + "\"/>\n";
        }
        o += "<circle cx=\"" + Num(f.X(p.x)) + "\" cy=\"" + Num(f.Y(p.y)) + "\" r=\"3\" fill=\"" +
             ser.color + "\"/>\n";
      }
    }
  }
  int legend_y = kMarginTop + 10;
  for (const PlotMarker& m : s.markers) {
    o += "<line x1=\"" + Num(f.X(m.x)) + "\" x2=\"" + Num(f.X(m.x)) + "\" y1=\"" + Num(py0) +
         "\" y2=\"" + Num(py1) + "\" stroke=\"" + m.color + "\" stroke-dasharray=\"4,3\"/>\n";
  }
  auto legend = [&](const std::string& color, const std::string& text) {
    const int x = s.width - kMarginRight + 10;
    o += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(legend_y - 8) +
         "\" width=\"10\" height=\"10\" fill=\"" + color + "\"/>\n<text x=\"" +
         std::to_string(x + 14) + "\" y=\"" + std::to_string(legend_y + 1) + "\">" + XmlEscape(text) +
         "</text>\n";
    legend_y += 16;
  };
  for (const PlotSeries& ser : s.series) legend(ser.color, ser.name);
  for (const PlotMarker& m : s.markers) legend(m.color, m.label);
  o += "</svg>\n";
  return o;
}

std::string StackSvgs(const std::vector<std::string>& svgs, const std::vector<int>& heights,
                      int width) {
  const int total = std::accumulate(heights.begin(), heights.end(), 0);
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                  "\" height=\"" + std::to_string(total) + "\">\n";
  int y = 0;
  for (size_t i = 0; i < svgs.size(); ++i) {
    // A nested <svg> is positioned by x/y attributes: insert them into the child's tag.
    std::string child = svgs[i];
    child.insert(4, " x=\"0\" y=\"" + std::to_string(y) + "\"");
    o += child;
    y += heights[i];
  }
  o += "</svg>\n";
  return o;
}

std::string ThresholdPlot(const std::vector<ThresholdInput>& inputs,
                          const std::vector<ThresholdResult>& results) {
  std::vector<std::string> charts;
  std::vector<int> heights;
  for (size_t s = 0; s < inputs.size() && s < results.size(); ++s) {
    const ThresholdInput& in = inputs[s];
    const ThresholdResult& r = results[s];
    std::vector<size_t> order(in.latency_ms.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return in.latency_ms[a] < in.latency_ms[b]; });
    PlotSpec p;
    p.title = "Scenario '" + in.name + "': abandonment rate vs latency";
    p.x_label = "latency (ms)";
    p.y_label = "rate (95 % Wilson bars)";
    PlotSeries obs{"observed (equal-count bins)", "#1f77b4", {}, false, true};
    const size_t n = order.size(), k = std::min<size_t>(kPlotBins, n);
    double t_max = 0;
    for (size_t b = 0; b < k; ++b) {
      const size_t lo = b * n / k, hi = (b + 1) * n / k;
      double t = 0, y = 0;
      for (size_t i = lo; i < hi; ++i) {
        t += in.latency_ms[order[i]];
        y += in.outcome[order[i]];
      }
      const double cnt = static_cast<double>(hi - lo);
      PlotPoint pt{t / cnt, y / cnt, 0, 0};
      Wilson95(y, cnt, &pt.lo, &pt.hi);
      obs.points.push_back(pt);
      t_max = std::max(t_max, t / cnt);
    }
    p.series.push_back(obs);
    // Curves over the plotted range (the outermost bin means).
    const double t0 = obs.points.empty() ? 0 : obs.points.front().x;
    PlotSeries line{"no-break trend", "#7f7f7f", {}, true, false, true};
    PlotSeries jump{"breakpoint model", "#d62728", {}, true, false, false};
    const double cut = r.candidate_ms.value_or(NAN);
    for (int i = 0; i <= 200; ++i) {
      const double t = t0 + (t_max - t0) * i / 200.0;
      const double v = TrendCovariate(t, r.t_center_ms, r.t_scale_ms);
      line.points.push_back({t, JumpProb(r.line, true, v), 0, 0});
      if (r.found) jump.points.push_back({t, JumpProb(r.jump, t >= cut, v), 0, 0});
    }
    p.series.push_back(line);
    if (r.found) {
      p.series.push_back(jump);
      char label[96];
      std::snprintf(label, sizeof label, "threshold %.0f ms [%.0f, %.0f]", r.threshold_ms,
                    r.ci_lo_ms, r.ci_hi_ms);
      p.markers.push_back({r.threshold_ms, r.ci_lo_ms, r.ci_hi_ms, true, label, "#d62728"});
    } else {
      char title[96];
      std::snprintf(title, sizeof title, " (no threshold: p = %.3g)", r.p_value);
      p.title += title;
    }
    charts.push_back(RenderPlot(p));
    heights.push_back(p.height);
  }
  return StackSvgs(charts, heights, 900);
}

std::string DecayPlot(const DecayResult& r) {
  struct Panel {
    const char* title;
    const char* what;
  };
  const Panel panels[] = {{"Click-through rate vs latency", "ctr"},
                          {"Conversion rate vs latency", "cvr"},
                          {"Joint rate (clicked and converted) vs latency", "joint"}};
  std::vector<std::string> charts;
  std::vector<int> heights;
  for (const Panel& pn : panels) {
    const std::string w = pn.what;
    PlotSpec p;
    p.title = pn.title;
    p.x_label = "latency (ms)";
    p.y_label = "rate (95 % Wilson bars)";
    PlotSeries obs{"observed (equal-count bins)", "#1f77b4", {}, false, true};
    double t0 = INFINITY, t1 = 0;
    for (const RateBin& b : r.bins) {
      double k = b.clicks, n = b.events;
      if (w == "cvr") k = b.conversions, n = r.cvr_per_click ? b.clicks : b.events;
      if (w == "joint") k = b.joint;
      if (n <= 0) continue;
      PlotPoint pt{b.t_mean_ms, k / n, 0, 0};
      Wilson95(k, n, &pt.lo, &pt.hi);
      obs.points.push_back(pt);
      t0 = std::min(t0, b.t_mean_ms);
      t1 = std::max(t1, b.t_mean_ms);
    }
    p.series.push_back(obs);
    PlotSeries fit{w == "ctr" ? "c0 exp(-a t)" : "with g (joint model)", "#d62728", {}, true, false};
    PlotSeries indep{"independent exponentials (g = 0)", "#2ca02c", {}, true, false, true};
    for (int i = 0; i <= 200 && std::isfinite(t0); ++i) {
      const double t = t0 + (t1 - t0) * i / 200.0;
      if (w == "ctr") fit.points.push_back({t, ExpAt(r.ctr, t), 0, 0});
      if (w == "cvr") {
        fit.points.push_back({t, ExpAt(r.cvr, t), 0, 0});
        indep.points.push_back({t, ExpAt(r.cvr_no_g, t), 0, 0});
      }
      if (w == "joint") {
        fit.points.push_back({t, ExpAt(r.ctr, t) * ExpAt(r.cvr, t), 0, 0});
        indep.points.push_back({t, ExpAt(r.ctr, t) * ExpAt(r.cvr_no_g, t), 0, 0});
      }
    }
    p.series.push_back(fit);
    if (w != "ctr") p.series.push_back(indep);
    charts.push_back(RenderPlot(p));
    heights.push_back(p.height);
  }
  return StackSvgs(charts, heights, 900);
}

std::string ImpactPlot(const ImpactModels& m, const ImpactReport& r) {
  PlotSpec p;
  p.title = "Expected rates vs " + r.metric + " latency, with each configuration's P95";
  p.x_label = r.metric + " latency (ms)";
  p.y_label = "rate";
  double t_max = 0;
  const char* colors[] = {"#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  size_t ci = 0;
  for (const ImpactRow& row : r.rows) {
    std::vector<double> v = row.set.latency_ms;
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const double p95 = v[static_cast<size_t>(std::ceil(0.95 * static_cast<double>(v.size()))) - 1];
    t_max = std::max(t_max, v.back());
    p.markers.push_back({p95, 0, 0, false, row.set.label + " P95", colors[ci++ % 6]});
  }
  if (m.abandon && m.abandon->threshold_ms) t_max = std::max(t_max, *m.abandon->threshold_ms * 1.5);
  if (t_max <= 0) t_max = 1000;
  PlotSeries ctr{"CTR", "#1f77b4", {}, true, false};
  PlotSeries joint{"joint conversion", "#d62728", {}, true, false};
  PlotSeries ab{"abandonment", "#ff7f0e", {}, true, false, true};
  for (int i = 0; i <= 200; ++i) {
    const double t = t_max * i / 200.0;
    const Expectation e = Expect(m, {t}, 0);
    ctr.points.push_back({t, e.ctr, 0, 0});
    joint.points.push_back({t, e.joint, 0, 0});
    ab.points.push_back({t, e.abandonment, 0, 0});
  }
  if (m.decay) {
    p.series.push_back(ctr);
    p.series.push_back(joint);
  }
  if (m.abandon) p.series.push_back(ab);
  return RenderPlot(p);
}

}  // namespace lifeline::analysis
