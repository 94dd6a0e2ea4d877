// Admission decisions on hand-computed estimates.
#include "slo/admission.h"

#include <algorithm>
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

// Two step sizes on the line ms = tokens x 1000 / tokens_per_s (no fixed cost), so the
// hand-computed values below need no intercept.
void SeedLine(SpeedEstimator& s, double tokens_per_s, int64_t now_us = 0) {
  s.ObservePrefill(2000, 2000 * 1000.0 / tokens_per_s, now_us);
  s.ObservePrefill(500, 500 * 1000.0 / tokens_per_s, now_us);
}

TEST(SpeedEstimatorTest, FixedCostAndSlopeFittedOverSizeClasses) {
  SpeedEstimator s(0.5);
  EXPECT_FALSE(s.prefill_fit().has_value());
  EXPECT_FALSE(s.decode_ms_per_token().has_value());
  s.ObservePrefill(1000, 500, 0);
  // One size says nothing about the slope: no fit, no prediction.
  EXPECT_FALSE(s.prefill_fit().has_value());
  EXPECT_FALSE(s.prefill_tokens_per_s().has_value());
  s.ObservePrefill(1100, 10000, 0);  // another class, but not 2x apart
  EXPECT_FALSE(s.prefill_fit().has_value()) << "sizes less than 2x apart";
  SpeedEstimator t(0.5);
  t.ObservePrefill(1000, 500, 0);
  t.ObservePrefill(4000, 1700, 0);
  // slope (1700 - 500) / 3000 = 0.4 ms/token, fixed 500 - 400 = 100 ms.
  ASSERT_TRUE(t.prefill_fit().has_value());
  EXPECT_NEAR(t.prefill_fit()->per_token_ms, 0.4, 1e-12);
  EXPECT_NEAR(t.prefill_fit()->fixed_ms, 100, 1e-9);
  EXPECT_NEAR(*t.prefill_tokens_per_s(), 2500, 1e-9);
  EXPECT_NEAR(*t.PrefillMs(2000), 900, 1e-9);
  // A second step of the first class blends into its average (alpha 0.5): (1000, 600).
  t.ObservePrefill(1000, 700, 1000);
  EXPECT_NEAR(t.prefill_fit()->per_token_ms, 1100.0 / 3000, 1e-12);
  EXPECT_NEAR(t.prefill_fit()->fixed_ms, 600 - 1000 * 1100.0 / 3000, 1e-9);
  t.ObservePrefill(0, 100, 2000);  // ignored
  t.ObservePrefill(100, 0, 2000);
  t.ObservePrefill(100, std::nan(""), 2000);
  EXPECT_NEAR(t.prefill_fit()->per_token_ms, 1100.0 / 3000, 1e-12);
  t.ObserveDecode(20, 0);
  t.ObserveDecode(10, 1000);
  t.ObserveDecode(-1, 2000);
  EXPECT_DOUBLE_EQ(*t.decode_ms_per_token(), 15);
}

// The idle-server 429 of the first run: a 5-token first request took 41 ms, almost all of
// it fixed cost. Read per token (122 tokens/s) it predicted 328 ms for 40 tokens; with a
// second size measured, the fit charges 40 tokens what they cost.
TEST(SpeedEstimatorTest, ASmallFirstRequestIsNotExtrapolatedPerToken) {
  SpeedEstimator s;
  s.ObservePrefill(5, 41, 0);
  EXPECT_FALSE(s.PrefillMs(40).has_value());  // no per-token extrapolation of one size
  s.ObservePrefill(64, 64.6, 0);
  // slope (64.6 - 41) / 59 = 0.4 ms/token, fixed 41 - 2 = 39 ms: 40 tokens in 55 ms.
  EXPECT_NEAR(*s.PrefillMs(40), 55, 1e-9);
}

