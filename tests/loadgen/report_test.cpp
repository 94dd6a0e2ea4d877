// Derived per-request values (TPOT, layers), step summaries, knees, verdicts, ratios and the
// three report files, on synthetic records whose expected numbers are worked out by hand.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "bench/loadgen/http_client.h"
#include <nlohmann/json.hpp>

#include "bench/loadgen/report.h"
#include "bench/loadgen/svg.h"

namespace lifeline::loadgen {
namespace {

TEST(Layers, LifelineTimingsSplitIntoThree) {
  // service = 1 + 2 + 3 + 4 + 5 + 0 = 15; compute = 10 + 20 + 5 = 35; network = 100 - 50 = 50.
  const nlohmann::json t = {{"http_read_ms", 0.5}, {"validate_ms", 1}, {"template_ms", 2},
                            {"tokenize_ms", 3},    {"queue_ms", 4},    {"kv_alloc_ms", 5},
                            {"model_load_ms", 0},  {"prefill_ms", 10}, {"decode_ms", 20},
                            {"sampling_ms", 5},    {"server_total_ms", 51}};
  double n = -1, s = -1, c = -1;
  ASSERT_TRUE(SplitLayers(t, 100, &n, &s, &c));
  EXPECT_DOUBLE_EQ(s, 15);
  EXPECT_DOUBLE_EQ(c, 35);
  EXPECT_DOUBLE_EQ(n, 50);
  // The residual never goes negative (clock skew between client and server intervals).
  ASSERT_TRUE(SplitLayers(t, 40, &n, &s, &c));
  EXPECT_EQ(n, 0);
}

// Any server that names the layers in Server-Timing (parsed into service_ms / compute_ms).
TEST(Layers, ServerTimingLayerEntries) {
  double n = -1, s = -1, c = -1;
  ASSERT_TRUE(SplitLayers(ParseServerTiming("network;dur=0.5, service;dur=7, compute;dur=30"), 60,
                          &n, &s, &c));
  EXPECT_DOUBLE_EQ(s, 7);
  EXPECT_DOUBLE_EQ(c, 30);
  EXPECT_DOUBLE_EQ(n, 23);
}

TEST(Layers, LlamaCppTimingsAndNone) {
  // llama.cpp reports prompt_ms / predicted_ms: compute = 10 + 30, service 0, network 10.
  double n = -1, s = -1, c = -1;
  ASSERT_TRUE(SplitLayers({{"prompt_ms", 10}, {"predicted_ms", 30}, {"prompt_n", 5}}, 50, &n, &s, &c));
  EXPECT_DOUBLE_EQ(c, 40);
  EXPECT_DOUBLE_EQ(s, 0);
  EXPECT_DOUBLE_EQ(n, 10);
  EXPECT_FALSE(SplitLayers(nlohmann::json::object(), 50, &n, &s, &c));
  EXPECT_FALSE(SplitLayers(nullptr, 50, &n, &s, &c));
}

int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

RequestRecord Ok(double ttft, double e2e, int64_t tokens, int step = 0, int target = 0) {
  RequestRecord r;
  r.step = step;
  r.target = target;
  r.prompt_words = 10;
  r.x.http_status = 200;
  r.x.streamed = true;
  r.x.ttft_ms = ttft;
  r.x.e2e_ms = e2e;
  r.x.completion_tokens = tokens;
  r.x.content_events = tokens;
  DeriveRecord(&r);
  return r;
}

RequestRecord Failed(const std::string& kind, int status, int step = 0, int target = 0) {
  RequestRecord r;
  r.step = step;
  r.target = target;
  r.prompt_words = 10;
  r.x.http_status = status;
  r.x.error = kind;
  r.x.e2e_ms = 5;
  DeriveRecord(&r);
  return r;
}

TEST(Record, TpotOutputTokensAndSloValue) {
  // TPOT = (1000 - 100) / (10 - 1) = 100 ms.
  const RequestRecord r = Ok(100, 1000, 10);
  EXPECT_DOUBLE_EQ(r.tpot_ms, 100);
  EXPECT_EQ(r.output_tokens, 10);
  EXPECT_EQ(r.SloValue(SloMetric::kTtft), 100);
  EXPECT_EQ(r.SloValue(SloMetric::kE2e), 1000);
  EXPECT_EQ(Ok(100, 200, 1).tpot_ms, -1);  // one token: no TPOT
  RequestRecord plain = Ok(100, 1000, 10);
  plain.x.streamed = false;
  plain.tpot_ms = -1;
  DeriveRecord(&plain);
  EXPECT_EQ(plain.tpot_ms, -1);  // non-streamed: tokens arrive together

  RequestRecord fallback;
  fallback.x.http_status = 200;
  fallback.x.content_events = 4;
  fallback.x.timings = {{"tokens", {{"generated", 6}, {"prompt", 3}}}};
  DeriveRecord(&fallback);
  EXPECT_EQ(fallback.output_tokens, 6);  // timings before counted events
  EXPECT_EQ(fallback.prompt_tokens, 3);

  EXPECT_TRUE(std::isinf(Failed("http_status", 429).SloValue(SloMetric::kTtft)));
}

TEST(Summary, HandComputedStep) {
  // Five requests over 2 s: three OK (TTFT 100, 200, 400; e2e 500, 600, 700; 5 tokens each),
  // one 429, one cancelled by an early stop.
  std::vector<RequestRecord> recs = {Ok(100, 500, 5), Ok(200, 600, 5), Ok(400, 700, 5),
                                     Failed("http_status", 429), Failed("cancelled", 0)};
  std::vector<const RequestRecord*> ptrs;
  for (const auto& r : recs) ptrs.push_back(&r);
  const TargetStepSummary s = SummarizeTargetStep(ptrs, 387, SloMetric::kTtft, 2.0, 2.0);
  EXPECT_EQ(s.sent, 5);
  EXPECT_EQ(s.ok, 3);
  EXPECT_EQ(s.errors, 1);
  EXPECT_EQ(s.http_429, 1);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.errors_by_kind.at("http_status"), 1);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 1.5);  // 3 / 2 s
  EXPECT_DOUBLE_EQ(s.output_tok_s, 7.5);    // 15 tokens / 2 s
  EXPECT_DOUBLE_EQ(s.goodput_rps, 1.0);     // TTFT 100 and 200 meet 387 ms
  EXPECT_EQ(s.finished, 4);                 // the cancelled one did not finish
  EXPECT_EQ(s.met_slo, 2);
  EXPECT_EQ(s.refused, 1);                  // the 429
  EXPECT_EQ(s.failed, 0);
  EXPECT_DOUBLE_EQ(s.smooth_goodput_rps, 0.5);  // (2 met - 1 refused) / 2 s
  // TTFT over OK requests: P50 rank 2 -> 200, P95 rank 3 -> 400.
  EXPECT_EQ(s.ttft.p50, 200);
  EXPECT_EQ(s.ttft.p95, 400);
  // TPOT = (e2e - ttft) / 4: 100, 100, 75 -> mean 91.67, max 100.
  EXPECT_NEAR(s.tpot.mean, 275.0 / 3, 1e-9);
  EXPECT_EQ(s.tpot.max, 100);
  // SLO P95 over non-cancelled requests {100, 200, 400, inf}: rank 4 -> inf.
  EXPECT_TRUE(std::isinf(s.slo_p95_ms));
  EXPECT_EQ(s.layered, 0);
  EXPECT_TRUE(std::isnan(s.network.mean_ms));
}

