// The emitted TOML goes through the real `serve --config` parser (slo::ParseSloConfig).
#include "analysis/emit_config.h"

#include <gtest/gtest.h>

#include "slo/slo_config.h"

namespace lifeline::analysis {
namespace {

ThresholdResult Found(std::string name, double thr, double lo, double hi) {
  ThresholdResult r;
  r.name = std::move(name);
  r.found = true;
  r.threshold_ms = thr;
  r.ci_lo_ms = lo;
  r.ci_hi_ms = hi;
  r.rate_below = 0.1;
  r.rate_above = 0.163;
  r.p_value = 0.003;
  r.n = 20000;
  return r;
}

TEST(AnalysisEmitConfig, ServeConfigParserAcceptsTheClasses) {
  ThresholdResult none;
  none.name = "reports";
  none.p_value = 0.4;
  const std::vector<ThresholdResult> rs = {
      Found("E-commerce Search", 387, 380, 395),        // 387 x 0.9 = 348.3 < 380: 348
      Found("chat", 300, 240, 320),                     // preset name: CI low end 240 wins
      Found("line\n[classes.evil]\nttft_p95_ms = 1", 500, 490, 510), none};
  const std::string toml = EmitSloToml(rs, 0.10, "ttft", "sessions.csv");
  auto c = slo::ParseSloConfig(toml, "emitted.toml");
  ASSERT_TRUE(c.ok()) << c.status().message() << "\n" << toml;
  const slo::SloClass* search = c->FindClass("e-commerce-search");
  ASSERT_NE(search, nullptr) << toml;
  EXPECT_EQ(search->ttft_p95_ms.value_or(-1), 348);
  const slo::SloClass* chat = c->FindClass("chat");
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->ttft_p95_ms.value_or(-1), 240);
  EXPECT_EQ(c->FindClass("evil"), nullptr);        // a name cannot inject a table
  EXPECT_NE(c->FindClass("line--classes-evil--ttft_p95_ms---1"), nullptr) << toml;
  EXPECT_EQ(c->FindClass("reports"), nullptr);     // no threshold: no class
  EXPECT_NE(toml.find("# scenario 'reports': no threshold"), std::string::npos);
  EXPECT_NE(c->FindClass("interactive"), nullptr);  // presets kept
}

TEST(AnalysisEmitConfig, EndToEndMetricAndMargin) {
  const std::string toml = EmitSloToml({Found("api", 200, 195, 205)}, 0.0, "e2e", "x.csv");
  auto c = slo::ParseSloConfig(toml, "emitted.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const slo::SloClass* api = c->FindClass("api");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->e2e_p95_ms.value_or(-1), 195);  // margin 0: the interval's low end
  EXPECT_FALSE(api->ttft_p95_ms.has_value());
}

TEST(AnalysisEmitConfig, ClassNames) {
  EXPECT_EQ(ClassNameFor("Code Completion"), "code-completion");
  EXPECT_EQ(ClassNameFor(""), "scenario");
  EXPECT_EQ(ClassNameFor(std::string(100, 'a')).size(), 64u);
}

}  // namespace
}  // namespace lifeline::analysis