TEST(SpeedEstimatorTest, NoisyFitsKeepBothPartsNonNegative) {
  SpeedEstimator flat;  // a longer step measured faster: all fixed cost, a tiny slope
  flat.ObservePrefill(10, 50, 0);
  flat.ObservePrefill(100, 40, 0);
  ASSERT_TRUE(flat.prefill_fit().has_value());
  EXPECT_GT(flat.prefill_fit()->per_token_ms, 0);
  EXPECT_GE(flat.prefill_fit()->fixed_ms, 0);
  EXPECT_LT(flat.prefill_fit()->per_token_ms, 0.01);
  SpeedEstimator steep;  // a negative intercept: the line through the origin instead
  steep.ObservePrefill(10, 1, 0);
  steep.ObservePrefill(100, 100, 0);
  ASSERT_TRUE(steep.prefill_fit().has_value());
  EXPECT_EQ(steep.prefill_fit()->fixed_ms, 0);
  EXPECT_NEAR(steep.prefill_fit()->per_token_ms, (10.0 + 10000) / (100 + 10000), 1e-12);
}

// Fake clock in us. A cold first fit (100 tokens/s) must not stick: after 5 s with no
// measurement the estimate is stale, one probe may be claimed per stale period, and the next
// measurement rescales the fit by its ratio to the stale prediction instead of blending.
TEST(SpeedEstimatorTest, StaleEstimateAllowsOneProbeAndIsRescaledByTheNextMeasurement) {
  SpeedEstimator s(0.2, 5000);
  EXPECT_FALSE(s.Stale(10'000'000));       // nothing measured: nothing to be stale
  EXPECT_FALSE(s.TryClaimProbe(10'000'000));
  s.ObservePrefill(100, 1000, 0);          // cold: 100 tokens/s, no fixed cost
  s.ObservePrefill(400, 4000, 0);
  EXPECT_FALSE(s.Stale(4'999'999));
  EXPECT_TRUE(s.Stale(5'000'000));
  EXPECT_TRUE(s.TryClaimProbe(5'000'000));
  EXPECT_FALSE(s.TryClaimProbe(5'000'000));  // one probe per stale period
  EXPECT_FALSE(s.Stale(9'999'999));
  EXPECT_TRUE(s.Stale(10'000'000));        // the probe never measured (cancelled): again
  EXPECT_TRUE(s.TryClaimProbe(10'000'000));
  // The probe: 1000 tokens in 100 ms, 1/100 of the stale prediction. Every class scales by
  // that: (100, 10), (400, 40), and the probe's own (1000, 100): 10000 tokens/s.
  s.ObservePrefill(1000, 100, 10'100'000);
  EXPECT_NEAR(*s.prefill_tokens_per_s(), 10000, 1e-6);
  EXPECT_NEAR(s.prefill_fit()->fixed_ms, 0, 1e-9);
  // Fresh: blends into its class, (1000, 0.2 x 200 + 0.8 x 100 = 120). Least squares over
  // (100, 10), (400, 40), (1000, 120) has a negative intercept: the line through the origin,
  // 137000 / 1170000 ms per token.
  s.ObservePrefill(1000, 200, 10'200'000);
  EXPECT_NEAR(s.prefill_fit()->per_token_ms, 137000.0 / 1170000, 1e-12);
  EXPECT_FALSE(s.Stale(15'000'000));

  SpeedEstimator never(0.2, 0);  // staleness off: a late measurement only blends
  never.ObservePrefill(100, 1000, 0);
  never.ObservePrefill(400, 4000, 0);
  EXPECT_FALSE(never.Stale(1'000'000'000));
  never.ObservePrefill(100, 500, 1'000'000'000);  // class (100, 0.2 x 500 + 0.8 x 1000)
  // (100, 900), (400, 4000): a negative intercept, so through the origin: 1690000 / 170000.
  EXPECT_NEAR(*never.PrefillMs(100), 1690000.0 / 170000 * 100, 1e-9);
}

TEST(PredictTest, QueueAheadPlusOwnPromptAtMeasuredSpeed) {
  SpeedEstimator s;
  QueueLoad load;
  load.queued_prefill_tokens = 100;
  EXPECT_FALSE(Predict(s, load, 100, 10, 0).ttft_ms.has_value());
  SeedLine(s, 2000);  // 2000 tokens/s
  load.queued_prefill_tokens = 3000;
  Prediction p = Predict(s, load, 1000, 101, 10);
  // 10 ms spent + (3000 + 1000) tokens / 2000 tokens/s = 2010 ms; no decode speed yet.
  EXPECT_DOUBLE_EQ(*p.ttft_ms, 2010);
  EXPECT_FALSE(p.e2e_ms.has_value());
  s.ObserveDecode(15, 0);
  p = Predict(s, load, 1000, 101, 10);
  EXPECT_DOUBLE_EQ(*p.e2e_ms, 2010 + 100 * 15);  // 100 tokens after the first
}

TEST(PredictTest, RunningPrefillStepInFlightAndDecodesSharingTheChunkedSteps) {
  SpeedEstimator s;
  SeedLine(s, 2000);  // 2000 step tokens/s
  QueueLoad load;
  load.queued_prefill_tokens = 300;
  load.running_prefill_tokens = 200;  // a partly prefilled prompt
  load.running_decodes = 56;
  load.step_left_ms = 40;
  load.step_token_budget = 256;       // 256 - 56 = 200 prefill tokens per step
  // Prefill 300 + 200 + 100 = 600 tokens = 3 steps, each with 56 decodes: 768 tokens at
  // 2000/s = 384 ms, + 40 ms of the step in flight + 10 ms elapsed.
  EXPECT_DOUBLE_EQ(*Predict(s, load, 100, 1, 10).ttft_ms, 434);
  // The margin scales the service time, not the time already spent: 10 + 1.25 x 424.
  EXPECT_DOUBLE_EQ(*Predict(s, load, 100, 1, 10, 1.25).ttft_ms, 540);
  // 601 tokens need a 4th step: 4 x 56 more decode tokens.
  EXPECT_DOUBLE_EQ(*Predict(s, load, 101, 1, 10).ttft_ms, 10 + 40 + (601 + 224) / 2.0);
  // Unknown budget: one step's worth of decodes (656 tokens).
  load.step_token_budget = 0;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 100, 1, 10).ttft_ms, 10 + 40 + 328);
  // Decodes filling the budget leave the prefill one token per step at worst (no division
  // by zero or a negative chunk).
  load.step_token_budget = 50;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 100, 1, 0).ttft_ms, 40 + (600 + 600 * 56) / 2.0);
  // Negative inputs count as zero.
  QueueLoad bad;
  bad.queued_prefill_tokens = -5;
  bad.running_prefill_tokens = -5;
  bad.running_decodes = -3;
  bad.step_left_ms = -100;
  EXPECT_DOUBLE_EQ(*Predict(s, bad, 100, 1, 0).ttft_ms, 50);
}

