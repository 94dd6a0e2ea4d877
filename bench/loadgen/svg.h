// Inline SVG charts for report.html: line/scatter charts with optional threshold and event
// lines, and stacked bars. Text is XML-escaped; the output needs no scripts or fonts.
//
// A point whose y is +infinity (an infinite P95, a failed request) is off the chart above: it
// is drawn on the top edge of the plot as an upward triangle, lines run up to it, and the
// chart's `clip_note` joins the legend, so such a point is shown rather than left out.
//
// Ownership: pure builders returning strings. Thread-safety: no shared state. Failure: none;
// empty data renders an empty frame with a "no data" note; other non-finite points (NaN, a
// non-finite x, -inf) are dropped.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/svg_text.h"

namespace lifeline::loadgen {

struct SvgSeries {
  std::string name;
  std::string color;  // CSS color
  std::vector<std::pair<double, double>> points;
  bool line = true;     // polyline through the points (in the given order)
  bool markers = false; // a dot at each point
  bool dashed = false;  // a dashed line (a derived series beside its plain one)
};

struct SvgChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<SvgSeries> series;
  bool has_h_line = false;  // e.g. the SLO threshold
  double h_line = 0;
  std::string h_line_label;
  std::vector<std::pair<double, std::string>> v_lines;  // e.g. degradation events
  // Legend text for the triangles of points at y = +inf, shown when there is one, e.g.
  // "off the chart: P95 infinite or stopped early".
  std::string clip_note = "off the chart (infinite)";
  bool y_from_zero = true;
  int width = 720;
  int height = 320;
};

std::string RenderChart(const SvgChart& chart);

struct SvgBar {
  std::string label;
  std::vector<double> values;  // one per layer, stacked bottom-up
};

std::string RenderStackedBars(const std::string& title, const std::string& y_label,
                              const std::vector<std::string>& layer_names,
                              const std::vector<std::string>& layer_colors,
                              const std::vector<SvgBar>& bars);

// XmlEscape and NiceTicks: base/svg_text.h (shared with analysis/plot).
using ::lifeline::NiceTicks;
using ::lifeline::XmlEscape;

// The palette colour for series i.
std::string SeriesColor(size_t i);

}  // namespace lifeline::loadgen