TEST(Summary, ServedByCountsSuccessfulRequestsPerServedModel) {
  // A cascade: two requests served by the heavy model, three routed to the light one, one
  // shed (429, named "heavy" in its error body, but failures are not served), one unnamed.
  std::vector<RequestRecord> recs;
  for (const char* m : {"heavy", "light", "light", "heavy", "light", ""}) {
    RequestRecord r = Ok(100, 500, 5);
    r.x.served_model = m;
    recs.push_back(r);
  }
  RequestRecord shed = Failed("http_status", 429);
  shed.x.served_model = "heavy";
  recs.push_back(shed);
  std::vector<const RequestRecord*> ptrs;
  for (const auto& r : recs) ptrs.push_back(&r);
  const TargetStepSummary s = SummarizeTargetStep(ptrs, 387, SloMetric::kTtft, 1.0, 1.0);
  ASSERT_EQ(s.served_by.size(), 3u);
  EXPECT_EQ(s.served_by.at("heavy"), 2);
  EXPECT_EQ(s.served_by.at("light"), 3);
  EXPECT_EQ(s.served_by.at(""), 1);
  EXPECT_EQ(s.http_429, 1);

  // The same counts reach report.json and the Markdown throughput table.
  RunOptions o;
  o.targets = {*ParseTargetSpec("--target", "http://a:1,label=A")};
  o.loads = {3};
  RunData run;
  StepData st;
  st.load = 3;
  TargetStep ts;
  ts.ran = true;
  ts.planned = static_cast<int64_t>(recs.size());
  ts.sent = ts.planned;
  ts.wall_s = 1;
  st.targets.push_back(ts);
  run.steps.push_back(st);
  run.records = recs;
  ReportInputs in;
  in.options = &o;
  in.run = &run;
  in.facts.resize(1);
  const Report rep = BuildReport(in);
  const nlohmann::json j = ReportJson(in, rep);
  EXPECT_EQ(j["summaries"][0]["served_by"]["light"], 3);
  EXPECT_EQ(j["summaries"][0]["served_by"]["heavy"], 2);
  EXPECT_NE(ReportMarkdown(in, rep).find("| ? 1, heavy 2, light 3 |"), std::string::npos)
      << ReportMarkdown(in, rep);
}

// One step of one or more targets at `load`, built from synthetic records (record.target
// picks the target); every target ran with `planned` requests over `wall_s`.
struct OneStep {
  RunOptions o;
  RunData run;
  ReportInputs in;
  OneStep(double load, int64_t planned, double wall_s, std::vector<RequestRecord> recs,
          int n_targets = 1) {
    for (int k = 0; k < n_targets; ++k) {
      const std::string label(1, static_cast<char>('A' + k));
      o.targets.push_back(*ParseTargetSpec("--target", "http://h" + label + ":1,label=" + label));
    }
    o.loads = {load};
    StepData st;
    st.load = load;
    for (int k = 0; k < n_targets; ++k) {
      TargetStep ts;
      ts.ran = true;
      ts.planned = planned;
      ts.wall_s = wall_s;
      for (const RequestRecord& r : recs) ts.sent += r.target == k ? 1 : 0;
      st.targets.push_back(ts);
    }
    run.steps.push_back(st);
    run.records = std::move(recs);
    in.options = &o;
    in.run = &run;
    in.facts.resize(static_cast<size_t>(n_targets));
  }
};

