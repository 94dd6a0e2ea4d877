// lifeline bench: load generator for any OpenAI-compatible server (Lifeline, llama.cpp server,
// vLLM, ...). Wiring only: flags -> loadgen::RunOptions -> RunLoad -> reports. The load
// generator speaks HTTP only; --serve starts a local `lifeline serve` child process.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/impact.h"
#include "analysis/plot.h"
#include "app/commands.h"
#include "bench/loadgen/local_server.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/runner.h"

namespace lifeline::app {
namespace {

namespace lg = loadgen;

struct BenchFlags {
  std::vector<std::string> targets;
  std::string serve_model;
  std::vector<std::string> serve_args;
  std::optional<double> rate;
  std::optional<int64_t> concurrency;
  int64_t conversations = 0;   // WorkloadSpec::conversations (closed loop, one per user)
  double think_time_ms = 0;
  int64_t system_words = 200;
  int64_t reply_words = 32;
  int64_t agent_tool_words = 0;  // WorkloadSpec::agent_tool_words (agent loops)
  double burstiness = 1;
  std::string sweep;
  std::optional<double> duration_s;
  std::optional<int64_t> requests;
  uint64_t seed = 1;
  std::string prompt_len = "32";
  std::string output_len = "64";
  std::string api = "completions";
  bool output_len_given = false;  // --output-len on the command line (refused for retrieval)
  std::optional<int64_t> batch_inputs;    // WorkloadSpec::batch_inputs (--api embeddings)
  std::string encoding_format;            // WorkloadSpec::encoding_format (--api embeddings)
  std::optional<int64_t> documents;       // WorkloadSpec::documents (--api rerank)
  std::optional<int64_t> document_words;  // WorkloadSpec::document_words (--api rerank)
  bool no_stream = false;
  bool no_usage = false;
  bool ignore_eos = false;
  std::string slo_class;
  std::string user_role;
  bool slo_in_body = false;
  std::vector<std::string> headers;
  std::string extra_body;
  std::string api_key;
  std::string prompts_file;
  std::optional<int64_t> thinking_budget;  // thinking_budget_tokens of every request
  std::string reasoning_effort;            // reasoning_effort of every request
  double threshold_ms = 387;
  std::string slo_metric;  // "" = the default for the requests: ttft streamed, e2e not
  double timeout_s = 60;
  int64_t max_in_flight = 4096;
  std::string input_buckets = "128,512,2048";
  bool no_early_stop = false;
  double cooldown_s = 0.5;
  std::string out_dir;
  std::string progress = "auto";
  double serve_timeout_s = 120;
  std::string fit;            // analyze decay --json output: adds the latency-economics section
  std::string threshold_fit;  // analyze threshold --json output
  std::string scenario;       // scenario of threshold_fit (default: --slo-class, or the only one)
};

int FlagError(const Status& s) {
  std::fprintf(stderr, "lifeline bench: %s\n", s.message().c_str());
  return 2;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "lifeline bench: %s\n", s.ToString().c_str());
  return 1;
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Result<std::vector<int64_t>> ParseBuckets(const std::string& text) {
  LL_ASSIGN_OR_RETURN(std::vector<double> v, lg::ParseLoadList("--input-buckets", text));
  std::vector<int64_t> out;
  for (double x : v) {
    if (x != std::floor(x)) return InvalidArgument("--input-buckets '" + text + "': whole numbers only");
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

// --slo-metric when given, else the default for the requests (whether they stream depends on
// --no-stream and --extra-body, so this runs after the workload is parsed).
Status ChooseSloMetric(const std::string& flag, lg::RunOptions* o) {
  o->metric_from_flag = !flag.empty();
  if (flag.empty()) o->metric = lg::DefaultSloMetric(o->workload);
  else if (flag == "ttft") o->metric = lg::SloMetric::kTtft;
  else if (flag == "e2e") o->metric = lg::SloMetric::kE2e;
  else if (flag == "ttfa") o->metric = lg::SloMetric::kTtfa;
  else return InvalidArgument("--slo-metric '" + flag + "': expected ttft, ttfa or e2e");
  return Status::Ok();
}

// Flags -> options (without targets).
Status BuildOptions(const BenchFlags& f, lg::RunOptions* o) {
  o->mode = f.concurrency || f.conversations > 0 ? lg::LoadMode::kConcurrency : lg::LoadMode::kRate;
  if (f.rate && f.concurrency) return InvalidArgument("--rate and --concurrency exclude each other");
  if (f.conversations > 0) {
    // Each user is one closed-loop client: the load is the number of conversations.
    if (f.rate || f.concurrency || !f.sweep.empty()) {
      return InvalidArgument("--conversations N sets the load (N users, closed loop): drop "
                             "--rate / --concurrency / --sweep");
    }
    o->loads = {static_cast<double>(f.conversations)};
  } else if (!f.sweep.empty()) {
    LL_ASSIGN_OR_RETURN(o->loads, lg::ParseLoadList("--sweep", f.sweep));
  } else if (f.concurrency) {
    o->loads = {static_cast<double>(*f.concurrency)};
  } else if (f.rate) {
    o->loads = {*f.rate};
  } else {
    return InvalidArgument("give a load: --rate R, --concurrency C or --sweep LIST");
  }
  if (f.burstiness != 1 && o->mode == lg::LoadMode::kConcurrency) {
    return InvalidArgument("--burstiness applies to --rate (open loop), not --concurrency");
  }
  o->burstiness = f.burstiness;
  o->requests = f.requests.value_or(0);
  o->duration_s = f.duration_s.value_or(0);
  if (!f.requests && !f.duration_s) o->requests = 50;
  o->seed = f.seed;
  o->timeout_s = f.timeout_s;
  o->threshold_ms = f.threshold_ms;
  o->early_stop = !f.no_early_stop;
  o->max_in_flight = f.max_in_flight;
  o->cooldown_s = f.cooldown_s;

  lg::WorkloadSpec& w = o->workload;
  LL_ASSIGN_OR_RETURN(w.api, lg::ParseApi("--api", f.api));
  if (f.output_len_given && lg::IsRetrievalApi(w.api)) {
    return InvalidArgument("--output-len: max_tokens of a generation; --api " +
                           std::string(lg::ApiName(w.api)) + " generates nothing");
  }
  w.batch_inputs = f.batch_inputs;
  w.encoding_format = f.encoding_format;
  w.documents = f.documents;
  w.document_words = f.document_words;
  LL_ASSIGN_OR_RETURN(w.prompt_words, lg::ParseLengthDist("--prompt-len", f.prompt_len));
  LL_ASSIGN_OR_RETURN(w.output_tokens, lg::ParseLengthDist("--output-len", f.output_len));
  w.stream = !f.no_stream;
  w.include_usage = !f.no_usage;
  w.ignore_eos = f.ignore_eos;
  w.slo_class = f.slo_class;
  w.user_role = f.user_role;
  w.slo_in_body = f.slo_in_body;
  w.api_key = f.api_key;
  for (const std::string& h : f.headers) {
    LL_ASSIGN_OR_RETURN(auto kv, lg::ParseHeader("--header", h));
    w.headers.push_back(std::move(kv));
  }
  if (!f.extra_body.empty()) {
    w.extra_body = nlohmann::json::parse(f.extra_body, nullptr, false);
    if (!w.extra_body.is_object()) {
      return InvalidArgument("--extra-body '" + f.extra_body + "': expected a JSON object");
    }
  }
  if (!f.prompts_file.empty()) {
    LL_ASSIGN_OR_RETURN(w.prompts, lg::LoadPromptsFile(f.prompts_file, &w.prompt_thinking));
  }
  w.thinking.budget_tokens = f.thinking_budget;
  w.conversations = f.conversations;
  w.think_time_ms = f.think_time_ms;
  w.system_words = f.system_words;
  w.reply_words = f.reply_words;
  w.agent_tool_words = f.agent_tool_words;
  w.thinking.reasoning_effort = f.reasoning_effort;
  LL_RETURN_IF_ERROR(ChooseSloMetric(f.slo_metric, o));
  for (const std::string& t : f.targets) {
    LL_ASSIGN_OR_RETURN(lg::TargetSpec spec, lg::ParseTargetSpec("--target", t));
    o->targets.push_back(std::move(spec));
  }
  if (f.progress != "auto" && f.progress != "always" && f.progress != "never") {
    return InvalidArgument("--progress '" + f.progress + "': expected auto, always or never");
  }
  if (o->targets.empty() && f.serve_model.empty()) {
    return InvalidArgument("--target: at least one target (or --serve MODEL.gguf) is needed");
  }
  if (o->targets.size() + (f.serve_model.empty() ? 0 : 1) > 16) {
    return InvalidArgument("--target: at most 16 targets");
  }
  if (!f.serve_model.empty()) o->targets.emplace_back();  // placeholder, filled after start
  return lg::ValidateRunOptions(*o);
}

void PrintProgress(const lg::Progress& p, lg::LoadMode mode, const char* metric) {
  char line[256];
  std::snprintf(line, sizeof line,
                "\r[step %d/%d %s] %5.1fs sent %lld done %lld in-flight %lld errors %lld P95 %s %s ms",
                p.step + 1, p.steps, lg::LoadName(mode, p.load).c_str(), p.elapsed_s,
                static_cast<long long>(p.sent), static_cast<long long>(p.done),
                static_cast<long long>(p.in_flight), static_cast<long long>(p.errors), metric,
                lg::FormatMs(p.slo_p95_ms).c_str());
  std::fprintf(stderr, "%-100s", line);
  std::fflush(stderr);
}

Result<nlohmann::json> ReadJson(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(flag + " '" + path + "': cannot open");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return InvalidArgument(flag + " '" + path + "': not valid JSON");
  return j;
}

// The fitted curves of --fit / --threshold-fit, read before any load so a bad file fails fast.
Result<analysis::ImpactModels> LoadImpactModels(const BenchFlags& f) {
  analysis::ImpactModels m;
  if (!f.fit.empty()) {
    LL_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson("--fit", f.fit));
    LL_ASSIGN_OR_RETURN(m.decay, analysis::DecayCurvesFromJson(j, f.fit));
  }
  if (!f.threshold_fit.empty()) {
    LL_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson("--threshold-fit", f.threshold_fit));
    LL_ASSIGN_OR_RETURN(m.abandon, analysis::AbandonCurveFromJson(j, f.threshold_fit, f.scenario,
                                                                  f.slo_class));
  }
  return m;
}

// The latency-economics section from the report's own JSON (the same path as `analyze impact`).
Status AddImpact(const analysis::ImpactModels& m, const lg::Report& report, lg::ReportInputs* in) {
  const nlohmann::json rj = lg::ReportJson(*in, report);
  LL_ASSIGN_OR_RETURN(analysis::ImpactReport r,
                      analysis::ComputeImpact(rj, "this run", m, analysis::ImpactOptions{}));
  in->extra_markdown = analysis::ImpactMarkdown(r);
  in->extra_json = analysis::ImpactJson(r);
  in->extra_html = analysis::ImpactPlot(m, r);
  return Status::Ok();
}

int RunBench(const BenchFlags& f) {
  lg::RunOptions o;
  if (Status s = BuildOptions(f, &o); !s.ok()) return FlagError(s);
  auto models = LoadImpactModels(f);
  if (!models.ok()) return FlagError(models.status());
  const bool impact = !f.fit.empty() || !f.threshold_fit.empty();
  lg::ReportInputs in;
  auto buckets = ParseBuckets(f.input_buckets);
  if (!buckets.ok()) return FlagError(buckets.status());
  in.input_buckets = *buckets;

  std::unique_ptr<lg::LocalServer> local;
  std::optional<lg::ModelFacts> local_facts;
  if (!f.serve_model.empty()) {
    const std::string self = lg::SelfExecutable();
    if (self.empty()) return Fail(Internal("cannot find this executable to start `serve`"));
    const std::string name = std::filesystem::path(f.serve_model).stem().string();
    std::vector<std::string> args = {"--model", name + "=" + f.serve_model};
    args.insert(args.end(), f.serve_args.begin(), f.serve_args.end());
    std::fprintf(stderr, "lifeline bench: starting lifeline serve for %s\n", f.serve_model.c_str());
    auto started = lg::LocalServer::Start(self, args, f.serve_timeout_s);
    if (!started.ok()) return Fail(started.status());
    local = std::move(started).value();
    auto spec = lg::ParseTargetSpec("--serve", local->url() + ",model=" + name + ",label=lifeline");
    if (!spec.ok()) return Fail(spec.status());
    o.targets.back() = *spec;
    if (auto inspected = lg::InspectModel(self, f.serve_model); inspected.ok()) {
      local_facts = lg::FactsFromInspectJson(*inspected);
    }
  }

  // Reachability and model facts before any load.
  for (const lg::TargetSpec& t : o.targets) {
    bool reachable = false;
    lg::TargetFacts facts = lg::FetchModelFacts(t.url, t.model, f.api_key, 10, &reachable);
    if (!reachable) {
      return Fail(IoError("target '" + t.label + "' (" + t.url.ToString() +
                          ") is not reachable: " + facts.models_status));
    }
    in.facts.push_back(std::move(facts));
  }
  if (local_facts) {
    lg::ModelFacts& m = in.facts.back().model;
    if (m.parameters.empty()) m.parameters = local_facts->parameters;
    if (m.quantization.empty()) m.quantization = local_facts->quantization;
    if (m.context_length == 0) m.context_length = local_facts->context_length;
    m.source += m.source.empty() ? "gguf" : " + gguf";
  }
  in.hardware = lg::LocalHardware();
  in.command_line = CommandLine();

  const bool show = f.progress == "always" || (f.progress == "auto" && ::isatty(STDERR_FILENO));
  const char* metric = lg::SloMetricName(o.metric);
  lg::ProgressFn progress;
  if (show) progress = [&](const lg::Progress& p) { PrintProgress(p, o.mode, metric); };
  auto run = lg::RunLoad(o, progress);
  if (show) std::fprintf(stderr, "\n");
  if (!run.ok()) return Fail(run.status());
  for (size_t k = 0; k < o.targets.size(); ++k) {
    lg::FetchSloEvents(o.targets[k].url, f.api_key, 10, run->start_unix_ms, &in.facts[k]);
  }
  if (local) local->Stop();

  in.options = &o;
  in.run = &*run;
  const lg::Report report = lg::BuildReport(in);
  if (impact) {
    if (Status s = AddImpact(*models, report, &in); !s.ok()) return Fail(s);
  }
  std::fputs(lg::ReportMarkdown(in, report).c_str(), stdout);
  if (!f.out_dir.empty()) {
    if (Status s = lg::WriteReports(f.out_dir, in, report); !s.ok()) return Fail(s);
    std::fprintf(stderr, "lifeline bench: wrote %s/report.{json,md,html}\n", f.out_dir.c_str());
  }
  return 0;
}

}  // namespace

CommandFn RegisterBench(CLI::App& root) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = root.add_subcommand(
      "bench", "Load-test OpenAI-compatible servers: latency percentiles, goodput, SLO sweep");
  cmd->add_option("--target", f->targets,
                  "URL[,model=NAME][,label=NAME][,params=N][,quant=Q][,hw=TEXT] (repeatable; "
                  "several targets run interleaved)");
  cmd->add_option("--serve", f->serve_model, "Start a local `lifeline serve` on this GGUF for the run");
  cmd->add_option("--serve-arg", f->serve_args, "Extra argument for --serve (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--serve-timeout", f->serve_timeout_s, "Seconds to wait for --serve to listen")
      ->capture_default_str();
  cmd->add_option("--rate", f->rate, "Open loop: requests/s per target (Poisson or gamma)");
  cmd->add_option("--burstiness", f->burstiness,
                  "Gamma shape of the gaps: 1 = Poisson, < 1 burstier")->capture_default_str();
  cmd->add_option("--concurrency", f->concurrency,
                  "Closed loop: requests in flight per target (with --sweep: sweep concurrency)");
  cmd->add_option("--conversations", f->conversations,
                  "Multi-turn: N users, each a growing conversation (closed loop; request i is "
                  "turn i/N of user i%N, sharing a system prefix; per-turn TTFT and cache shares "
                  "in the report)");
  cmd->add_option("--think-time-ms", f->think_time_ms,
                  "Conversations: pause between a user's answer and its next turn")
      ->capture_default_str();
  cmd->add_option("--system-words", f->system_words,
                  "Conversations: words of the system text every user's prompt starts with")
      ->capture_default_str();
  cmd->add_option("--reply-words", f->reply_words,
                  "Conversations: words of each earlier turn's (synthetic) reply in the history")
      ->capture_default_str();
  cmd->add_option("--agent-tool-words", f->agent_tool_words,
                  "With --conversations: each user is an agent loop -- its task, then per earlier "
                  "step a tool call and a tool result of N words (chat API, the `lookup` tool)")
      ->capture_default_str();
  cmd->add_option("--sweep", f->sweep, "Loads to step through, e.g. 1,2,4,8; reports the knee");
  cmd->add_option("--duration", f->duration_s, "Seconds per step");
  cmd->add_option("--requests", f->requests, "Requests per target and step (default 50)");
  cmd->add_option("--seed", f->seed, "Schedule and prompt seed")->capture_default_str();
  cmd->add_option("--prompt-len", f->prompt_len,
                  "Prompt length in words: N, uniform:LO:HI, normal:MEAN:SD (embeddings: each "
                  "input; rerank: the query)")
      ->capture_default_str();
  cmd->add_option("--output-len", f->output_len, "max_tokens: N, uniform:LO:HI, normal:MEAN:SD")
      ->capture_default_str();
  cmd->add_option("--api", f->api,
                  "completions, chat, embeddings (POST /v1/embeddings) or rerank (POST "
                  "/v1/rerank); embeddings and rerank are not streamed: latency = the whole "
                  "request")
      ->capture_default_str();
  cmd->add_option("--batch-inputs", f->batch_inputs,
                  "--api embeddings: inputs per request, each of --prompt-len words (default 1, "
                  "at most 2048)");
  cmd->add_option("--encoding-format", f->encoding_format,
                  "--api embeddings: float (default) or base64");
  cmd->add_option("--documents", f->documents,
                  "--api rerank: documents per request, with a query of --prompt-len words "
                  "(default 8, at most 1024)");
  cmd->add_option("--document-words", f->document_words,
                  "--api rerank: words of each document (default 64, at most 100000)");
  cmd->add_flag("--no-stream", f->no_stream,
                "Non-streaming requests (TTFT = TTFA = whole response)");
  cmd->add_flag("--no-usage", f->no_usage, "Do not send stream_options.include_usage");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Send ignore_eos: true (generate max_tokens)");
  cmd->add_option("--slo-class", f->slo_class, "X-SLO-Class header value");
  cmd->add_option("--user-role", f->user_role, "X-User-Role header value");
  cmd->add_flag("--slo-in-body", f->slo_in_body, "Also send slo_class / user_role body fields");
  cmd->add_option("--header", f->headers, "Extra request header 'NAME: VALUE' (repeatable)");
  cmd->add_option("--extra-body", f->extra_body, "JSON object merged into every request body");
  cmd->add_option("--api-key", f->api_key, "Authorization: Bearer KEY");
  cmd->add_option("--prompts", f->prompts_file,
                  "Prompts file: one per line, or JSONL {\"prompt\": ...} (optionally with "
                  "\"thinking_budget_tokens\" / \"reasoning_effort\" per line)");
  cmd->add_option("--thinking-budget", f->thinking_budget,
                  "Send thinking_budget_tokens N with every chat request (-1 unlimited, 0 no "
                  "thinking)");
  cmd->add_option("--reasoning-effort", f->reasoning_effort,
                  "Send reasoning_effort with every chat request: minimal, low, medium, high");
  cmd->add_option("--threshold-ms", f->threshold_ms, "SLO threshold on the P95")->capture_default_str();
  cmd->add_option("--slo-metric", f->slo_metric,
                  "ttft, ttfa (first answer token, after any thinking) or e2e (default: ttft "
                  "when requests stream, e2e with --no-stream)");
  cmd->add_option("--timeout", f->timeout_s, "Per-request timeout, seconds")->capture_default_str();
  cmd->add_option("--max-in-flight", f->max_in_flight, "Client cap on open requests")
      ->capture_default_str();
  cmd->add_option("--input-buckets", f->input_buckets,
                  "Upper edges (words) of the verdict table's input classes")->capture_default_str();
  cmd->add_flag("--no-early-stop", f->no_early_stop, "Run every sweep step to the end");
  cmd->add_option("--cooldown", f->cooldown_s, "Seconds between sweep steps")->capture_default_str();
  cmd->add_option("--out", f->out_dir, "Write report.json, report.md, report.html here");
  cmd->add_option("--progress", f->progress, "auto (on a terminal), always, never")
      ->capture_default_str();
  cmd->add_option("--fit", f->fit, "`analyze decay --json` output: add expected CTR/CVR/"
                                   "conversions per configuration to the reports");
  cmd->add_option("--threshold-fit", f->threshold_fit,
                  "`analyze threshold --json` output: add expected abandonment");
  cmd->add_option("--scenario", f->scenario,
                  "Scenario of --threshold-fit (default: --slo-class, or the only one)");
  return [f, cmd] {
    f->output_len_given = cmd->count("--output-len") > 0;
    return RunBench(*f);
  };
}

}  // namespace lifeline::app
