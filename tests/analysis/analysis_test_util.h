// Shared by the analysis tests: simulated logs parsed back through the CSV reader, the way the
// command reads them.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/csv.h"
#include "analysis/decay.h"
#include "analysis/simulate.h"
#include "analysis/threshold.h"

namespace lifeline::analysis::testutil {

inline ThresholdInput Sessions(const std::string& spec, uint64_t seed) {
  auto s = ParseScenarioSpec(spec, "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto csv = SimulateSessions({*s}, seed);
  EXPECT_TRUE(csv.ok());
  auto t = ParseCsv(*csv, "sim.csv");
  EXPECT_TRUE(t.ok());
  ThresholdInput in;
  in.name = s->name;
  in.latency_ms = *LatencyColumn(*t, 3);
  in.outcome = *BinaryColumn(*t, 4);
  return in;
}

inline DecayInput Events(const EventSpec& e, uint64_t seed) {
  auto csv = SimulateEvents(e, seed);
  EXPECT_TRUE(csv.ok());
  auto t = ParseCsv(*csv, "events.csv");
  EXPECT_TRUE(t.ok());
  DecayInput in;
  in.latency_ms = *LatencyColumn(*t, 1);
  in.clicked = *BinaryColumn(*t, 2);
  in.converted = *BinaryColumn(*t, 3);
  return in;
}

// Fewer replicates than the command's defaults: the tests check the method, not the
// precision of a long run.
inline ThresholdOptions QuickOptions(uint64_t seed) {
  ThresholdOptions o;
  o.bootstrap = 100;
  o.null_replicates = 199;  // the least p-value, 1/200, is below the default alpha 0.01
  o.seed = seed;
  o.threads = 2;
  return o;
}

}  // namespace lifeline::analysis::testutil
