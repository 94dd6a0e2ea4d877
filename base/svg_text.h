// What both SVG writers share (bench/loadgen/svg: the bench report's charts; analysis/plot: the
// fits' plots), which do not depend on each other: XML escaping of text and attribute values,
// and "nice" axis tick values.
//
// Thread-safety: pure. Failure: none.
#pragma once

#include <string>
#include <vector>

namespace lifeline {

// &, <, >, " and ' as entities: safe in element text and in double- or single-quoted attributes.
std::string XmlEscape(const std::string& s);

// Axis ticks covering [lo, hi]: about `target` of them, at multiples of a step of 1, 2 or 5 x
// 10^k (computed as multiples, so they do not drift). An empty range is widened to [lo, lo + 1].
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

}  // namespace lifeline
