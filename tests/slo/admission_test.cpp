// Admission decisions on hand-computed estimates.
#include "slo/admission.h"

#include <cmath>

#include <gtest/gtest.h>

namespace lifeline::slo {
namespace {

RequestSloFields Fields(std::string slo_class, std::string user_role = "",
                        std::optional<double> deadline_ms = std::nullopt,
                        bool allow_context_trim = false) {
  RequestSloFields f;
  f.slo_class = std::move(slo_class);
  f.user_role = std::move(user_role);
  f.deadline_ms = deadline_ms;
  f.allow_context_trim = allow_context_trim;
  return f;
}

TEST(SpeedEstimatorTest, EwmaSeededByFirstObservation) {
  SpeedEstimator s(0.5);
  EXPECT_FALSE(s.prefill_tokens_per_s().has_value());
  EXPECT_FALSE(s.decode_ms_per_token().has_value());
  s.ObservePrefill(1000, 500);   // 2000 tokens/s seeds the average
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s(), 2000);
  s.ObservePrefill(1000, 1000);  // 1000 tokens/s: 0.5 x 1000 + 0.5 x 2000
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s(), 1500);
  s.ObservePrefill(0, 100);      // ignored
  s.ObservePrefill(100, 0);
  s.ObservePrefill(100, std::nan(""));
  EXPECT_DOUBLE_EQ(*s.prefill_tokens_per_s(), 1500);
  s.ObserveDecode(20);
  s.ObserveDecode(10);
  s.ObserveDecode(-1);
  EXPECT_DOUBLE_EQ(*s.decode_ms_per_token(), 15);
}

TEST(PredictTest, QueueAheadPlusOwnPromptAtMeasuredSpeed) {
  SpeedEstimator s;
  EXPECT_FALSE(Predict(s, 100, 100, 10, 0).ttft_ms.has_value());
  s.ObservePrefill(2000, 1000);  // 2000 tokens/s
  Prediction p = Predict(s, 3000, 1000, 101, 10);
  // 10 ms spent + (3000 + 1000) tokens / 2000 tokens/s = 2010 ms; no decode speed yet.
  EXPECT_DOUBLE_EQ(*p.ttft_ms, 2010);
  EXPECT_FALSE(p.e2e_ms.has_value());
  s.ObserveDecode(15);
  p = Predict(s, 3000, 1000, 101, 10);
  EXPECT_DOUBLE_EQ(*p.e2e_ms, 2010 + 100 * 15);  // 100 tokens after the first
}

class DecideTest : public ::testing::Test {
 protected:
  DecideTest() : config_(DefaultSloConfig()) {
    speeds_.ObservePrefill(10000, 1000);  // 10000 tokens/s
    speeds_.ObserveDecode(10);            // 10 ms per token
  }
  AdmissionRequest Req(RequestSloFields f = {}) {
    AdmissionRequest r;
    auto b = Resolve(config_, f);
    EXPECT_TRUE(b.ok());
    r.budget = *b;
    r.prompt_tokens = 500;
    r.max_tokens = 500;
    r.elapsed_ms = 20;
    r.load.queued_requests = 3;
    r.load.queued_prefill_tokens = 2000;
    return r;
  }
  SloConfig config_;
  SpeedEstimator speeds_;
};

TEST_F(DecideTest, AdmitsWhenThePredictionFits) {
  const AdmissionDecision d = Decide(config_, Req(), speeds_);
  // 20 + (2000 + 500) / 10000 s = 270 ms <= interactive's 387 ms.
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 270);
  EXPECT_DOUBLE_EQ(*d.predicted.e2e_ms, 270 + 499 * 10);
  EXPECT_FALSE(d.max_tokens_cap.has_value());
  EXPECT_FALSE(d.stop_at_deadline);
  EXPECT_FALSE(d.trim_context);
  EXPECT_EQ(d.reason, "predicted ttft 270.0 ms within budget 387.0 ms");
}

TEST_F(DecideTest, PredictedMissRoutesOrShedsWithRetryAfter) {
  AdmissionRequest r = Req();
  r.load.queued_prefill_tokens = 10000;  // 20 + 10500 / 10 = 1070 ms > 387
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.http_status, 429);
  EXPECT_EQ(d.retry_after_s, 1);  // 683 ms late -> 1 s
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 1070);
  EXPECT_EQ(d.reason,
            "predicted ttft 1070.0 ms > budget 387.0 ms (10000 prefill tokens ahead at 10000 tokens/s)");
  r.has_next_model = true;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  EXPECT_EQ(d.http_status, 0);

  r.has_next_model = false;
  r.load.queued_prefill_tokens = 50000;  // 20 + 5050 = 5070 ms: 4683 ms late -> 5 s
  EXPECT_EQ(Decide(config_, r, speeds_).retry_after_s, 5);
  r.load.queued_prefill_tokens = 1'000'000;  // 100070 ms: clamped to max_retry_after_s
  EXPECT_EQ(Decide(config_, r, speeds_).retry_after_s, 60);
  // A doctor's tighter budget: 387 x 0.8 = 309.6 ms against 270 ms still fits; 0.6 would not.
  AdmissionRequest doc = Req(Fields("", "doctor"));
  EXPECT_EQ(Decide(config_, doc, speeds_).action, Action::kAdmit);
  config_.roles.emplace_back("intern", 0.6);  // 232.2 ms < 270 ms
  EXPECT_EQ(Decide(config_, Req(Fields("", "intern")), speeds_).action, Action::kShed);
}

