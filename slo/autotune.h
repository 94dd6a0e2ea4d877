// Guarded tuning ([autotune], off by default): a class's TTFT P95 target follows the cliff
// the server learns from its own traffic (economics/live_economics.h), slowly and only on
// evidence (docs/economics.md "Guarded tuning").
//
// Each refit's estimate for a class goes to Observe. A move needs, all of:
//   - a significant cliff (found: p < alpha) in each of the last `stable_refits` refits, each
//     cliff inside the interval of the refit before it (a stable estimate, not a wandering one);
//   - `min_interval_ms` since the class's last move (the first move any time);
//   - a configured TTFT target (a class targeting only e2e or TTFA is left alone).
// The goal is cliff x (1 - margin), clamped to [min_factor, max_factor] x the configured
// target; one move goes toward it by at most `max_step` x the current target, and a move under
// 1 ms is none. A move sets the TargetBoard and is recorded as an event with its evidence.
//
// Ownership: values; borrows the board (which outlives it). Thread-safety: one mutex; every
// method from any thread. Time comes from the caller. Failure: none.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slo/slo_config.h"
#include "slo/target_board.h"

namespace lifeline::slo {

struct CliffEstimate {
  std::string slo_class;
  bool found = false;
  double cliff_ms = 0, ci_lo_ms = 0, ci_hi_ms = 0;
  double p_value = 1;
  int64_t samples = 0;
};

struct TargetMove {
  std::string slo_class;
  double from_ms = 0, to_ms = 0, goal_ms = 0;
  double cliff_ms = 0, ci_lo_ms = 0, ci_hi_ms = 0, p_value = 1;
  int64_t samples = 0;
  int32_t stable_refits = 0;
  int64_t at_unix_ms = 0;
};

class Autotuner {
 public:
  // `config`: the classes' configured targets and [autotune]; `board` receives the moves.
  Autotuner(const SloConfig& config, TargetBoard* board);

  // One refit's estimate for one class; the move made, if any.
  std::optional<TargetMove> Observe(const CliffEstimate& estimate, int64_t now_unix_ms);

  // {"enabled", "margin", ..., "targets": [{"class", "configured_ms", "current_ms",
  //  "source", "stable_refits"}], "moves": [the last 32 moves, newest last]}
  nlohmann::json Json() const;

 private:
  struct ClassState {
    std::optional<double> configured_ms;
    double current_ms = 0;
    std::optional<CliffEstimate> last;
    int32_t streak = 0;
    std::optional<int64_t> last_move_ms;
  };

  const AutotuneParams params_;
  TargetBoard* const board_;
  mutable std::mutex mu_;
  std::map<std::string, ClassState> classes_;
  std::deque<TargetMove> moves_;
};

}  // namespace lifeline::slo