// Every running slot taken: a queued request first waits for decodes to finish. 16 slots,
// all decoding, 8 queued ahead, so the 9th slot to free is this request's. Tokens left are
// taken as spread evenly over [min, 2 x mean - min].
// Long answers: 16 slots decoding with 1..31 tokens left, 16 requests queued ahead that ask for
// 300 tokens each. The second round of slots frees when those have decoded their own 300,
// not after the running set's longest remainder (31): the request behind them waits
// 1 + 300 steps, not 1 + 31.
TEST(PredictTest, QueuedLongAnswersHoldTheNextRoundOfSlots) {
  SpeedEstimator s;
  SeedLine(s, 2000);
  s.ObserveDecode(20, 0);
  QueueLoad load;
  load.queued_requests = 16;
  load.queued_prefill_tokens = 8 * 80;
  load.running_decodes = 16;
  load.step_token_budget = 256;
  load.max_running = 16;
  load.running_sequences = 16;
  load.running_decode_tokens_left = 16 * 16;
  load.running_decode_min_left = 1;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, (1 + 31) * 20.0 + 40);
  load.queued_decode_tokens = 16 * 300;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, (1 + 300) * 20.0 + 40);
}

TEST(PredictTest, AFullRunningSetMakesTheQueueWaitForDecodesToFinish) {
  SpeedEstimator s;
  SeedLine(s, 2000);        // 2000 step tokens/s
  s.ObserveDecode(20, 0);   // a decode step: 20 ms
  QueueLoad load;
  load.queued_requests = 8;
  load.queued_prefill_tokens = 8 * 80;
  load.running_decodes = 16;
  load.step_token_budget = 256;
  // Without slot information: the queued prompts' prefill and its own, 3 steps of 240 + 16
  // decodes: (720 + 48) tokens / 2 = 384 ms.
  const double prefill_only = *Predict(s, load, 80, 32, 0).ttft_ms;
  EXPECT_DOUBLE_EQ(prefill_only, (720 + 3 * 16) / 2.0);
  load.max_running = 16;
  load.running_sequences = 16;
  // A burst that started together, 31 tokens left each: no slot frees for 31 steps (what
  // the 30 req/s run saw: requests admitted behind it waited 500-700 ms). Then its own
  // 80-token prefill (40 ms).
  load.running_decode_tokens_left = 16 * 31;
  load.running_decode_min_left = 31;
  const double burst = 31 * 20 + 40;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, burst);
  EXPECT_GT(burst, prefill_only);
  // Spread 1..31 (mean 16): the 9th of 16 evenly spaced values, 1 + 30 x 8 / 15 = 17 steps.
  load.running_decode_tokens_left = 16 * 16;
  load.running_decode_min_left = 1;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms,
                   std::max(prefill_only, 17.0 * 20 + 40));
  // 16 queued ahead: a second round of slots, the shortest (1) then about the longest (31).
  load.queued_requests = 16;
  // (The queued prompt tokens are left at 640, so the prefill path stays 384 ms.)
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, (1 + 31) * 20.0 + 40);
  load.queued_requests = 8;
  // A free slot for everyone ahead and this one: no wait.
  load.running_sequences = 7;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, prefill_only);
  // One slot short, the shortest decode one token from its end: at least one step.
  load.running_sequences = 8;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, std::max(prefill_only, 20.0 + 40));
  // The wait never lowers a longer prefill estimate.
  load.running_sequences = 16;
  load.queued_prefill_tokens = 100000;
  EXPECT_GT(*Predict(s, load, 80, 32, 0).ttft_ms, 100000 / 2.0);
  // Slots free at the pace of the running decodes' measured steps when that is slower than a
  // decode step alone (16 decodes beside prefill chunks: 35 ms, not 20).
  load.queued_prefill_tokens = 8 * 80;
  load.running_decode_tokens_left = 16 * 31;
  load.running_decode_min_left = 31;
  load.decode_interval_ms = 35;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, 31 * 35 + 40);
  load.decode_interval_ms = 5;  // never faster than the decode step itself
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, 31 * 20 + 40);
  load.decode_interval_ms = 0;
  // Unknown slot cap, or no decode speed yet: no wait is predicted.
  load.queued_prefill_tokens = 8 * 80;
  load.max_running = 0;
  EXPECT_DOUBLE_EQ(*Predict(s, load, 80, 32, 0).ttft_ms, prefill_only);
  SpeedEstimator no_decode;
  SeedLine(no_decode, 2000);
  load.max_running = 16;
  EXPECT_DOUBLE_EQ(*Predict(no_decode, load, 80, 32, 0).ttft_ms, prefill_only);
}