TEST_F(DecideTest, LadderLevels) {
  AdmissionRequest r = Req();
  r.level = Level::kShed;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.http_status, 429);
  EXPECT_EQ(d.retry_after_s, 5);  // ladder.min_dwell_ms 5000
  EXPECT_EQ(d.reason, "class interactive at degradation level shed");

  r.level = Level::kCascade;
  r.has_next_model = true;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  // On the next member (one hop done) it is admitted with the lower levels' measures:
  // a TTFT-only class gets the ladder's token cap (256 < 500).
  r.cascade_hops = 1;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_EQ(d.max_tokens_cap.value_or(-1), 256);
  EXPECT_FALSE(d.stop_at_deadline);
  EXPECT_FALSE(d.trim_context);  // the request did not allow trimming
  // Cascade level with nothing lighter: admitted in place.
  r.cascade_hops = 0;
  r.has_next_model = false;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kAdmit);
}

TEST_F(DecideTest, TruncationFitsTheDeadlineAtMeasuredDecodeSpeed) {
  AdmissionRequest r = Req(Fields("chat", "", 1000));
  r.level = Level::kTruncate;
  AdmissionDecision d = Decide(config_, r, speeds_);
  ASSERT_EQ(d.action, Action::kAdmit);
  // 270 ms to the first token, 730 ms left at 10 ms/token: 1 + 73 = 74 tokens.
  EXPECT_EQ(d.max_tokens_cap.value_or(-1), 74);
  EXPECT_TRUE(d.stop_at_deadline);
  r.max_tokens = 50;  // fits already: no cap, still stops at the deadline
  d = Decide(config_, r, speeds_);
  EXPECT_FALSE(d.max_tokens_cap.has_value());
  EXPECT_TRUE(d.stop_at_deadline);
  // Level 0: nothing is truncated even if it will not fit.
  r.level = Level::kNormal;
  r.max_tokens = 500;
  d = Decide(config_, r, speeds_);
  EXPECT_FALSE(d.max_tokens_cap.has_value());
  EXPECT_FALSE(d.stop_at_deadline);
}

TEST_F(DecideTest, TrimOnlyFromLevelTwoAndWhenAllowed) {
  AdmissionRequest r = Req(Fields("", "", std::nullopt, true));
  r.level = Level::kTruncate;
  EXPECT_FALSE(Decide(config_, r, speeds_).trim_context);
  r.level = Level::kTrimContext;
  EXPECT_TRUE(Decide(config_, r, speeds_).trim_context);
  r.budget.allow_context_trim = false;
  EXPECT_FALSE(Decide(config_, r, speeds_).trim_context);
}

TEST_F(DecideTest, BoundedQueue) {
  AdmissionRequest r = Req();
  r.load.queued_requests = 256;  // a 257th does not fit max_queue_requests 256
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.http_status, 429);
  EXPECT_EQ(d.retry_after_s, 1);  // 2000 tokens drain in 0.2 s -> at least 1
  EXPECT_EQ(d.reason, "queue full: 256 requests, 2000 prompt tokens queued (limits 256, 1048576)");
  r.load.queued_prefill_tokens = 300'000;  // drains in 30 s
  EXPECT_EQ(Decide(config_, r, speeds_).retry_after_s, 30);
  r.has_next_model = true;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kRoute);

  AdmissionRequest t = Req();
  t.max_queue_tokens = 2400;  // 2000 queued + 500 prompt > 2400
  EXPECT_EQ(Decide(config_, t, speeds_).action, Action::kShed);
  t.max_queue_tokens = 2500;  // exactly fits
  EXPECT_EQ(Decide(config_, t, speeds_).action, Action::kAdmit);
}

TEST_F(DecideTest, NotReadyIs503OrRoute) {
  AdmissionRequest r = Req();
  r.model_ready = false;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.http_status, 503);
  EXPECT_EQ(d.retry_after_s, 1);
  r.has_next_model = true;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kRoute);
}

TEST_F(DecideTest, NoMeasurementsOrPredictionOffAdmits) {
  AdmissionRequest r = Req();
  r.load.queued_prefill_tokens = 1'000'000;
  const SpeedEstimator cold;
  AdmissionDecision d = Decide(config_, r, cold);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_EQ(d.reason, "no speed measurements yet");
  config_.admission.predictive = false;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_GT(*d.predicted.ttft_ms, 387);  // predicted, but not acted on
}

TEST(OutcomeCountersTest, CountsByClassModelOutcome) {
  OutcomeCounters c;
  AdmissionDecision admit;
  AdmissionDecision shed;
  shed.action = Action::kShed;
  shed.http_status = 429;
  AdmissionDecision down = shed;
  down.http_status = 503;
  AdmissionDecision route;
  route.action = Action::kRoute;
  EXPECT_EQ(OutcomeCounters::OutcomeOf(admit), "admitted");
  EXPECT_EQ(OutcomeCounters::OutcomeOf(shed), "shed_429");
  EXPECT_EQ(OutcomeCounters::OutcomeOf(down), "shed_503");
  EXPECT_EQ(OutcomeCounters::OutcomeOf(route), "routed");
  c.Count("chat", "m", "admitted");
  c.Count("chat", "m", "admitted");
  c.Count("chat", "m", "shed_429");
  c.Count("asr", "m", "admitted");
  const auto s = c.Snapshot();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].slo_class, "asr");
  EXPECT_EQ(s[1].outcome, "admitted");
  EXPECT_EQ(s[1].count, 2u);
  EXPECT_EQ(s[2].outcome, "shed_429");
  EXPECT_EQ(ActionName(Action::kRoute), "route");
}

}  // namespace
}  // namespace lifeline::slo
