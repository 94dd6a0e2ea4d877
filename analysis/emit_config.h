// The `serve --config` TOML that a threshold analysis implies: one [classes.NAME] table per
// scenario with a threshold, its P95 target set below the threshold by a margin
// (TargetForThreshold: the lower of the interval's low end and threshold x (1 - margin)).
// Scenarios without a threshold get a comment, not a class. The file adds or overrides
// classes only; presets, roles and every other section keep their defaults.
//
// Ownership: returns text. Thread-safety: pure functions. Failure: none.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/threshold.h"

namespace lifeline::analysis {

// A class name from a scenario name: lower case, characters outside [a-z0-9_-] become '-',
// at most 64 characters, "scenario" when nothing is left.
std::string ClassNameFor(std::string_view scenario);

// metric: "ttft" (ttft_p95_ms) or "e2e" (e2e_p95_ms).
std::string EmitSloToml(const std::vector<ThresholdResult>& results, double margin,
                        std::string_view metric, std::string_view source);

}  // namespace lifeline::analysis