class DecideTest : public ::testing::Test {
 protected:
  DecideTest() : config_(DefaultSloConfig()) {
    config_.admission.prediction_margin = 1.0;  // hand-computed values without the margin
    SeedLine(speeds_, 10000);                // 10000 tokens/s
    speeds_.ObserveDecode(10, 0);            // 10 ms per token
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

// A request that misses its class budget even alone (search-embed's 50 ms; 800 tokens at
// 10000 tokens/s are 80 ms + 20 elapsed = 100 ms) is judged against that floor plus the longer
// of the budget and the floor (200 ms): admitted behind a short queue, shed behind a long one,
// routed when a lighter member may meet the budget. One that fits alone is judged as before.
TEST_F(DecideTest, ABudgetBelowTheRequestsFloorBecomesTheWaitOnTopOfIt) {
  RequestSloFields f;
  f.slo_class = "search-embed";
  AdmissionRequest r = Req(f);
  r.floor_rule = true;  // an embedding (the server sets it for embeddings and reranking)
  r.prompt_tokens = 800;
  r.max_tokens = 1;
  r.load.queued_requests = 1;
  r.load.queued_prefill_tokens = 900;  // 20 + 1700 / 10 = 190 ms <= 200
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit) << d.reason;
  EXPECT_TRUE(d.below_floor);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 190);
  EXPECT_NE(d.reason.find("within budget 200.0 ms"), std::string::npos) << d.reason;