TEST(Goodput, NeverAboveTheOfferedRateWhenAStepStopsEarly) {
  // 0.5 req/s with 5 planned requests: the schedule offers them over 5 / 0.5 = 10 s. The
  // target stopped early after three fast requests and one slow one, 1.96 s into the step.
  // Over the wall time goodput read 3 / 1.96 = 1.53 req/s, three times the offered rate; over
  // the offered duration it is 3 / 10 = 0.3 req/s.
  OneStep f(0.5, 5, 1.96,
            {Ok(100, 300, 5), Ok(120, 300, 5), Ok(90, 300, 5), Ok(900, 1000, 5),
             Failed("cancelled", 0)});
  f.run.steps[0].targets[0].stopped_early = true;
  const Report rep = BuildReport(f.in);
  ASSERT_EQ(rep.summaries.size(), 1u);
  const TargetStepSummary& s = rep.summaries[0];
  EXPECT_DOUBLE_EQ(s.offered_duration_s, 10.0);
  EXPECT_DOUBLE_EQ(s.goodput_rps, 0.3);
  EXPECT_LE(s.goodput_rps, 0.5);
  const nlohmann::json j = ReportJson(f.in, rep);
  EXPECT_DOUBLE_EQ(j["summaries"][0]["offered_duration_s"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["summaries"][0]["goodput_rps"].get<double>(), 0.3);
}

TEST(Goodput, AShortArrivalDrawDoesNotInflateIt) {
  // Four arrivals at 2 req/s offer 2 s of load; the random gaps happened to put them all in
  // the first 0.5 s. All four met the SLO: goodput is the offered 2 req/s, not 4 / 0.5 = 8.
  OneStep f(2, 4, 0.5, {Ok(100, 200, 3), Ok(100, 200, 3), Ok(100, 200, 3), Ok(100, 200, 3)});
  const Report rep = BuildReport(f.in);
  EXPECT_DOUBLE_EQ(rep.summaries[0].goodput_rps, 2.0);
}

TEST(Goodput, ClosedLoopCountsTheWholeDurationWhenStoppedEarly) {
  // Closed loop for 30 s, stopped after 5 s: no offered rate, so the offered duration is the
  // 30 s the load was meant to run, not the 5 s before the stop.
  OneStep f(4, -1, 5, {Ok(100, 200, 3), Ok(100, 200, 3)});
  f.o.mode = LoadMode::kConcurrency;
  f.o.duration_s = 30;
  f.run.steps[0].targets[0].stopped_early = true;
  EXPECT_DOUBLE_EQ(BuildReport(f.in).summaries[0].goodput_rps, 2.0 / 30);
  // Bounded by requests instead: the wall time is all there is.
  f.o.duration_s = 0;
  f.run.steps[0].targets[0].stopped_early = false;
  EXPECT_DOUBLE_EQ(BuildReport(f.in).summaries[0].goodput_rps, 2.0 / 5);
}

TEST(SmoothGoodput, ReportedInJsonMarkdownAndHtml) {
  // 4 planned at 1 req/s (4 s offered): 3 met the SLO, one 503 (refused), one connect failure
  // (failed): goodput 3 / 4 = 0.75, smooth goodput (3 - 1 - 1) / 4 = 0.25.
  OneStep f(1, 5, 3,
            {Ok(100, 200, 3), Ok(100, 200, 3), Ok(100, 200, 3), Failed("http_status", 503),
             Failed("connect", 0)});
  f.run.steps[0].targets[0].planned = 4;
  const Report rep = BuildReport(f.in);
  const nlohmann::json j = ReportJson(f.in, rep);
  const nlohmann::json& s = j["summaries"][0];
  EXPECT_DOUBLE_EQ(s["goodput_rps"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(s["smooth_goodput_rps"].get<double>(), 0.25);
  EXPECT_EQ(s["refused"], 1);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["finished"], 5);
  EXPECT_EQ(s["met_slo"], 3);
  const std::string md = ReportMarkdown(f.in, rep);
  EXPECT_NE(md.find("| goodput req/s | smooth goodput req/s |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.75 | 0.25 |"), std::string::npos) << md;
  const std::string html = ReportHtml(f.in, rep);
  EXPECT_NE(html.find("A (smooth)"), std::string::npos);  // the dashed series in the chart
}

// A target stopped early after 12 of 50 planned requests (3 in flight cancelled), TTFT
// 600..1700 ms, e2e 100 ms more.
OneStep StoppedAfterTwelve() {
  std::vector<RequestRecord> recs;
  for (int i = 1; i <= 12; ++i) recs.push_back(Ok(500 + 100 * i, 600 + 100 * i, 5));
  for (int i = 0; i < 3; ++i) recs.push_back(Failed("cancelled", 0));
  OneStep f(2, 50, 4, std::move(recs));
  f.run.steps[0].targets[0].stopped_early = true;
  return f;
}

TEST(StoppedEarly, MeasuredLatencyIsKeptBesideTheInfiniteVerdict) {
  OneStep f = StoppedAfterTwelve();
  const Report rep = BuildReport(f.in);
  const TargetStepSummary& s = rep.summaries[0];
  EXPECT_TRUE(std::isinf(s.slo_p95_ms));         // the verdict: failed by construction
  EXPECT_EQ(s.measured_slo_p95_ms, 1700);        // P95 of 12 = the 12th: what was measured
  EXPECT_EQ(s.finished, 12);
  EXPECT_EQ(s.ttft.p50, 1100);
  const nlohmann::json j = ReportJson(f.in, rep);
  EXPECT_TRUE(j["summaries"][0]["slo_p95_ms"].is_null());  // key kept: null = infinite
  EXPECT_EQ(j["summaries"][0]["measured_slo_p95_ms"], 1700);
  EXPECT_EQ(j["summaries"][0]["error_share"], 0);
  const nlohmann::json& v = j["verdicts"][0];
  EXPECT_TRUE(v["p95_ms"].is_null());
  EXPECT_EQ(v["pass"], false);
  EXPECT_EQ(v["stopped_early"], true);
  EXPECT_EQ(v["measured_p95_ms"], 1700);
  EXPECT_EQ(v["ttft_p95_ms"], 1700);
  EXPECT_EQ(v["e2e_p95_ms"], 1800);
  EXPECT_EQ(v["requests"], 15);
  EXPECT_EQ(v["finished"], 12);
  const std::string md = ReportMarkdown(f.in, rep);
  EXPECT_NE(md.find("stopped early (past the cliff) after 12 finished requests of 50 planned, 3 "
                    "in flight cancelled; measured TTFT P95 1700 ms"), std::string::npos) << md;
  EXPECT_NE(md.find("| inf (stopped early; measured 1700) | 387 | FAIL |"), std::string::npos)
      << md;
}

TEST(StoppedEarly, ShareOfFailedRequestsIsReported) {
  OneStep f = StoppedAfterTwelve();
  f.run.records[0] = Failed("timeout", 0);
  f.run.records[1] = Failed("http_status", 500);
  f.run.records[2] = Failed("http_status", 500);
  const Report rep = BuildReport(f.in);
  // 3 of 12 finished failed: the measured P95 is infinite too, and the note says why.
  EXPECT_DOUBLE_EQ(ReportJson(f.in, rep)["summaries"][0]["error_share"].get<double>(), 0.25);
  EXPECT_TRUE(std::isinf(rep.summaries[0].measured_slo_p95_ms));
  EXPECT_NE(ReportMarkdown(f.in, rep).find("measured TTFT P95 inf ms, 25% of them failed"),
            std::string::npos);
}

TEST(SmallSample, CaveatBesideTheVerdictBelowTwentyRequests) {
  // The smallest count where a nearest-rank P95 is not the maximum is the threshold.
  EXPECT_EQ(NearestRank(kMinRequestsForP95 - 1, 95), kMinRequestsForP95 - 1);
  EXPECT_LT(NearestRank(kMinRequestsForP95, 95), kMinRequestsForP95);
  EXPECT_TRUE(SmallSampleForP95(19));
  EXPECT_FALSE(SmallSampleForP95(20));

  OneStep few(1, 5, 5, {Ok(100, 200, 3), Ok(100, 200, 3), Ok(100, 200, 3), Ok(100, 200, 3),
                        Ok(150, 200, 3)});
  Report rep = BuildReport(few.in);
  EXPECT_TRUE(rep.summaries[0].small_sample);
  ASSERT_EQ(rep.verdicts.size(), 1u);
  EXPECT_TRUE(rep.verdicts[0].pass);
  EXPECT_TRUE(rep.verdicts[0].small_sample);
  nlohmann::json j = ReportJson(few.in, rep);
  EXPECT_EQ(j["verdicts"][0]["small_sample"], true);
  EXPECT_EQ(j["summaries"][0]["small_sample"], true);
  EXPECT_EQ(j["config"]["small_sample_below"], 20);
  const std::string md = ReportMarkdown(few.in, rep);
  EXPECT_NE(md.find("| PASS | small sample: 5 finished requests (< 20), so the P95 is the "
                    "slowest of them |"), std::string::npos) << md;
  EXPECT_NE(ReportHtml(few.in, rep).find("<td class=\"caveat\">small sample"), std::string::npos);

  std::vector<RequestRecord> twenty(20, Ok(100, 200, 3));
  OneStep enough(1, 20, 20, twenty);
  rep = BuildReport(enough.in);
  EXPECT_FALSE(rep.verdicts[0].small_sample);
  EXPECT_EQ(ReportMarkdown(enough.in, rep).find("small sample"), std::string::npos);
}

// The charts of report.html, cut apart at their <svg> tags (CDF TTFT, CDF e2e, P95 vs load,
// goodput vs load, timeline, layers).
std::vector<std::string> Charts(const std::string& html) {
  std::vector<std::string> out;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    out.push_back(html.substr(at, html.find("</svg>", at) - at));
  }
  return out;
}

TEST(Charts, EveryTargetAppearsInEveryChart) {
  // A passes; B failed everything and stopped early at the only load.
  std::vector<RequestRecord> recs = {Ok(100, 200, 3, 0, 0), Ok(120, 220, 3, 0, 0)};
  for (int i = 0; i < 2; ++i) recs.push_back(Failed("timeout", 0, 0, 1));
  recs.push_back(Failed("cancelled", 0, 0, 1));
  OneStep f(2, 10, 3, recs, 2);
  f.run.steps[0].targets[1].stopped_early = true;
  const std::vector<std::string> charts = Charts(ReportHtml(f.in, BuildReport(f.in)));
  ASSERT_EQ(charts.size(), 6u);
  for (const std::string& c : charts) {
    EXPECT_NE(c.find(">A"), std::string::npos) << c;
    EXPECT_NE(c.find(">B"), std::string::npos) << c;
  }
  // P95 vs load: B's infinite P95 on the top edge, with the legend note.
  EXPECT_NE(charts[2].find("class=\"clipped\""), std::string::npos) << charts[2];
  EXPECT_NE(charts[2].find("stopped early past the cliff"), std::string::npos);
  // The timeline shows B's two failures (not the cancelled request) on the top edge: two
  // triangles and the legend's.
  EXPECT_EQ(Count(charts[4], "class=\"clipped\""), 3) << charts[4];
  EXPECT_NE(charts[0].find("B (no successful requests)"), std::string::npos);
}

// The case: at 2 req/s m110 passes (P95 TTFT 140 ms); m1b stopped early past the
// cliff after 12 of 50 requests with a measured P95 of 1102 ms, 715 ms over 387 ms.
OneStep ShipOrMiss() {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 20; ++i) recs.push_back(Ok(i >= 18 ? 140 : 100, 300, 5, 0, 0));
  for (int i = 0; i < 12; ++i) recs.push_back(Ok(i == 11 ? 1102 : 900, 1500, 5, 0, 1));
  recs.push_back(Failed("cancelled", 0, 0, 1));
  OneStep f(2, 50, 10, std::move(recs), 2);
  f.o.targets[0].label = "m110";
  f.o.targets[1].label = "m1b";
  f.run.steps[0].targets[0].planned = 20;
  f.run.steps[0].targets[1].stopped_early = true;
  return f;
}

