// Synthetic logs with known ground truth, for tests and for trying the analysis commands.
//
// Sessions (threshold discovery): per scenario, latencies are log-normal (median, sigma);
// a session is abandoned with probability
//   p(t) = logistic(logit(r(t)) + slope_per_s * (t - knee) / 1000 + u_user),
//   r(t) = rate_below for t < knee, rate_above for t >= knee (no knee: rate_below everywhere),
// where u_user ~ Normal(0, user_sd) is a per-user effect (users share it across sessions) and
// the logged latency is t + Normal(0, jitter_ms) clamped at 0 (measurement noise that blurs
// the knee as real client/server clock differences do).
//
// Events (decay fits): latencies log-normal; clicked ~ Bernoulli(c0 exp(-a t)); converted
// (only after a click) ~ Bernoulli(v0 exp(-b t - g t^2)); rates are per millisecond.
//
// Ownership: value types; the writers return the CSV text. Thread-safety: pure functions.
// Failure: InvalidArgument naming the bad field of a spec ("--scenario 'x': above = 1.5 is
// outside [0, 1]").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lifeline::analysis {

inline constexpr int64_t kMaxSimulatedRows = 10'000'000;

struct SessionScenarioSpec {
  std::string name = "search";
  int64_t rows = 30000;
  std::optional<double> knee_ms = 387;  // nullopt: no break
  double rate_below = 0.10;
  double rate_above = 0.163;            // +63 %
  double slope_per_s = 0;               // logit change per second of latency, both sides
  double median_ms = 300;
  double sigma = 0.5;                   // log-normal shape
  double jitter_ms = 0;
  int64_t users = 0;                    // 0: every session its own user
  double user_sd = 0;
};

struct EventSpec {
  int64_t rows = 50000;
  double c0 = 0.30, a = 0.0008;            // CTR(t) = c0 exp(-a t)
  double v0 = 0.12, b = 0.0005, g = 2e-7;  // CVR(t) = v0 exp(-b t - g t^2), given a click
  double median_ms = 400;
  double sigma = 0.6;
};

// "name=search,knee=387,below=0.1,above=0.163,slope=0,median=300,sigma=0.5,rows=30000,
//  jitter=0,users=0,user_sd=0"; knee=none for no break. Keys not given keep the defaults.
Result<SessionScenarioSpec> ParseScenarioSpec(std::string_view text, std::string_view flag);
Status ValidateEventSpec(const EventSpec& e);

// CSV with header session_id,user_id,scenario,latency_ms,abandoned.
Result<std::string> SimulateSessions(const std::vector<SessionScenarioSpec>& specs,
                                     uint64_t seed);
// CSV with header event_id,latency_ms,clicked,converted.
Result<std::string> SimulateEvents(const EventSpec& spec, uint64_t seed);

nlohmann::json SessionTruthJson(const std::vector<SessionScenarioSpec>& specs, uint64_t seed);
nlohmann::json EventTruthJson(const EventSpec& spec, uint64_t seed);

}  // namespace lifeline::analysis