  r.load.queued_prefill_tokens = 2000;  // 20 + 2800 / 10 = 300 ms > 200
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed) << d.reason;
  EXPECT_TRUE(d.below_floor);
  EXPECT_NE(d.reason.find("> budget 200.0 ms (what the request needs alone"), std::string::npos)
      << d.reason;

  r.load.queued_prefill_tokens = 900;
  r.has_next_model = true;  // a lighter member may make 50 ms
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute) << d.reason;
  EXPECT_FALSE(d.below_floor);

  AdmissionRequest fits = Req(f);
  fits.floor_rule = true;
  fits.prompt_tokens = 200;  // 20 + 20 = 40 ms alone
  fits.max_tokens = 1;       // behind 2000 queued tokens: 240 ms > 50
  d = Decide(config_, fits, speeds_);
  EXPECT_EQ(d.action, Action::kShed) << d.reason;
  EXPECT_FALSE(d.below_floor);
  EXPECT_NE(d.reason.find("> budget 50.0 ms ("), std::string::npos) << d.reason;
}

// The controller's per-class margin scale multiplies the service time: 250 ms of service
// fits 387 ms at scale 1 (270) but not at 1.5 (20 + 375 = 395).
TEST_F(DecideTest, ClassMarginScaleMultipliesTheServiceTime) {
  AdmissionRequest r = Req();
  r.has_next_model = true;
  r.margin_scale = 1.5;
  const AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 20 + 1.5 * 250);
  r.margin_scale = 0.5;  // below 1 counts as 1: the scale only ever adds caution
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kAdmit);
}

TEST_F(DecideTest, PredictedMissRoutesOrShedsWithRetryAfter) {
  AdmissionRequest r = Req();
  r.load.queued_prefill_tokens = 10000;  // 20 + 10500 / 10 = 1070 ms > 387
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.shed_cause, ShedCause::kLoad);
  EXPECT_EQ(d.retry_after_s, 1);  // 683 ms late -> 1 s
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 1070);
  EXPECT_EQ(d.reason,
            "predicted ttft 1070.0 ms > budget 387.0 ms (3 queued requests with 10000 prompt "
            "tokens, 0 running prefill tokens, 0 decoding with 0 tokens left, 0 of 0 running "
            "slots taken, 0 ms left in the step; a step costs 0.00 ms + 0.1000 ms/token; "
            "service x 1.00 measured correction x 1.00 margin)");
  r.has_next_model = true;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  EXPECT_EQ(d.shed_cause, ShedCause::kNone);

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