TEST(SummaryFirst, SaysWhichTargetToShipAndByHowMuchTheOthersMiss) {
  OneStep f = ShipOrMiss();
  const Report rep = BuildReport(f.in);
  ASSERT_EQ(rep.answers.size(), 1u);
  const LoadAnswer& a = rep.answers[0];
  EXPECT_EQ(a.pass, std::vector<int>{0});
  EXPECT_EQ(a.miss, std::vector<int>{1});
  EXPECT_EQ(a.text,
            "At 2 req/s ship m110 (P95 TTFT 140 ms <= 387 ms); m1b misses by 715 ms at P95 "
            "(TTFT 1102 ms > 387 ms; stopped early past the cliff after 12 of 50 requests; small "
            "sample: 12 finished requests (< 20), so the P95 is the slowest of them).");
  const std::string md = ReportMarkdown(f.in, rep);
  // First in the report, before the latency table.
  const size_t summary = md.find("## Summary");
  EXPECT_LT(summary, md.find("## Latency"));
  EXPECT_LT(md.find("- " + a.text), md.find("## Latency")) << md;
  // The table: both TTFT and e2e P95 for every target, the measured P95 of the stopped one.
  EXPECT_NE(md.find("| 2 req/s | m110 | PASS | 140 | 140 | 300 | 140 | -247 | 20 of 20 requests | 0 (0%) |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| 2 req/s | m1b | FAIL | 1102 | 1102 | 1500 | inf (stopped early; measured 1102) | "
                    "+715 | 12 of 50 requests | 0 (0%) |"), std::string::npos) << md;
  const nlohmann::json j = ReportJson(f.in, rep);
  ASSERT_EQ(j["summary_by_load"].size(), 1u);
  EXPECT_EQ(j["summary_by_load"][0]["text"], a.text);
  EXPECT_EQ(j["summary_by_load"][0]["pass"], nlohmann::json::array({0}));
  EXPECT_EQ(j["summary_by_load"][0]["miss"], nlohmann::json::array({1}));
  EXPECT_EQ(j["summary_by_load"][0]["slo_metric"], "ttft");
  // report.html opens with the same summary, as a list.
  const std::string html = ReportHtml(f.in, rep);
  EXPECT_LT(html.find("<li>At 2 req/s ship m110"), html.find("<svg"));
}

