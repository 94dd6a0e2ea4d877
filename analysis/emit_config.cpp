#include "analysis/emit_config.h"

#include <cstdio>
#include <set>

namespace lifeline::analysis {

std::string ClassNameFor(std::string_view scenario) {
  std::string out;
  for (char c : scenario) {
    const char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    const bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_' || l == '-';
    out += ok ? l : '-';
    if (out.size() == 64) break;
  }
  return out.empty() ? "scenario" : out;
}

namespace {

// Scenario names come from the CSV (a quoted cell may hold a line break): a comment must stay
// one line, and short enough for the 512-byte line buffers below.
std::string CommentSafe(const std::string& s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out.size() > 100 ? out.substr(0, 100) + "..." : out;  // fits the line buffers
}

}  // namespace

std::string EmitSloToml(const std::vector<ThresholdResult>& results, double margin,
                        std::string_view metric, std::string_view source) {
  const std::string key = metric == "e2e" ? "e2e_p95_ms" : "ttft_p95_ms";
  char buf[512];
  std::string o = "# SLO classes from `lifeline analyze threshold` on " +
                  CommentSafe(std::string(source)) + ".\n";
  std::snprintf(buf, sizeof buf,
                "# Each class's %s = min(95 %% interval low end, threshold x %.2f), whole ms:\n"
                "# the P95 stays below where the abandonment cliff may start.\n"
                "# Load with: lifeline serve --config FILE (docs/slo.md, docs/analysis.md).\n",
                key.c_str(), 1 - margin);
  o += buf;
  std::set<std::string> used;
  for (const ThresholdResult& r : results) {
    o += "\n";
    if (!r.found) {
      std::snprintf(buf, sizeof buf, "# scenario '%s': no threshold (p = %.3g), no class written\n",
                    CommentSafe(r.name).c_str(), r.p_value);
      o += buf;
      continue;
    }
    std::string name = ClassNameFor(r.name);
    for (int i = 2; used.count(name) != 0; ++i) {
      name = ClassNameFor(r.name).substr(0, 58) + "-" + std::to_string(i);
    }
    used.insert(name);
    std::snprintf(buf, sizeof buf,
                  "# scenario '%s': threshold %.1f ms (95 %% interval %.1f-%.1f), abandonment "
                  "%.4f below, %.4f above, p = %.3g, n = %lld\n",
                  CommentSafe(r.name).c_str(), r.threshold_ms, r.ci_lo_ms, r.ci_hi_ms, r.rate_below,
                  r.rate_above, r.p_value, static_cast<long long>(r.n));
    o += buf;
    o += "[classes." + name + "]\n";
    std::snprintf(buf, sizeof buf, "%s = %.0f\n", key.c_str(), TargetForThreshold(r, margin));
    o += buf;
  }
  return o;
}

}  // namespace lifeline::analysis
