// libFuzzer harness for the SLO configuration (slo/slo_config.h, `serve --config`): TOML text
// through ParseSloConfig, and each class, role and a few deadlines through Resolve. Built by
// -DLIFELINE_FUZZ=ON and, over its committed corpus, by the default test run
// (Fuzz.slo_config.Corpus).
//
// Invariants (abort when violated): a refusal names the source ("fuzz.toml"); an accepted
// config keeps the documented rules (classes sorted and named, a TTFT or e2e target each,
// max_level in 0..4, recover_ratio below enter_ratio, windows and ticks positive, the batch
// floor within the cap), and every budget Resolve returns is positive and finite.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "slo/slo_config.h"

namespace {

using namespace lifeline::slo;

using lifeline::fuzz::Check;

void CheckBudget(const lifeline::Result<RequestBudget>& b) {
  if (!b.ok()) {
    Check(!b.status().message().empty(), "a Resolve refusal without a message");
    return;
  }
  Check(std::isfinite(b->ttft_budget_ms) && b->ttft_budget_ms > 0, "a bad TTFT budget");
  if (b->e2e_budget_ms) {
    Check(std::isfinite(*b->e2e_budget_ms) && *b->e2e_budget_ms > 0, "a bad e2e budget");
    Check(b->ttft_budget_ms <= *b->e2e_budget_ms, "TTFT budget past the e2e budget");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = ParseSloConfig(text, "fuzz.toml");
  if (!c.ok()) {
    Check(c.status().message().find("fuzz.toml") != std::string::npos,
          "a refusal that does not name the source");
    return 0;
  }
  const SloConfig& cfg = *c;
  Check(!cfg.classes.empty(), "no classes");
  Check(cfg.FindClass(cfg.default_class) != nullptr, "the default class is not a class");
  for (size_t i = 0; i < cfg.classes.size(); ++i) {
    const SloClass& k = cfg.classes[i];
    Check(!k.name.empty() && k.name.size() <= 64, "a class name out of bounds");
    Check(i == 0 || cfg.classes[i - 1].name < k.name, "classes not sorted or repeated");
    Check(k.ttft_p95_ms || k.e2e_p95_ms, "a class without a TTFT or e2e target");
    Check(k.max_level >= 0 && k.max_level <= 4, "max_level out of 0..4");
  }
  Check(cfg.ladder.recover_ratio < cfg.ladder.enter_ratio, "no hysteresis");
  Check(cfg.controller.tick_ms > 0 && cfg.window.n_buckets > 0 && cfg.window.bucket_us > 0, "a non-positive tick or window");
  Check(cfg.batching.floor >= 1 && cfg.batching.floor <= cfg.batching.cap, "batch floor/cap");
  for (const SloClass& k : cfg.classes) {
    RequestSloFields f;
    f.slo_class = k.name;
    CheckBudget(Resolve(cfg, f));
    for (const auto& [role, mult] : cfg.roles) {
      Check(std::isfinite(mult) && mult > 0, "a bad role multiplier");
      f.user_role = role;
      CheckBudget(Resolve(cfg, f));
    }
    f.user_role.clear();
    for (double d : {0.5, 1.0, 3'600'000.0, 3'600'001.0, -1.0}) {
      f.deadline_ms = d;
      CheckBudget(Resolve(cfg, f));
    }
  }
  for (const ModelEntry& m : cfg.models) (void)cfg.NextInCascade(m.name);
  return 0;
}
