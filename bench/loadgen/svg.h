// Inline SVG charts for report.html: line/scatter charts with optional threshold and event
// lines, and stacked bars. Text is XML-escaped; the output needs no scripts or fonts.
//
// Ownership: pure builders returning strings. Thread-safety: no shared state. Failure: none;
// empty data renders an empty frame with a "no data" note, non-finite points are dropped.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lifeline::loadgen {

struct SvgSeries {
  std::string name;
  std::string color;  // CSS color
  std::vector<std::pair<double, double>> points;
  bool line = true;     // polyline through the points (in the given order)
  bool markers = false; // a dot at each point
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

std::string XmlEscape(const std::string& s);

// "Nice" axis ticks covering [lo, hi] (about `target` of them, steps of 1, 2 or 5 x 10^k).
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

// The palette colour for series i.
std::string SeriesColor(size_t i);

}  // namespace lifeline::loadgen