TEST(SloMetricChoice, DefaultFollowsStreamingAndReportsNameIt) {
  WorkloadSpec w;
  EXPECT_EQ(DefaultSloMetric(w), SloMetric::kTtft);
  w.stream = false;
  EXPECT_EQ(DefaultSloMetric(w), SloMetric::kE2e);
  w.extra_body = {{"stream", true}};  // what the server is asked for decides
  EXPECT_EQ(DefaultSloMetric(w), SloMetric::kTtft);

  OneStep f(1, 1, 1, {Ok(100, 300, 5)});
  f.o.workload.stream = false;
  f.o.metric = DefaultSloMetric(f.o.workload);
  Report rep = BuildReport(f.in);
  nlohmann::json j = ReportJson(f.in, rep);
  EXPECT_EQ(j["config"]["slo_metric"], "e2e");
  EXPECT_EQ(j["config"]["slo_metric_source"], "default");
  EXPECT_EQ(j["config"]["stream"], false);
  std::string md = ReportMarkdown(f.in, rep);
  EXPECT_NE(md.find("P95 e2e <= 387 ms, judged by end-to-end latency, the default for "
                    "non-streamed requests"), std::string::npos) << md;

  f.o.metric = SloMetric::kTtft;
  f.o.metric_from_flag = true;
  rep = BuildReport(f.in);
  j = ReportJson(f.in, rep);
  EXPECT_EQ(j["config"]["slo_metric"], "ttft");
  EXPECT_EQ(j["config"]["slo_metric_source"], "--slo-metric");
  md = ReportMarkdown(f.in, rep);
  EXPECT_NE(md.find("P95 TTFT <= 387 ms, judged by TTFT (set by --slo-metric)"),
            std::string::npos) << md;
}

