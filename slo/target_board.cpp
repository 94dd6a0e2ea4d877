#include "slo/target_board.h"

namespace lifeline::slo {

void TargetBoard::SetTtft(const std::string& slo_class, double ttft_p95_ms) {
  std::lock_guard lock(mu_);
  ttft_ms_[slo_class] = ttft_p95_ms;
}

std::optional<double> TargetBoard::Ttft(const std::string& slo_class) const {
  std::lock_guard lock(mu_);
  auto it = ttft_ms_.find(slo_class);
  if (it == ttft_ms_.end()) return std::nullopt;
  return it->second;
}

SloClass TargetBoard::Apply(const SloClass& c) const {
  SloClass out = c;
  if (auto t = Ttft(c.name)) out.ttft_p95_ms = *t;
  return out;
}

}  // namespace lifeline::slo
