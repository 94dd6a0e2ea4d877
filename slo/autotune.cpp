#include "slo/autotune.h"

#include <algorithm>
#include <cmath>

namespace lifeline::slo {

namespace {
constexpr size_t kMaxMoves = 32;
}

Autotuner::Autotuner(const SloConfig& config, TargetBoard* board)
    : params_(config.autotune), board_(board) {
  for (const SloClass& c : config.classes) {
    ClassState st;
    st.configured_ms = c.ttft_p95_ms;
    st.current_ms = c.ttft_p95_ms.value_or(0);
    classes_[c.name] = st;
  }
}

std::optional<TargetMove> Autotuner::Observe(const CliffEstimate& e, int64_t now_unix_ms) {
  std::lock_guard lock(mu_);
  auto it = classes_.find(e.slo_class);
  if (it == classes_.end()) return std::nullopt;  // a class the config does not know
  ClassState& st = it->second;
  // The streak: significant estimates in a row, each inside the previous one's interval.
  if (!e.found) {
    st.streak = 0;
  } else if (st.last && st.last->found && e.cliff_ms >= st.last->ci_lo_ms &&
             e.cliff_ms <= st.last->ci_hi_ms) {
    ++st.streak;
  } else {
    st.streak = 1;
  }
  st.last = e;
  if (!params_.enabled || !st.configured_ms || st.streak < params_.stable_refits) return std::nullopt;
  if (st.last_move_ms && now_unix_ms - *st.last_move_ms < params_.min_interval_ms) return std::nullopt;
  const double lo = *st.configured_ms * params_.min_factor;
  const double hi = *st.configured_ms * params_.max_factor;
  const double goal = std::clamp(e.cliff_ms * (1.0 - params_.margin), lo, hi);
  const double step = params_.max_step * st.current_ms;
  const double to = std::clamp(st.current_ms + std::clamp(goal - st.current_ms, -step, step), lo, hi);
  if (std::fabs(to - st.current_ms) < 1.0) return std::nullopt;
  TargetMove m;
  m.slo_class = e.slo_class;
  m.from_ms = st.current_ms;
  m.to_ms = to;
  m.goal_ms = goal;
  m.cliff_ms = e.cliff_ms;
  m.ci_lo_ms = e.ci_lo_ms;
  m.ci_hi_ms = e.ci_hi_ms;
  m.p_value = e.p_value;
  m.samples = e.samples;
  m.stable_refits = st.streak;
  m.at_unix_ms = now_unix_ms;
  st.current_ms = to;
  st.last_move_ms = now_unix_ms;
  if (board_ != nullptr) board_->SetTtft(e.slo_class, to);
  moves_.push_back(m);
  if (moves_.size() > kMaxMoves) moves_.pop_front();
  return m;
}

nlohmann::json Autotuner::Json() const {
  using nlohmann::json;
  std::lock_guard lock(mu_);
  json targets = json::array();
  for (const auto& [name, st] : classes_) {
    if (!st.configured_ms) continue;
    targets.push_back({{"class", name},
                       {"configured_ms", *st.configured_ms},
                       {"current_ms", st.current_ms},
                       {"source", st.last_move_ms ? "autotune" : "config"},
                       {"stable_refits", st.streak}});
  }
  json moves = json::array();
  for (const TargetMove& m : moves_) {
    moves.push_back({{"class", m.slo_class},
                     {"from_ms", m.from_ms},
                     {"to_ms", m.to_ms},
                     {"goal_ms", m.goal_ms},
                     {"cliff_ms", m.cliff_ms},
                     {"ci95_ms", {m.ci_lo_ms, m.ci_hi_ms}},
                     {"p_value", m.p_value},
                     {"samples", m.samples},
                     {"stable_refits", m.stable_refits},
                     {"at_unix_ms", m.at_unix_ms}});
  }
  return {{"enabled", params_.enabled},
          {"margin", params_.margin},
          {"max_step", params_.max_step},
          {"bounds", {params_.min_factor, params_.max_factor}},
          {"stable_refits", params_.stable_refits},
          {"min_interval_ms", params_.min_interval_ms},
          {"targets", std::move(targets)},
          {"moves", std::move(moves)}};
}

}  // namespace lifeline::slo