// Two targets, sweep over 1, 2, 4 req/s. Target 0 passes 1 and 2 and fails 4; target 1 fails
// at 2 (so it was skipped at 4).
struct SweepFixture {
  RunOptions o;
  RunData run;
  ReportInputs in;
  SweepFixture() {
    o.targets = {*ParseTargetSpec("--target", "http://a:1,label=A,model=llama-7b-q4_k_m"),
                 *ParseTargetSpec("--target", "http://b:1,label=B,params=1B,quant=F16")};
    o.loads = {1, 2, 4};
    o.threshold_ms = 387;
    const double ttft[2][3] = {{100, 300, 900}, {150, 600, 0}};
    for (int s = 0; s < 3; ++s) {
      StepData st;
      st.load = o.loads[static_cast<size_t>(s)];
      for (int k = 0; k < 2; ++k) {
        TargetStep ts;
        ts.ran = !(k == 1 && s == 2);
        ts.planned = 4;
        ts.sent = ts.ran ? 4 : 0;
        ts.wall_s = 2;
        st.targets.push_back(ts);
        if (!ts.ran) continue;
        for (int i = 0; i < 4; ++i) {
          RequestRecord r = Ok(ttft[k][s], ttft[k][s] + 100, 3, s, k);
          r.prompt_words = i < 2 ? 100 : 600;  // two input classes: <= 128 and 513-2048
          run.records.push_back(r);
        }
      }
      run.steps.push_back(st);
    }
    in.options = &o;
    in.run = &run;
    in.facts.resize(2);
    in.facts[0].model.id = "llama-7b-q4_k_m";
    in.hardware.cpu_model = "Test CPU";
    in.hardware.logical_cores = 4;
  }
};

