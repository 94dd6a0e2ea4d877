// SVG plots of the analysis results: binned rates with 95 % confidence bars (Wilson), the
// fitted curves, and for thresholds the breakpoint with its bootstrap interval as a band.
// Each plot is one self-contained <svg> element (no scripts, fonts or external references),
// so it can be written to a file or inlined in the bench HTML report.
//
// Ownership: pure builders returning strings. Thread-safety: no shared state. Failure: none;
// non-finite points are dropped and empty data draws an empty frame.
#pragma once

#include <string>
#include <vector>

#include "analysis/decay.h"
#include "analysis/impact.h"
#include "analysis/threshold.h"

namespace lifeline::analysis {

struct PlotPoint {
  double x = 0, y = 0;
  double lo = 0, hi = 0;  // error bar; lo == hi == y draws none
};

struct PlotSeries {
  std::string name;
  std::string color;
  std::vector<PlotPoint> points;
  bool line = true;      // polyline through the points
  bool markers = false;  // dots with error bars
  bool dashed = false;
};

struct PlotMarker {     // vertical line at x with an optional shaded band [lo, hi]
  double x = 0, lo = 0, hi = 0;
  bool band = false;
  std::string label;
  std::string color = "#d62728";
};

struct PlotSpec {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
  std::vector<PlotMarker> markers;
  int width = 900, height = 340;
};

std::string RenderPlot(const PlotSpec& spec);

// Wilson score interval for k successes in n trials at 95 %.
void Wilson95(double k, double n, double* lo, double* hi);

// One chart per scenario (stacked in one <svg>): abandonment rate in equal-count latency bins,
// the breakpoint model and the no-break trend, the threshold and its interval.
std::string ThresholdPlot(const std::vector<ThresholdInput>& inputs,
                          const std::vector<ThresholdResult>& results);

// Binned CTR, CVR and joint rates with the fitted curves (joint model and independent
// exponentials), one chart each, stacked.
std::string DecayPlot(const DecayResult& r);

// The curves behind an impact estimate (CTR, joint conversion, abandonment) against latency,
// with each configuration's P95 latency marked.
std::string ImpactPlot(const ImpactModels& m, const ImpactReport& r);

// Several charts stacked vertically in one <svg>.
std::string StackSvgs(const std::vector<std::string>& svgs, const std::vector<int>& heights,
                      int width);

}  // namespace lifeline::analysis