TEST_F(DecideTest, WorkAlreadyRunningCountsAgainstTheBudget) {
  // The queue alone predicts 270 ms (admit). A partly prefilled prompt (1000 tokens left)
  // and 50 ms left in the step being computed make it 20 + 350 + 50 = 420 ms > 387: route.
  AdmissionRequest r = Req();
  r.has_next_model = true;
  r.load.running_prefill_tokens = 1000;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 370);
  r.load.step_left_ms = 50;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 420);
  EXPECT_EQ(d.reason,
            "predicted ttft 420.0 ms > budget 387.0 ms (3 queued requests with 2000 prompt "
            "tokens, 1000 running prefill tokens, 0 decoding with 0 tokens left, 0 of 0 "
            "running slots taken, 50 ms left in the step; a step costs 0.00 ms + 0.1000 "
            "ms/token; service x 1.00 measured correction x 1.00 margin)");
  // Decoding sequences ride along in every chunk: without the step in flight, 3500 prefill
  // tokens at 256 - 16 = 240 per step = 15 steps x 16 decodes = 240 more tokens: 20 + 374.
  r.load.step_left_ms = 0;
  r.load.running_decodes = 16;
  r.load.step_token_budget = 256;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRoute);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 394);
  // The margin knob: at 1.15 the 270 ms of the queue alone becomes 20 + 1.15 x 250.
  config_.admission.prediction_margin = 1.15;
  EXPECT_DOUBLE_EQ(*Decide(config_, Req(), speeds_).predicted.ttft_ms, 20 + 1.15 * 250);
}

TEST_F(DecideTest, StaleEstimateAdmitsAProbeInsteadOfRouting) {
  AdmissionRequest r = Req();
  r.has_next_model = true;
  r.load.queued_prefill_tokens = 10000;  // predicted 1070 ms: route
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kRoute);
  r.probe_due = true;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_TRUE(d.probe);
  EXPECT_EQ(d.reason, "probe: stale speed estimate (predicted ttft 1070.0 ms > budget 387.0 ms)");
  // A request that fits is a plain admission, not a probe.
  d = Decide(config_, Req(), speeds_);
  EXPECT_FALSE(d.probe);
}

// The reported failure on a fake clock: a cold first request measured the heavy model at
// 100 tokens/s, so every later request was routed away and nothing ever measured it again.
TEST(AdmissionRecoveryTest, ColdFirstMeasurementNoLongerRoutesEverythingAwayForGood) {
  SloConfig config = DefaultSloConfig();
  config.admission.prediction_margin = 1.0;
  SpeedEstimator heavy(config.admission.ewma_alpha, config.admission.speed_stale_ms);
  heavy.ObservePrefill(100, 1000, 0);  // cold: 100 tokens/s
  heavy.ObservePrefill(25, 250, 0);
  auto decide = [&](int64_t now_us) {
    AdmissionRequest r;
    r.budget = *Resolve(config, {});
    r.load.queued_requests = 1;  // not idle: an idle model would serve it anyway
    r.prompt_tokens = 80;  // 800 ms at 100 tokens/s > 387 ms
    r.max_tokens = 32;
    r.has_next_model = true;
    r.probe_due = heavy.Stale(now_us);
    AdmissionDecision d = Decide(config, r, heavy);
    if (d.probe && !heavy.TryClaimProbe(now_us)) {
      r.probe_due = false;
      d = Decide(config, r, heavy);
    }
    return d;
  };
  for (int64_t t = 100'000; t < 5'000'000; t += 100'000) {
    ASSERT_EQ(decide(t).action, Action::kRoute) << t;
  }
  const AdmissionDecision probe = decide(5'000'000);
  EXPECT_EQ(probe.action, Action::kAdmit);
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(decide(5'000'000).action, Action::kRoute);  // only one probe
  EXPECT_EQ(decide(5'050'000).action, Action::kRoute);
  // The probe ran warm: 80 tokens in 16 ms, 1/50 of the stale fit's 800 ms. Its class
  // (64..127 tokens, the cold 100-token one) is replaced, the 25-token class scaled to 5 ms:
  // 5000 tokens/s.
  heavy.ObservePrefill(80, 16, 5'060'000);
  const AdmissionDecision after = decide(5'100'000);
  EXPECT_EQ(after.action, Action::kAdmit);
  EXPECT_FALSE(after.probe);
  EXPECT_DOUBLE_EQ(*after.predicted.ttft_ms, 16);
}

