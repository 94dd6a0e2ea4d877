// The class targets in force: the configured ones, unless the autotuner (slo/autotune.h)
// moved a class's TTFT P95 target. SloConfig stays immutable after start; every reader that
// compares against a TTFT target or derives a budget from it (the controller's pressure,
// Resolve's budgets, /v1/slo, the attainment counters) asks the board for the class as it
// stands now (Apply). Empty -- the configured targets -- unless [autotune] is enabled.
//
// Ownership: values under one mutex. Thread-safety: every method from any thread. Failure:
// none.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "slo/slo_config.h"

namespace lifeline::slo {

class TargetBoard {
 public:
  // The class's TTFT P95 target from now on (autotune's move).
  void SetTtft(const std::string& slo_class, double ttft_p95_ms);
  // The moved target, if the class's was moved.
  std::optional<double> Ttft(const std::string& slo_class) const;
  // `c` with the targets in force.
  SloClass Apply(const SloClass& c) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, double, std::less<>> ttft_ms_;
};

// Where the class's TTFT target came from: "autotune" when the board moved it, else "config".
inline const char* TtftTargetSource(const TargetBoard* board, const std::string& slo_class) {
  return board != nullptr && board->Ttft(slo_class) ? "autotune" : "config";
}

}  // namespace lifeline::slo
