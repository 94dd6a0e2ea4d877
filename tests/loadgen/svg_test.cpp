// The SVG charts' handling of points off the chart: a y of +infinity (an infinite P95, a
// failed request) is drawn on the top edge with a triangle and a legend note, never dropped.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "bench/loadgen/svg.h"

namespace lifeline::loadgen {
namespace {

int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

SvgChart P95Chart() {
  SvgChart c;
  c.title = "P95 vs load";
  c.has_h_line = true;
  c.h_line = 387;
  c.clip_note = "off the chart: stopped early";
  c.series.push_back({"fast", "#111111", {{1, 100}, {2, 200}}, true, true});
  c.series.push_back({"cliff", "#222222", {{1, 300}, {2, INFINITY}}, true, true});
  return c;
}

TEST(SvgClip, InfinitePointIsDrawnOnTheTopEdgeWithALegendNote) {
  const std::string svg = RenderChart(P95Chart());
  // One triangle at the point and one in the legend beside the note.
  EXPECT_EQ(Count(svg, "class=\"clipped\""), 2) << svg;
  EXPECT_NE(svg.find("off the chart: stopped early"), std::string::npos);
  EXPECT_NE(svg.find("cliff at 2: off the chart"), std::string::npos);  // the point's tooltip
  // The line of the failing series runs to the top edge instead of stopping at load 1.
  EXPECT_EQ(Count(svg, "<polyline"), 2);
}

TEST(SvgClip, NoNoteWithoutInfinitePoints) {
  SvgChart c = P95Chart();
  c.series[1].points[1].second = 500;
  const std::string svg = RenderChart(c);
  EXPECT_EQ(Count(svg, "class=\"clipped\""), 0);
  EXPECT_EQ(svg.find("off the chart"), std::string::npos);
}

TEST(SvgClip, OnlyInfinitePointsStillDrawAFrame) {
  // A target that failed at its only load: no finite value at all, yet it must be visible.
  SvgChart c;
  c.has_h_line = true;
  c.h_line = 387;
  c.series.push_back({"cliff", "#222222", {{1, INFINITY}}, true, true});
  const std::string svg = RenderChart(c);
  EXPECT_EQ(svg.find("no data"), std::string::npos) << svg;
  EXPECT_EQ(Count(svg, "class=\"clipped\""), 2);
  EXPECT_NE(svg.find(">cliff<"), std::string::npos);  // in the legend
}

TEST(SvgClip, NaNAndMinusInfinityAreStillDropped) {
  SvgChart c;
  c.series.push_back({"s", "#222222", {{1, 10}, {2, NAN}, {3, -INFINITY}}, true, true});
  const std::string svg = RenderChart(c);
  EXPECT_EQ(Count(svg, "class=\"clipped\""), 0);
  EXPECT_EQ(Count(svg, "<circle"), 1);
}

TEST(SvgClip, LegendListsEverySeriesEvenWithoutData) {
  SvgChart c;
  c.series.push_back({"empty target", "#222222", {}, true, false});
  const std::string svg = RenderChart(c);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_NE(svg.find(">empty target<"), std::string::npos);
}

TEST(SvgClip, DashedSeries) {
  SvgChart c;
  SvgSeries s{"smooth", "#222222", {{1, 1}, {2, 2}}, true, false};
  s.dashed = true;
  c.series.push_back(s);
  EXPECT_NE(RenderChart(c).find("stroke-dasharray=\"5,3\""), std::string::npos);
}

}  // namespace
}  // namespace lifeline::loadgen