TEST_F(DecideTest, LadderLevels) {
  AdmissionRequest r = Req();
  r.level = Level::kShed;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.shed_cause, ShedCause::kLoad);
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
  EXPECT_EQ(d.shed_cause, ShedCause::kLoad);
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
  EXPECT_EQ(d.shed_cause, ShedCause::kNotReady);
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
  EXPECT_EQ(d.reason, "no speed fit yet");
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
  shed.shed_cause = ShedCause::kLoad;
  AdmissionDecision down = shed;
  down.shed_cause = ShedCause::kNotReady;
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

// The first run's idle-server 429: with nothing queued or running on the model a refusal
// helps nobody, so a predicted miss is admitted (or routed to a lighter member).
TEST_F(DecideTest, AnIdleModelNeverRefuses) {
  AdmissionRequest r = Req();
  r.load = QueueLoad{};            // nothing queued, nothing running
  r.prompt_tokens = 5000;          // 20 + 500 ms > 387 ms
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 520);
  EXPECT_EQ(d.reason, "model idle: admitted although predicted ttft 520.0 ms > budget 387.0 ms");
  r.has_next_model = true;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kRoute);
  // One request queued is load: the same prediction sheds (generation: no floor rule).
  r.has_next_model = false;
  r.load.queued_requests = 1;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kShed);
  r.load = QueueLoad{};
  r.load.running_decodes = 1;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kShed);
  // With the floor rule (an embedding) it is judged against what it needs alone (520 ms) plus
  // the longer of the budget and that: 1040 ms. A queue that adds nothing keeps it in; one
  // that adds 1000 ms (10000 tokens) sheds it.
  r.floor_rule = true;
  r.load = QueueLoad{};
  r.load.queued_requests = 1;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit) << d.reason;
  EXPECT_TRUE(d.below_floor);
  r.load.queued_prefill_tokens = 10000;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kShed);
}

// deadline_ms that even the request alone on an idle model cannot meet is a 400 naming the
// estimate, not a retryable 429: retrying cannot help.
TEST_F(DecideTest, AnUnreachableDeadlineIsRefusedNotShed) {
  AdmissionRequest r = Req(Fields("", "", 1));
  r.elapsed_ms = 0.5;
  r.load = QueueLoad{};
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kRefuse);
  EXPECT_EQ(d.shed_cause, ShedCause::kNone);
  EXPECT_EQ(d.retry_after_s, 0);
  // Alone: 0.5 ms elapsed + 500 tokens x 0.1 ms.
  EXPECT_EQ(d.reason,
            "deadline_ms 1 cannot be met: its first token is estimated at 50.5 ms even with "
            "nothing else queued (0.5 ms elapsed + prefill of 500 prompt tokens at 0.00 ms + "
            "0.1000 ms/token)");
  EXPECT_EQ(OutcomeCounters::OutcomeOf(d), "refused_deadline");
  // Already past: refused without any estimate.
  r.elapsed_ms = 2;
  EXPECT_EQ(Decide(config_, r, SpeedEstimator()).action, Action::kRefuse);
  // Reachable alone but not behind the queue: load, so the retryable 429 (or a route).
  AdmissionRequest q = Req(Fields("", "", 200));
  q.elapsed_ms = 20;  // alone 70 ms <= 200; behind 2000 queued tokens 270 ms > 200
  d = Decide(config_, q, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.shed_cause, ShedCause::kLoad);
  // A class budget is not the client's deadline: never refused, at most shed.
  AdmissionRequest cls = Req();
  cls.budget.ttft_budget_ms = 1;
  EXPECT_NE(Decide(config_, cls, speeds_).action, Action::kRefuse);
}

