#include "base/svg_text.h"

#include <algorithm>
#include <cmath>

namespace lifeline {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  // Multiples of the step (not a running sum, which drifts).
  const double first = std::ceil(lo / step - 1e-9);
  for (int i = 0; i < 100; ++i) {
    const double t = (first + i) * step;
    if (t > hi + step * 1e-9) break;
    ticks.push_back(t);
  }
  return ticks;
}

}  // namespace lifeline
