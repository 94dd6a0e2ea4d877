// The benchmark's results: per target and step summaries (latency percentiles, throughput,
// goodput, errors, the three-layer split), the knee of a sweep, the SLA verdict table and the
// ratios between targets; written as report.json (schema in docs/bench.md), report.md and a
// self-contained report.html (inline SVG, no network fetches).
//
// Ownership: Report holds values computed from a RunData it does not keep; the writers borrow
// both. Thread-safety: none needed. Failure: WriteReports returns Io naming the file.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/server_facts.h"
#include "bench/loadgen/stats.h"

namespace lifeline::loadgen {

struct LayerStats {
  double mean_ms = 0;  // NaN when no request carried server timings
  double p95_ms = 0;
};

struct TargetStepSummary {
  int step = 0;
  int target = 0;
  double load = 0;
  bool ran = false;
  bool stopped_early = false;
  int64_t planned = -1;
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t errors = 0;     // failed requests, excluding the ones an early stop cancelled
  int64_t http_429 = 0;
  int64_t cancelled = 0;  // cancelled by the early stop
  int64_t finished = 0;   // ok + errors: requests that ended, not cancelled by an early stop
  int64_t met_slo = 0;    // finished requests whose SLO metric is <= the threshold
  int64_t refused = 0;    // errors that were HTTP 429 or 503: the server declined the request
  int64_t failed = 0;     // every other error (errors = refused + failed)
  std::map<std::string, int64_t> errors_by_kind;
  // Successful requests by the model that served them (X-Served-Model, else the body's
  // `model`; "" when the server named none): shows how much a cascade routed elsewhere.
  std::map<std::string, int64_t> served_by;
  // Over successful requests (ITL: every gap). TTFA: the first answer token, after any
  // thinking (TTFT counts thinking tokens too); without thinking the two are equal.
  LatencySummary ttft, ttfa, tpot, itl, e2e;
  double wall_s = 0;
  double throughput_rps = 0;  // successful requests / wall_s
  double output_tok_s = 0;    // output tokens of successful requests / wall_s
  // Retrieval: the embeddings inputs / rerank documents of successful requests / wall_s.
  double inputs_per_s = 0;
  // The time the load was offered over (OfferedDurationS): goodput's denominator.
  double offered_duration_s = 0;
  double goodput_rps = 0;     // requests meeting the SLO / offered_duration_s
  // (met_slo - refused - failed) / offered_duration_s, floored at 0 (SmoothGoodputRps).
  double smooth_goodput_rps = 0;
  double slo_p95_ms = 0;      // SLO metric, failures as +inf (what the verdict and knee use)
  // The same over the finished requests only, without the early stop's verdict of +inf: what
  // a target that stopped early did measure before the stop.
  double measured_slo_p95_ms = 0;
  bool small_sample = false;  // finished < kMinRequestsForP95: the P95 is the slowest request
  int64_t layered = 0;        // successful requests that carried server timings
  LayerStats network, service, compute;
};

struct VerdictRow {
  int target = 0;
  int step = 0;
  std::string model, parameters, quantization, hardware;
  std::string scenario;      // "rate 4 req/s", "concurrency 8", plus the SLO class
  std::string input_length;  // "<= 128 words (median 96)"
  int64_t requests = 0;
  int64_t finished = 0;      // requests not cancelled by an early stop
  double p95_ms = 0;         // SLO metric; +inf when the step stopped early
  double measured_p95_ms = 0;  // SLO metric over the finished requests, even if stopped early
  // Successful requests, whichever metric judges.
  double ttft_p95_ms = 0, ttfa_p95_ms = 0, e2e_p95_ms = 0;
  double target_ms = 0;
  bool pass = false;
  bool stopped_early = false;
  bool small_sample = false;  // finished < kMinRequestsForP95
};

struct RatioRow {
  int step = 0;
  int target = 0;  // compared with target 0 (the baseline)
  double ttft_p95 = 0, e2e_p95 = 0, output_tok_s = 0, goodput = 0;  // target / baseline
  double ttfa_p95 = 0;
  double inputs_per_s = 0;  // retrieval runs
};

struct ReportInputs {
  const RunOptions* options = nullptr;
  const RunData* run = nullptr;
  std::vector<TargetFacts> facts;  // one per target
  HardwareFacts hardware;
  std::vector<int64_t> input_buckets = {128, 512, 2048};  // upper edges of input classes
  std::string command_line;
  // An optional section computed outside the load generator (the latency-economics impact of
  // `bench --fit`): Markdown appended to report.md and the HTML page, raw HTML (an inline SVG)
  // after the charts, and a JSON value stored as "impact" in report.json. Empty/null: none.
  std::string extra_markdown;
  std::string extra_html;
  nlohmann::json extra_json;
};

// The answer for one offered load that opens the reports: the targets that meet the SLO there
// (ship one of them), the ones that miss and by how much, the ones not run.
struct LoadAnswer {
  int step = 0;
  double load = 0;
  std::vector<int> pass, miss, not_run;  // target indices
  // "At 2 req/s ship A (P95 TTFT 140 ms <= 387 ms); B misses by 715 ms at P95 (TTFT 1102 ms
  // > 387 ms; stopped early past the cliff after 12 of 50 requests; small sample: ...)."
  std::string text;
};

struct Report {
  std::vector<TargetStepSummary> summaries;  // step-major, then target
  std::vector<std::optional<double>> knees;  // one per target (sweeps)
  std::vector<VerdictRow> verdicts;
  std::vector<RatioRow> ratios;
  std::vector<LoadAnswer> answers;           // one per step
};

// Summary of one target's records at one step: throughput over `wall_s` (step start to the
// target's last response), goodput over `offered_duration_s`.
TargetStepSummary SummarizeTargetStep(const std::vector<const RequestRecord*>& records,
                                      double threshold_ms, SloMetric metric, double wall_s,
                                      double offered_duration_s);

// The duration over which a step offered its load to one target. Open loop: the planned
// arrivals divided by the offered rate (N / R with --requests N; with --duration S the arrivals
// drawn in S over R, about S), so goodput = rate x the share of planned requests that met the
// SLO and can never exceed the offered rate, however early the target stopped or however
// tightly the random arrivals clustered. The wall time to the last response is no such bound:
// a step stopped early after a few fast requests, or a short Poisson draw, shrinks it and
// inflates every rate divided by it. Closed loop (no offered rate): the wall time, and at
// least --duration when one was given, so an early stop does not shorten it either.
double OfferedDurationS(const RunOptions& o, double load, const TargetStep& ts);

Report BuildReport(const ReportInputs& in);

// The summary (report_summary.cpp): one answer per step from its target summaries
// (step-major, as in Report::summaries); the Markdown section (one line per load, then a
// table with TTFT, TTFA and e2e P95 of every target); report.json's "summary_by_load".
std::vector<LoadAnswer> BuildAnswers(const ReportInputs& in,
                                     const std::vector<TargetStepSummary>& summaries);
std::string SummaryMarkdown(const ReportInputs& in, const Report& report);

// Conversations (report_conversations.cpp; empty without WorkloadSpec::conversations): per
// target and step, first vs returning turns' TTFT and the returning turns' cached / restored
// prompt-token shares from the server's timings (NaN when the server reports none).
struct ConversationRow {
  int step = 0;
  int target = 0;
  int64_t first_turns = 0, returning_turns = 0, max_turn = 0;
  LatencySummary first, returning;
  int64_t returning_prompt_tokens = 0;
  double cached_share = std::nan("");
  double restored_share = std::nan("");
};
std::vector<ConversationRow> ConversationRows(const ReportInputs& in);
std::string ConversationsMarkdown(const ReportInputs& in, const std::vector<ConversationRow>& rows);
nlohmann::json ConversationsJson(const std::vector<ConversationRow>& rows);
nlohmann::json AnswersJson(const ReportInputs& in, const Report& report);

nlohmann::json ReportJson(const ReportInputs& in, const Report& report);
std::string ReportMarkdown(const ReportInputs& in, const Report& report);
std::string ReportHtml(const ReportInputs& in, const Report& report);  // report_html.cpp

// Writes DIR/report.json, DIR/report.md, DIR/report.html (creating DIR).
Status WriteReports(const std::string& dir, const ReportInputs& in, const Report& report);

// Helpers shared by the writers.
std::string LoadName(LoadMode mode, double load);  // "4 req/s" / "concurrency 8"
std::string FormatMs(double ms);                   // "12.3", "inf", "-"
std::string FormatShare(int64_t part, int64_t whole);  // "25%", "-" when whole <= 0
std::string TableCell(const std::string& s);       // a Markdown table cell ("-" when empty)
std::string MetricLabel(SloMetric m);              // "TTFT" / "e2e" / "TTFA"
// The caveat beside a verdict on fewer than kMinRequestsForP95 finished requests.
std::string SmallSampleText(int64_t finished);
// Which metric the verdicts judge by and why: "--slo-metric" or the default for the requests.
std::string MetricChoiceText(const RunOptions& o);
// A retrieval run counts what it had answered per second where generation counts output
// tokens: "inputs/s" (embeddings) or "documents/s" (rerank), and the JSON key
// "inputs_per_s" / "documents_per_s". ApiText: the summary's line on what a retrieval request
// was ("" for generation).
std::string ItemsPerSecondLabel(Api api);
std::string ItemsPerSecondKey(Api api);
std::string ApiText(const WorkloadSpec& w);

}  // namespace lifeline::loadgen