TEST_F(DecideTest, TruncationNeverCutsBelowTheFloor) {
  AdmissionRequest r = Req(Fields("chat", "", 400));
  r.level = Level::kTruncate;
  // 270 ms to the first token leaves 130 ms: 1 + 13 tokens, raised to the 64-token floor.
  AdmissionDecision d = Decide(config_, r, speeds_);
  ASSERT_EQ(d.action, Action::kAdmit);
  EXPECT_EQ(d.max_tokens_cap.value_or(-1), 64);
  EXPECT_TRUE(d.stop_at_deadline);  // the deadline stop still ends it on time
  r.max_tokens = 40;  // asked for less than the floor: its own max_tokens, no cap
  EXPECT_FALSE(Decide(config_, r, speeds_).max_tokens_cap.has_value());
}

}  // namespace
}  // namespace lifeline::slo

namespace lifeline::slo {
namespace {

// ---- The idle model and the measured correction (docs/slo.md) ------------------------------

// The first request after a burst: the ladder may still be at shed for a model whose queue
// has emptied. An idle model is never shed: it is served as at the cascade level (routed on
// the first hop when there is a lighter member, served in place by the last one).
TEST_F(DecideTest, AnIdleModelIsNeverShedByTheLadder) {
  AdmissionRequest r = Req();
  r.load = QueueLoad{};
  r.load.open_requests = 0;
  r.level = Level::kShed;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_EQ(d.max_tokens_cap.value_or(-1), 256);  // the lower levels' measures still apply
  r.has_next_model = true;
  EXPECT_EQ(Decide(config_, r, speeds_).action, Action::kRoute);
  // One request open on the model: the shed level applies again.
  r.has_next_model = false;
  r.load.open_requests = 1;
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_EQ(d.reason, "class interactive at degradation level shed");
}

// The model's measured correction multiplies the service time; the raw prediction (what the
// audit checks) does not change with it.
TEST_F(DecideTest, MeasuredCorrectionScalesThePredictedServiceTime) {
  AdmissionRequest r = Req();  // 250 ms of service, 20 ms elapsed
  r.prediction_correction = 0.1;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 20 + 25);
  EXPECT_DOUBLE_EQ(*d.predicted.raw_service_ms, 250);
  r.prediction_correction = 2.0;  // 20 + 500 > 387: a lighter member, or 429
  d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kShed);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 520);
  EXPECT_DOUBLE_EQ(*d.predicted.raw_service_ms, 250);
  EXPECT_NE(d.reason.find("service x 2.00 measured correction"), std::string::npos) << d.reason;
}

// Once the model's predictions were checked, their measured spread (the 95th percentile of
// measured / predicted) is the margin, in place of the configured margin and the controller's
// scale: 250 ms of service at spread 1.4 is 20 + 350 = 370 ms (admit) though the scale is 4.
TEST_F(DecideTest, TheMeasuredSpreadIsTheMargin) {
  config_.admission.prediction_margin = 1.15;
  AdmissionRequest r = Req();
  r.margin_scale = 4.0;
  EXPECT_DOUBLE_EQ(*Decide(config_, r, speeds_).predicted.ttft_ms, 20 + 1.15 * 4.0 * 250);
  r.prediction_spread = 1.4;
  AdmissionDecision d = Decide(config_, r, speeds_);
  EXPECT_EQ(d.action, Action::kAdmit);
  EXPECT_DOUBLE_EQ(*d.predicted.ttft_ms, 20 + 1.4 * 250);
  r.prediction_spread = 0.7;  // never below 1: a mean prediction is never shortened
  EXPECT_DOUBLE_EQ(*Decide(config_, r, speeds_).predicted.ttft_ms, 20 + 250);
}

}  // namespace
}  // namespace lifeline::slo
