#include "bench/loadgen/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lifeline::loadgen {

namespace {

constexpr int kLeft = 64, kRight = 16, kBottom = 48;
constexpr int kTitleBand = 26, kLegendRow = 15;

struct LegendItem {
  std::string name;
  std::string color;
  bool triangle = false;  // the marker of points off the chart, not a series swatch
};
using LegendItems = std::vector<LegendItem>;

double LegendItemWidth(const std::string& name) { return 24 + 6.5 * static_cast<double>(name.size()); }

// Rows the legend needs between the title and the plot at this width.
int LegendRows(const LegendItems& items, int w) {
  int rows = items.empty() ? 0 : 1;
  double x = kLeft;
  for (const auto& item : items) {
    const double iw = LegendItemWidth(item.name);
    if (x + iw > w - kRight && x > kLeft) {
      ++rows;
      x = kLeft;
    }
    x += iw;
  }
  return rows;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickLabel(double v) {
  char buf[32];
  if (std::fabs(v) >= 10000) std::snprintf(buf, sizeof buf, "%.3g", v);
  else std::snprintf(buf, sizeof buf, "%g", std::round(v * 1000) / 1000);
  return buf;
}

// An upward triangle with its apex at (x, y): the marker of a point off the chart above.
std::string Triangle(double x, double y, const std::string& color, const std::string& title) {
  std::string s = "<path class=\"clipped\" d=\"M" + Num(x) + "," + Num(y) + " L" + Num(x - 5) + "," +
                  Num(y + 9) + " L" + Num(x + 5) + "," + Num(y + 9) + " Z\" fill=\"" +
                  XmlEscape(color) + "\">";
  if (!title.empty()) s += "<title>" + XmlEscape(title) + "</title>";
  return s + "</path>\n";
}

// +inf: above every finite value, drawn on the plot's top edge.
bool OffTheTop(double y) { return std::isinf(y) && y > 0; }

struct Frame {
  double x0, x1, y0, y1;  // data range
  int w, h;
  int top;  // plot area top (below the title and legend)
  double X(double x) const { return kLeft + (x - x0) / (x1 - x0) * (w - kLeft - kRight); }
  double Y(double y) const { return h - kBottom - (y - y0) / (y1 - y0) * (h - top - kBottom); }
};

std::string Axes(const Frame& f, const std::string& title, const std::string& x_label,
                 const std::string& y_label, const std::vector<double>& xt,
                 const std::vector<double>& yt) {
  std::string s;
  s += "<text x=\"" + std::to_string(f.w / 2) + "\" y=\"18\" text-anchor=\"middle\" "
       "font-weight=\"bold\">" + XmlEscape(title) + "</text>\n";
  for (double y : yt) {
    s += "<line x1=\"" + Num(kLeft) + "\" x2=\"" + Num(f.w - kRight) + "\" y1=\"" + Num(f.Y(y)) +
         "\" y2=\"" + Num(f.Y(y)) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + Num(kLeft - 6) + "\" y=\"" + Num(f.Y(y) + 4) +
         "\" text-anchor=\"end\">" + TickLabel(y) + "</text>\n";
  }
  for (double x : xt) {
    s += "<line x1=\"" + Num(f.X(x)) + "\" x2=\"" + Num(f.X(x)) + "\" y1=\"" + Num(f.h - kBottom) +
         "\" y2=\"" + Num(f.h - kBottom + 4) + "\" stroke=\"#444\"/>\n";
    s += "<text x=\"" + Num(f.X(x)) + "\" y=\"" + Num(f.h - kBottom + 16) +
         "\" text-anchor=\"middle\">" + TickLabel(x) + "</text>\n";
  }
  s += "<rect x=\"" + Num(kLeft) + "\" y=\"" + Num(f.top) + "\" width=\"" +
       Num(f.w - kLeft - kRight) + "\" height=\"" + Num(f.h - f.top - kBottom) +
       "\" fill=\"none\" stroke=\"#444\"/>\n";
  s += "<text x=\"" + std::to_string((f.w + kLeft) / 2) + "\" y=\"" + std::to_string(f.h - 10) +
       "\" text-anchor=\"middle\">" + XmlEscape(x_label) + "</text>\n";
  s += "<text transform=\"translate(14," + std::to_string(f.h / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + XmlEscape(y_label) + "</text>\n";
  return s;
}

std::string Legend(const LegendItems& items, int w) {
  std::string s;
  double x = kLeft;
  double y = kTitleBand + 10;
  for (const LegendItem& item : items) {
    const double iw = LegendItemWidth(item.name);
    if (x + iw > w - kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
    }
    if (item.triangle) {
      s += Triangle(x + 5, y - 9, item.color, "");
    } else {
      s += "<rect x=\"" + Num(x) + "\" y=\"" + Num(y - 9) +
           "\" width=\"10\" height=\"10\" fill=\"" + XmlEscape(item.color) + "\"/>\n";
    }
    s += "<text x=\"" + Num(x + 14) + "\" y=\"" + Num(y) + "\">" + XmlEscape(item.name) + "</text>\n";
    x += iw;
  }
  return s;
}

int PlotTop(const LegendItems& items, int w) { return kTitleBand + 8 + kLegendRow * LegendRows(items, w); }

std::string Open(int w, int h) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) +
         "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " +
         std::to_string(h) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
}

}  // namespace