TEST(Report, KneesVerdictsAndRatios) {
  SweepFixture f;
  const Report rep = BuildReport(f.in);
  ASSERT_EQ(rep.summaries.size(), 6u);
  ASSERT_EQ(rep.knees.size(), 2u);
  EXPECT_EQ(rep.knees[0], 2.0);
  EXPECT_EQ(rep.knees[1], 1.0);
  // Rows: target 0 x 3 steps x 2 classes + target 1 x 2 steps x 2 classes = 10.
  ASSERT_EQ(rep.verdicts.size(), 10u);
  const VerdictRow& first = rep.verdicts[0];
  EXPECT_EQ(first.model, "llama-7b-q4_k_m");
  EXPECT_EQ(first.parameters, "7B");           // from the name
  EXPECT_EQ(first.quantization, "Q4_K_M");     // from the name
  EXPECT_NE(first.hardware.find("Test CPU"), std::string::npos);
  EXPECT_NE(first.input_length.find("<= 128"), std::string::npos);
  EXPECT_TRUE(first.pass);
  EXPECT_EQ(first.p95_ms, 100);
  int fails = 0;
  for (const VerdictRow& v : rep.verdicts) {
    fails += v.pass ? 0 : 1;
    if (v.target == 1) {
      EXPECT_EQ(v.parameters, "1B");  // the target spec wins
      EXPECT_EQ(v.quantization, "F16");
    }
  }
  EXPECT_EQ(fails, 4);  // A @ 4 and B @ 2, two classes each
  // Ratios of B against A at steps 0 and 1: TTFT P95 150/100 = 1.5 and 600/300 = 2.
  ASSERT_EQ(rep.ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(rep.ratios[0].ttft_p95, 1.5);
  EXPECT_DOUBLE_EQ(rep.ratios[1].ttft_p95, 2.0);
  EXPECT_DOUBLE_EQ(rep.ratios[0].output_tok_s, 1.0);
}

TEST(Report, WritesJsonMarkdownAndSelfContainedHtml) {
  SweepFixture f;
  f.in.facts[0].slo_events = {{500, "degraded", "queue over budget"}};
  const Report rep = BuildReport(f.in);
  const std::string dir = ::testing::TempDir() + "/lbench_report_" + std::to_string(::getpid());
  ASSERT_TRUE(WriteReports(dir, f.in, rep).ok());
  auto slurp = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const nlohmann::json j = nlohmann::json::parse(slurp("report.json"));
  EXPECT_EQ(j["schema"], "lifeline-bench/1");
  EXPECT_EQ(j["requests"].size(), f.run.records.size());
  EXPECT_EQ(j["targets"][0]["knee_load"], 2.0);
  EXPECT_EQ(j["config"]["percentile_definition"], "nearest-rank");
  EXPECT_EQ(j["summaries"].size(), 6u);
  EXPECT_EQ(j["verdicts"].size(), 10u);

  const std::string md = slurp("report.md");
  EXPECT_NE(md.find("## SLA verdict"), std::string::npos);
  EXPECT_NE(md.find("| A | 2 req/s |"), std::string::npos);  // knee table row
  EXPECT_NE(md.find("FAIL"), std::string::npos);

  const std::string html = slurp("report.html");
  EXPECT_EQ(Count(html, "<svg"), 6);  // 2 CDFs, P95 and goodput vs load, timeline, bars
  EXPECT_GE(Count(html, "<polyline"), 4);
  EXPECT_EQ(Count(html, "class=\"threshold\""), 2);  // P95-vs-load and timeline
  EXPECT_GE(Count(html, "class=\"event\""), 1);      // the degradation event
  EXPECT_NE(html.find("queue over budget"), std::string::npos);
  EXPECT_GE(Count(html, "class=\"layer\""), 3);
  for (const char* fetch : {"<script", "src=", "href=", "@import", "url("}) {
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
  }
  std::filesystem::remove_all(dir);
}

TEST(SummaryFirst, EveryLoadOfASweepWithMissesSkipsAndFailures) {
  SweepFixture f;
  const Report rep = BuildReport(f.in);
  ASSERT_EQ(rep.answers.size(), 3u);
  // A: 100, 300, 900 ms; B: 150, 600 ms, then not run.
  EXPECT_EQ(rep.answers[0].text.substr(0, 45), "At 1 req/s ship A (P95 TTFT 100 ms <= 387 ms;");
  EXPECT_NE(rep.answers[0].text.find(" or B (P95 TTFT 150 ms"), std::string::npos);
  EXPECT_NE(rep.answers[1].text.find("; B misses by 213 ms at P95 (TTFT 600 ms > 387 ms"),
            std::string::npos) << rep.answers[1].text;
  EXPECT_EQ(rep.answers[2].text.substr(0, 60),
            "At 4 req/s no target meets P95 TTFT <= 387 ms: A misses by 5");
  EXPECT_NE(rep.answers[2].text.find("; B not run (failed a lower load)."), std::string::npos);
  EXPECT_EQ(rep.answers[2].not_run, std::vector<int>{1});
  EXPECT_NE(ReportMarkdown(f.in, rep).find("| 4 req/s | B | not run (failed a lower load) |"),
            std::string::npos);

  // A load where nothing ran says so instead of "no target meets".
  SweepFixture late;
  late.o.loads = {1, 2};
  late.run.steps.resize(2);
  late.run.records.erase(std::remove_if(late.run.records.begin(), late.run.records.end(),
                                        [](const RequestRecord& r) { return r.step >= 1; }),
                         late.run.records.end());
  for (TargetStep& t : late.run.steps[1].targets) t = TargetStep{};
  EXPECT_EQ(BuildReport(late.in).answers[1].text,
            "At 2 req/s no target was run (A and B failed a lower load).");

  // A target whose failures make the P95 infinite says how many failed.
  OneStep g(1, 4, 2, {Ok(100, 200, 3), Ok(100, 200, 3), Failed("timeout", 0), Failed("io", 0)});
  EXPECT_EQ(BuildReport(g.in).answers[0].text,
            "At 1 req/s no target meets P95 TTFT <= 387 ms: A misses: P95 TTFT infinite, 2 of 4 "
            "finished requests failed (50%; small sample: 4 finished requests (< 20), so the P95 "
            "is the slowest of them).");
}

TEST(Svg, NiceTicksAndEscaping) {
  // Range 0..387 in about 5 steps: raw step 77.4 -> 100.
  EXPECT_EQ(NiceTicks(0, 387), (std::vector<double>{0, 100, 200, 300}));
  const std::vector<double> unit = NiceTicks(0, 1);  // raw step 0.2 -> 0.2
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * static_cast<double>(i), 1e-12);
  EXPECT_EQ(XmlEscape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
  SvgChart empty;
  empty.title = "t";
  EXPECT_NE(RenderChart(empty).find("no data"), std::string::npos);
}

// A thinking model's request: first token (thinking) at `ttft`, first answer token at `ttfa`
// (-1: its thinking ran to the end without an answer).
RequestRecord Thought(double ttft, double ttfa, double e2e, int step = 0, int target = 0) {
  RequestRecord r = Ok(ttft, e2e, 10, step, target);
  r.x.ttfa_ms = ttfa;
  r.x.reasoning_events = 6;
  return r;
}

TEST(Ttfa, TheFirstAnswerTokenAfterThinkingElseTtftElseE2e) {
  const RequestRecord thought = Thought(100, 400, 1000);
  EXPECT_EQ(thought.SloValue(SloMetric::kTtft), 100);
  EXPECT_EQ(thought.SloValue(SloMetric::kTtfa), 400);
  // Thinking that never reached an answer: the answer came no earlier than the end.
  EXPECT_EQ(Thought(100, -1, 1000).SloValue(SloMetric::kTtfa), 1000);
  // No thinking and no separate answer time (a server that does not think): TTFA = TTFT.
  EXPECT_EQ(Ok(120, 900, 5).SloValue(SloMetric::kTtfa), 120);
  EXPECT_TRUE(std::isinf(Failed("http_status", 429).SloValue(SloMetric::kTtfa)));
}

TEST(Ttfa, JudgedByTtfaTheVerdictReadsTheAnswerNotTheThinking) {
  // Twenty requests: the first token at 100 ms for all (thinking), the answer at 300 ms for
  // eighteen and at 900 ms for two. TTFT passes 387 ms; TTFA's P95 (19th of 20) is 900.
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 18; ++i) recs.push_back(Thought(100, 300, 1000));
  recs.push_back(Thought(100, 900, 1500));
  recs.push_back(Thought(100, 900, 1500));
  OneStep f(2, 20, 10, recs);
  f.o.metric = SloMetric::kTtfa;
  f.o.metric_from_flag = true;
  const Report rep = BuildReport(f.in);
  ASSERT_EQ(rep.summaries.size(), 1u);
  EXPECT_EQ(rep.summaries[0].ttft.p95, 100);
  EXPECT_EQ(rep.summaries[0].ttfa.p95, 900);
  ASSERT_EQ(rep.verdicts.size(), 1u);
  EXPECT_EQ(rep.verdicts[0].p95_ms, 900);
  EXPECT_FALSE(rep.verdicts[0].pass);
  EXPECT_EQ(rep.verdicts[0].ttft_p95_ms, 100);
  EXPECT_EQ(rep.verdicts[0].ttfa_p95_ms, 900);
  const nlohmann::json j = ReportJson(f.in, rep);
  EXPECT_EQ(j["config"]["slo_metric"], "ttfa");
  EXPECT_EQ(j["summaries"][0]["ttfa_ms"]["p95"], 900);
  EXPECT_EQ(j["requests"][0]["ttfa_ms"], 300);
  EXPECT_EQ(j["requests"][0]["reasoning_events"], 6);
  const std::string md = ReportMarkdown(f.in, rep);
  EXPECT_NE(md.find("judged by TTFA"), std::string::npos) << md;
  EXPECT_NE(md.find("| TTFA | 300 |"), std::string::npos) << md;
  // Judged by TTFT the same run passes: the thinking's first token came fast.
  f.o.metric = SloMetric::kTtft;
  EXPECT_TRUE(BuildReport(f.in).verdicts[0].pass);
}