std::string SeriesColor(size_t i) {
  static constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                             "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

namespace {

struct DataRange {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  bool off_the_top = false;  // some point has y = +inf
};

DataRange RangeOf(const std::vector<SvgSeries>& series) {
  DataRange r;
  for (const SvgSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !(std::isfinite(y) || OffTheTop(y))) continue;
      r.x0 = std::min(r.x0, x);
      r.x1 = std::max(r.x1, x);
      if (OffTheTop(y)) {
        r.off_the_top = true;
        continue;
      }
      r.y0 = std::min(r.y0, y);
      r.y1 = std::max(r.y1, y);
    }
  }
  // Only points off the top: a frame from 0 (the threshold line, if any, widens it below).
  if (std::isfinite(r.x0) && !std::isfinite(r.y0)) {
    r.y0 = 0;
    r.y1 = 1;
  }
  return r;
}

std::string SeriesSvg(const SvgSeries& s, const Frame& f) {
  std::string pts, dots, tops;
  for (const auto& [x, y] : s.points) {
    if (!std::isfinite(x)) continue;
    if (OffTheTop(y)) {
      pts += Num(f.X(x)) + "," + Num(f.top) + " ";
      tops += Triangle(f.X(x), f.top, s.color, s.name + " at " + TickLabel(x) + ": off the chart");
      continue;
    }
    if (!std::isfinite(y)) continue;
    pts += Num(f.X(x)) + "," + Num(f.Y(y)) + " ";
    if (s.markers) dots += "<circle cx=\"" + Num(f.X(x)) + "\" cy=\"" + Num(f.Y(y)) + "\" r=\"2.5\"/>";
  }
  std::string svg;
  if (s.line && !pts.empty()) {
    svg += "<polyline fill=\"none\" stroke=\"" + XmlEscape(s.color) + "\" stroke-width=\"1.8\"" +
           (s.dashed ? " stroke-dasharray=\"5,3\"" : "") + " points=\"" + pts + "\"/>\n";
  }
  if (!dots.empty()) {
    svg += "<g fill=\"" + XmlEscape(s.color) + "\" fill-opacity=\"0.6\">" + dots + "</g>\n";
  }
  return svg + tops;
}

}  // namespace