// Conversations: first turns (index < N) against returning ones, and the returning turns'
// cached / restored shares from the server's timings, worked out by hand.
TEST(Conversations, FirstAgainstReturningTurnsAndCacheShares) {
  auto turn = [](int64_t index, double ttft, int64_t prompt, int64_t cached, int64_t restored) {
    RequestRecord r = Ok(ttft, ttft + 50, 5);
    r.index = index;
    r.x.timings = {{"tokens", {{"prompt", prompt}, {"cached", cached}, {"restored", restored}}}};
    return r;
  };
  // Two users: indexes 0, 1 are first turns; 2..5 returning (turns 1 and 2).
  OneStep f(2, 6, 1, {turn(0, 300, 100, 0, 0), turn(1, 500, 100, 0, 0), turn(2, 40, 200, 150, 50),
                      turn(3, 60, 200, 150, 0), turn(4, 20, 300, 250, 100), turn(5, 80, 300, 250, 150)});
  f.o.mode = LoadMode::kConcurrency;
  f.o.workload.conversations = 2;
  const std::vector<ConversationRow> rows = ConversationRows(f.in);
  ASSERT_EQ(rows.size(), 1u);
  const ConversationRow& r = rows[0];
  EXPECT_EQ(r.first_turns, 2);
  EXPECT_EQ(r.returning_turns, 4);
  EXPECT_EQ(r.max_turn, 2);
  EXPECT_EQ(r.first.p50, 300);
  EXPECT_EQ(r.returning.p50, 40);   // nearest rank: 2nd of 20, 40, 60, 80
  EXPECT_EQ(r.returning.p95, 80);
  EXPECT_DOUBLE_EQ(r.cached_share, 800.0 / 1000.0);
  EXPECT_DOUBLE_EQ(r.restored_share, 300.0 / 1000.0);
  const std::string md = ConversationsMarkdown(f.in, rows);
  EXPECT_NE(md.find("| concurrency 2 | A | 2 | 300 | 500 | 4 | 40.0 | 80.0 | 80% | 30% |"),
            std::string::npos) << md;
  EXPECT_EQ(ConversationsJson(rows)[0]["returning_ttft_ms"]["p95"], 80);
  // Not a conversation run: no section.
  f.o.workload.conversations = 0;
  EXPECT_TRUE(ConversationRows(f.in).empty());
}

}  // namespace
}  // namespace lifeline::loadgen