std::string RenderChart(const SvgChart& c) {
  DataRange r = RangeOf(c.series);
  LegendItems legend;
  for (const SvgSeries& s : c.series) legend.push_back({s.name, s.color});
  if (r.off_the_top) legend.push_back({c.clip_note, "#444", true});
  const int top = PlotTop(legend, c.width);
  std::string svg = Open(c.width, c.height);
  if (!std::isfinite(r.x0)) {
    const Frame f{0, 1, 0, 1, c.width, c.height, top};
    svg += Axes(f, c.title, c.x_label, c.y_label, {}, {});
    svg += Legend(legend, c.width);
    svg += "<text x=\"" + std::to_string(c.width / 2) + "\" y=\"" + std::to_string(c.height / 2) +
           "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return svg;
  }
  double x0 = r.x0, x1 = r.x1, y0 = r.y0, y1 = r.y1;
  for (const auto& [x, label] : c.v_lines) {
    if (std::isfinite(x)) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
    }
  }
  if (c.has_h_line) y1 = std::max(y1, c.h_line * 1.1);
  if (c.y_from_zero) y0 = std::min(0.0, y0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const std::vector<double> xt = NiceTicks(x0, x1);
  const std::vector<double> yt = NiceTicks(y0, y1);
  x0 = std::min(x0, xt.front());
  x1 = std::max(x1, xt.back());
  y0 = std::min(y0, yt.front());
  y1 = std::max(y1, yt.back());
  const Frame f{x0, x1, y0, y1, c.width, c.height, top};
  svg += Axes(f, c.title, c.x_label, c.y_label, xt, yt);
  svg += Legend(legend, c.width);
  int nth = 0;
  for (const auto& [x, label] : c.v_lines) {
    if (!std::isfinite(x)) continue;
    svg += "<line class=\"event\" x1=\"" + Num(f.X(x)) + "\" x2=\"" + Num(f.X(x)) + "\" y1=\"" +
           Num(top) + "\" y2=\"" + Num(c.height - kBottom) +
           "\" stroke=\"#999\" stroke-dasharray=\"2,3\"><title>" + XmlEscape(label) +
           "</title></line>\n";
    // Staggered so that neighbouring labels overlap less.
    svg += "<text x=\"" + Num(f.X(x) + 3) + "\" y=\"" + Num(top + 11 + 11 * (nth++ % 3)) +
           "\" font-size=\"9\" fill=\"#666\">" + XmlEscape(label.substr(0, 40)) + "</text>\n";
  }
  if (c.has_h_line) {
    svg += "<line class=\"threshold\" x1=\"" + Num(kLeft) + "\" x2=\"" + Num(c.width - kRight) +
           "\" y1=\"" + Num(f.Y(c.h_line)) + "\" y2=\"" + Num(f.Y(c.h_line)) +
           "\" stroke=\"#000\" stroke-dasharray=\"6,4\"/>\n";
    svg += "<text x=\"" + Num(c.width - kRight - 4) + "\" y=\"" + Num(f.Y(c.h_line) - 4) +
           "\" text-anchor=\"end\">" + XmlEscape(c.h_line_label) + "</text>\n";
  }
  for (const SvgSeries& s : c.series) svg += SeriesSvg(s, f);
  svg += "</svg>\n";
  return svg;
}

std::string RenderStackedBars(const std::string& title, const std::string& y_label,
                              const std::vector<std::string>& layer_names,
                              const std::vector<std::string>& layer_colors,
                              const std::vector<SvgBar>& bars) {
  const int w = std::max(480, 120 + 90 * static_cast<int>(bars.size()));
  const int h = 320;
  LegendItems legend;
  for (size_t l = 0; l < layer_names.size() && l < layer_colors.size(); ++l) {
    legend.push_back({layer_names[l], layer_colors[l]});
  }
  double top_ms = 0;
  for (const SvgBar& b : bars) {
    double sum = 0;
    for (double v : b.values) sum += std::isfinite(v) ? std::max(0.0, v) : 0.0;
    top_ms = std::max(top_ms, sum);
  }
  if (!(top_ms > 0)) top_ms = 1;
  const std::vector<double> yt = NiceTicks(0, top_ms);
  const Frame f{0, 1, 0, std::max(top_ms, yt.back()), w, h, PlotTop(legend, w)};
  std::string svg = Open(w, h);
  svg += Axes(f, title, "", y_label, {}, yt);
  svg += Legend(legend, w);
  const double slot = static_cast<double>(w - kLeft - kRight) / std::max<size_t>(1, bars.size());
  for (size_t i = 0; i < bars.size(); ++i) {
    const double x = kLeft + slot * static_cast<double>(i) + slot * 0.2;
    double base = 0;
    for (size_t l = 0; l < bars[i].values.size() && l < layer_colors.size(); ++l) {
      const double v = std::isfinite(bars[i].values[l]) ? std::max(0.0, bars[i].values[l]) : 0.0;
      svg += "<rect class=\"layer\" x=\"" + Num(x) + "\" y=\"" + Num(f.Y(base + v)) +
             "\" width=\"" + Num(slot * 0.6) + "\" height=\"" + Num(f.Y(base) - f.Y(base + v)) +
             "\" fill=\"" + XmlEscape(layer_colors[l]) + "\"><title>" +
             XmlEscape(layer_names[l]) + ": " + TickLabel(v) + " ms</title></rect>\n";
      base += v;
    }
    svg += "<text x=\"" + Num(x + slot * 0.3) + "\" y=\"" + Num(h - kBottom + 16) +
           "\" text-anchor=\"middle\">" + XmlEscape(bars[i].label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace lifeline::loadgen
