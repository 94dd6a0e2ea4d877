// lifeline serve: load one or more models, start one engine loop per model (and one client
// thread per remote OpenAI-compatible backend) and the HTTP/SSE front end, then wait for
// signals (docs/operations.md "Signals"): SIGINT/SIGTERM drain (a second one exits at once),
// SIGUSR1 writes a one-line state dump to stderr, SIGHUP reopens the request log (logged and
// otherwise ignored), SIGPIPE is ignored. None of them is left to its default action, which would end the process without
// a log line or a drain.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli_common.h"
#include "app/commands.h"
#include "api/http_server.h"
#include "api/router.h"
#include "economics/live_economics.h"
#include "slo/autotune.h"
#include "serving/serving_hub.h"
#include "serving/kv_disk_store.h"
#include "serving/model_engine.h"
#include "modelgen/make_model.h"

namespace lifeline::app {
namespace {

struct ServeFlags {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> models;  // NAME=PATH or PATH
  int64_t n_ctx = 0;
  // The engine's own defaults, so the flags' defaults cannot drift from them.
  int64_t kv_memory_mib = static_cast<int64_t>(serving::ModelEngineOptions{}.kv_memory_bytes >> 20);
  int32_t max_running = serving::ModelEngineOptions{}.max_running;
  int32_t speculate = serving::ModelEngineOptions{}.spec_tokens;
  bool speculate_given = false;       // --speculate on the command line (even 0)
  std::vector<std::string> drafts;    // --draft NAME=PATH or PATH (the first model's)
  int64_t spec_step_tokens = serving::ModelEngineOptions{}.spec_step_tokens;
  bool spec_always = false;
  int64_t max_step_tokens = serving::ModelEngineOptions{}.max_step_tokens;
  int32_t max_waiting = serving::ModelEngineOptions{}.max_waiting;
  int32_t default_max_tokens = serving::ModelEngineOptions{}.default_max_tokens;
  serving::ChatTemplateChoice chat_template;  // --chat-template / --chat-template-file
  std::string reasoning_format = "auto";      // --reasoning-format
  std::string pooling = "auto";               // --pooling
  std::vector<std::string> api_keys;   // --api-key, repeatable
  std::string api_key_file;            // more keys, one per line
  std::vector<std::string> cors_origins;
  int io_threads = 1;
  int prep_threads = api::ServerOptions{}.prep_threads;
  std::string reasoning_field = "reasoning_content";
  std::string request_log;           // --request-log FILE|-: one JSON line per request
  int64_t request_log_max_mib = 100;
  int request_log_keep = 5;
  int64_t economics_refit_s = 300;      // live cliff refit interval; 0 = no refits
  int64_t economics_window = 50'000;    // finished requests kept for outcome joins and fits
  int64_t max_prep_queued = static_cast<int64_t>(api::ServerLimits{}.max_prep_queued);
  int64_t max_body_bytes = 1 << 20;
  int max_connections = api::ServerLimits{}.max_connections;
  int drain_timeout_s = 10;
  EngineFlags engine;  // -t (per model), --isa, --kv-type, --pin / --cpus
  std::string slo_config;              // TOML file (docs/slo.md); empty: built-in defaults
  std::vector<std::string> cascade;    // model names, heavy -> light
  std::vector<std::string> remotes;    // NAME=URL#MODEL
  int64_t remote_connect_timeout_ms = 5000;
  int64_t remote_timeout_ms = 300000;
  bool no_mmap = false;                // read model files into memory instead of mapping them
  int64_t prefix_cache_reserve_tokens = 4096;  // ModelEngineOptions; -1: unlimited
  int64_t prefix_cache_ram_mib = 0;  // the prefix cache's RAM tier per model; 0: off
  bool prefix_cache_ram_q8 = false;  // its copies as Q8_0
  std::string prefix_cache_dir;      // its disk tier's folder; "": off
  int64_t prefix_cache_disk_mib = 4096;
};

// Drafted tokens per decode when --draft is given without --speculate.
constexpr int32_t kDraftModelSpecTokens = 4;

// --draft flags by served model name: NAME=PATH, or a bare PATH for the first --model.
Result<std::map<std::string, std::string>> DraftPaths(const ServeFlags& f) {
  std::map<std::string, std::string> out;
  if (f.drafts.empty()) return out;
  if (f.speculate_given && f.speculate == 0) {
    return InvalidArgument("--draft: speculation is off (--speculate 0); give --speculate >= 1 "
                           "or leave it out (a draft model then drafts 4 tokens)");
  }
  std::vector<std::string> names;
  for (const std::string& spec : f.models) {
    const auto eq = spec.find('=');
    names.push_back(eq == std::string::npos ? std::filesystem::path(spec).stem().string()
                                            : spec.substr(0, eq));
  }
  for (const std::string& spec : f.drafts) {
    const auto eq = spec.find('=');
    const bool named = eq != std::string::npos && !names.empty() &&
                       std::find(names.begin(), names.end(), spec.substr(0, eq)) != names.end();
    if (names.empty()) return InvalidArgument("--draft: needs a --model to draft for");
    if (eq != std::string::npos && !named && !std::filesystem::exists(spec)) {
      return InvalidArgument("--draft: no --model named '" + spec.substr(0, eq) + "' (in '" +
                             spec + "')");
    }
    const std::string name = named ? spec.substr(0, eq) : names.front();
    const std::string path = named ? spec.substr(eq + 1) : spec;
    if (path.empty()) {
      return InvalidArgument("--draft: expected NAME=PATH.gguf or PATH.gguf, got '" + spec + "'");
    }
    if (!out.emplace(name, path).second) {
      return InvalidArgument("--draft: model '" + name + "' has two draft models");
    }
  }
  return out;
}

// The config file's (or the defaults) plus one remote [[models]] entry per --remote flag.
Result<slo::SloConfig> LoadSloConfig(const ServeFlags& f) {
  slo::SloConfig config = slo::DefaultSloConfig();
  if (!f.slo_config.empty()) {
    LL_ASSIGN_OR_RETURN(config, slo::LoadSloConfigFile(f.slo_config));
    // Before anything loads: a [[models]] path that names no readable file is a mistake in
    // the file, not something to find out from the first request.
    LL_RETURN_IF_ERROR(slo::CheckModelFiles(config, f.slo_config));
  }
  for (const std::string& spec : f.remotes) {
    const auto eq = spec.find('=');
    const auto hash = spec.rfind('#');
    if (eq == std::string::npos || hash == std::string::npos || hash < eq || eq == 0 ||
        hash == eq + 1 || hash + 1 == spec.size()) {
      return InvalidArgument("--remote: expected NAME=URL#MODEL, got '" + spec + "'");
    }
    slo::ModelEntry m;
    m.name = spec.substr(0, eq);
    m.url = spec.substr(eq + 1, hash - eq - 1);
    m.remote_model = spec.substr(hash + 1);
    m.in_cascade = false;  // only --cascade (or the file) puts it in the cascade
    if (config.FindModel(m.name) != nullptr) {
      return InvalidArgument("--remote: model name '" + m.name + "' is already configured");
    }
    config.models.push_back(std::move(m));
  }
  return config;
}

// --cascade names the cascade order (heavy -> light) among the local and remote model
// names; models not named there are served only when asked for.
Result<slo::SloConfig> ApplyCascade(const ServeFlags& f, slo::SloConfig config,
                                    const std::vector<std::string>& member_names) {
  if (f.cascade.empty()) return config;
  std::vector<slo::ModelEntry> ordered;
  for (const std::string& name : f.cascade) {
    if (std::find(member_names.begin(), member_names.end(), name) == member_names.end()) {
      return InvalidArgument("--cascade: '" + name + "' is not a --model or remote model name");
    }
    for (const auto& m : ordered) {
      if (m.name == name) return InvalidArgument("--cascade: '" + name + "' listed twice");
    }
    const slo::ModelEntry* existing = config.FindModel(name);
    slo::ModelEntry m = existing != nullptr ? *existing : slo::ModelEntry{};
    m.name = name;
    if (m.path.empty() && m.url.empty()) m.path = "local";
    m.in_cascade = true;
    ordered.push_back(std::move(m));
  }
  for (slo::ModelEntry m : config.models) {
    if (std::find(f.cascade.begin(), f.cascade.end(), m.name) != f.cascade.end()) continue;
    m.in_cascade = false;
    ordered.push_back(std::move(m));
  }
  config.models = std::move(ordered);
  return config;
}

// --api-key values and the keys of --api-key-file, together.
Result<std::vector<std::string>> ApiKeys(const ServeFlags& f) {
  std::vector<std::string> keys;
  for (const std::string& k : f.api_keys) {
    LL_ASSIGN_OR_RETURN(std::vector<std::string> one, api::ParseApiKeys(k, "--api-key"));
    if (one.size() != 1 || one[0] != k) {
      return InvalidArgument("--api-key: a key is 1..256 visible ASCII characters without spaces");
    }
    keys.push_back(k);
  }
  if (!f.api_key_file.empty()) {
    std::ifstream in(f.api_key_file, std::ios::binary);
    if (!in) return NotFound("--api-key-file: cannot read " + f.api_key_file);
    std::string text;
    constexpr size_t kMaxFileBytes = 1 << 20;
    text.resize(kMaxFileBytes + 1);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) {
      return InvalidArgument("--api-key-file: " + f.api_key_file + " is larger than 1 MiB");
    }
    LL_ASSIGN_OR_RETURN(std::vector<std::string> more,
                        api::ParseApiKeys(text, "--api-key-file " + f.api_key_file));
    keys.insert(keys.end(), more.begin(), more.end());
  }
  return keys;
}

// The signals `serve` waits for with sigwait. Blocked in every thread (the mask is
// inherited, so it is set before any thread starts): they are only ever taken by sigwait,
// on an ordinary thread, so what they do never runs inside a signal handler.
sigset_t ServeSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&sigs, sig);
  return sigs;
}

// SIGUSR1: one line on stderr, read through the same thread-safe accessors /metrics and the
// dashboard use.
void DumpState(const api::HttpServer& http, const serving::ServingHub& service) {
  nlohmann::json state = service.StateJson();
  const api::LedgerSnapshot ledger = http.Ledger();
  state["requests"] = {{"accepted", ledger.accepted},
                       {"completed", ledger.completed},
                       {"errored", ledger.errored},
                       {"cancelled", ledger.cancelled},
                       {"in_flight", ledger.in_flight()}};
  std::fprintf(stderr, "lifeline serve: state %s\n",
               state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// SIGHUP conventionally asks a daemon to reopen its log file: the request log is reopened
// (after an outside rotator moved it away); a hangup of the terminal serve was started from
// must not end the requests in flight.
void OnHangup(api::RequestLog* request_log) {
  if (request_log != nullptr && request_log->path() != "-") {
    request_log->Reopen();
    std::fprintf(stderr, "lifeline serve: SIGHUP: reopening the request log %s\n",
                 request_log->path().c_str());
  } else {
    std::fprintf(stderr, "lifeline serve: SIGHUP ignored (no request log file to reopen)\n");
  }
}

int Fail(const Status& s) {
  std::fprintf(stderr, "lifeline serve: %s\n", s.ToString().c_str());
  return 1;
}

// With no --model, serve a small synthetic model generated once into a cache directory, so
// the README's run command works on a fresh machine without downloads.
Result<std::string> DefaultModelPath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string dir = std::string(xdg && *xdg ? xdg : (home ? std::string(home) + "/.cache" : "/tmp")) + "/lifeline";
  const std::string path = dir + "/default-llama-q8_0.gguf";
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  std::fprintf(stderr, "lifeline serve: no --model given; writing a synthetic default model to %s\n",
               path.c_str());
  modelgen::MakeModelOptions o;
  o.shape.arch = "llama";
  o.shape.dim = 256;
  o.shape.n_layers = 4;
  o.shape.n_head = 8;
  o.shape.n_head_kv = 2;
  o.shape.ffn = 768;
  o.shape.vocab = 32000;
  o.shape.ctx = 2048;
  o.ftype = modelgen::FileType::kMostlyQ8_0;
  o.seed = 1;
  o.threads = DefaultThreads();
  o.out_path = path + ".tmp";
  LL_RETURN_IF_ERROR(modelgen::MakeModel(o));
  std::filesystem::rename(o.out_path, path, ec);
  if (ec) return IoError("cannot move the default model into place: " + ec.message());
  return path;
}

int RunServe(ServeFlags f) {
  // Signals are handled by sigwait on this thread once the server listens; block them first
  // thing, before any thread starts (model loading, the default model's generation), so a
  // SIGHUP or SIGUSR1 during start-up waits for the loop instead of ending the process.
  const sigset_t sigs = ServeSignals();
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  // A peer that closed its socket is the write's error (EPIPE), not the process's end.
  std::signal(SIGPIPE, SIG_IGN);
  // Every flag is checked before anything slow or lasting happens (models loaded, the default
  // model written): `serve --port 99999` wrote a 21 MB model before it was refused.
  // Every model's pool gets the same pin list: models share the cores they are given.
  auto choice = ResolveEngineFlags(f.engine);
  if (!choice.ok()) return Fail(choice.status());
  if (f.port < 0 || f.port > 65535) return Fail(InvalidArgument("--port: must be in [0, 65535]"));
  for (const std::string& origin : f.cors_origins) {
    if (Status s = api::CheckCorsOrigin(origin); !s.ok()) return Fail(s);
  }
  if (f.kv_memory_mib < 1) return Fail(InvalidArgument("--kv-memory: must be >= 1 MiB"));
  if (f.prefix_cache_disk_mib < 1 || f.prefix_cache_disk_mib > (int64_t{1} << 30)) {
    return Fail(InvalidArgument("--prefix-cache-disk-mib: " +
                                std::to_string(f.prefix_cache_disk_mib) +
                                " MiB outside [1, 1073741824]"));
  }
  if (f.prefix_cache_ram_mib < 0 || f.prefix_cache_ram_mib > (int64_t{1} << 30)) {
    return Fail(InvalidArgument("--prefix-cache-ram: " + std::to_string(f.prefix_cache_ram_mib) +
                                " MiB outside [0, 1073741824]"));
  }
  if (Status s = CheckChatTemplateChoice(f.chat_template); !s.ok()) return Fail(s);
  if (f.economics_refit_s < 0 || f.economics_refit_s > 86'400) {
    return Fail(InvalidArgument("--economics-refit-s: must be in [0, 86400]"));
  }
  if (f.economics_window < 1000 || f.economics_window > 10'000'000) {
    return Fail(InvalidArgument("--economics-window: must be in [1000, 10000000]"));
  }
  if (f.request_log_max_mib < 0 || f.request_log_max_mib > (int64_t{1} << 30)) {
    return Fail(InvalidArgument("--request-log-max-mib: " + std::to_string(f.request_log_max_mib) +
                                " MiB outside [0, 1073741824]"));
  }
  std::shared_ptr<api::RequestLog> request_log;
  if (!f.request_log.empty()) {
    api::RequestLogOptions lo;
    lo.path = f.request_log;
    lo.max_file_bytes = f.request_log_max_mib << 20;
    lo.keep_files = f.request_log_keep;
    auto opened = api::RequestLog::Open(std::move(lo));
    if (!opened.ok()) return Fail(opened.status());
    request_log = std::move(opened).value();
  }
  if (f.remote_connect_timeout_ms < 1 || f.remote_connect_timeout_ms > 3'600'000) {
    return Fail(InvalidArgument("--remote-connect-timeout-ms: must be in [1, 3600000]"));
  }
  if (f.remote_timeout_ms < 1 || f.remote_timeout_ms > 86'400'000) {
    return Fail(InvalidArgument("--remote-timeout-ms: must be in [1, 86400000]"));
  }
  auto base_config = LoadSloConfig(f);
  if (!base_config.ok()) return Fail(base_config.status());
  // Remote members from the config: a bad or https:// URL fails here, before any model loads.
  std::vector<std::unique_ptr<serving::RemoteBackend>> remotes;
  for (const slo::ModelEntry& m : base_config->models) {
    if (!m.remote()) continue;
    serving::RemoteBackendOptions ro;
    ro.name = m.name;
    ro.url = m.url;
    ro.remote_model = m.remote_model;
    ro.max_in_flight = m.max_queue_requests;
    ro.connect_timeout = std::chrono::milliseconds(f.remote_connect_timeout_ms);
    ro.total_timeout = std::chrono::milliseconds(f.remote_timeout_ms);
    auto remote = serving::RemoteBackend::Create(std::move(ro));
    if (!remote.ok()) return Fail(remote.status());
    std::fprintf(stderr, "lifeline serve: remote model '%s' -> %s (model '%s')\n",
                 m.name.c_str(), m.url.c_str(), m.remote_model.c_str());
    remotes.push_back(std::move(remote).value());
  }
  auto api_keys = ApiKeys(f);
  if (!api_keys.ok()) return Fail(api_keys.status());
  if (f.models.empty() && remotes.empty()) {
    auto path = DefaultModelPath();
    if (!path.ok()) return Fail(path.status());
    f.models.push_back("default=" + *path);
  }
  auto drafts = DraftPaths(f);
  if (!drafts.ok()) return Fail(drafts.status());
  std::vector<std::unique_ptr<serving::ModelEngine>> engines;
  for (const std::string& spec : f.models) {
    const auto eq = spec.find('=');
    std::string name = eq == std::string::npos ? std::filesystem::path(spec).stem().string()
                                               : spec.substr(0, eq);
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (name.empty() || path.empty()) {
      return Fail(InvalidArgument("--model: expected NAME=PATH.gguf or PATH.gguf, got '" + spec + "'"));
    }
    for (const auto& e : engines) {
      if (e->name() == name) return Fail(InvalidArgument("--model: duplicate model name '" + name + "'"));
    }
    for (const auto& r : remotes) {
      if (r->name() == name) {
        return Fail(InvalidArgument("--model: '" + name + "' is already a remote model name"));
      }
    }
    auto loaded = LoadModel(path, *choice->kernels, /*mlock=*/false, /*no_repack=*/false, f.no_mmap);
    if (!loaded.ok()) return Fail(Status(loaded.status().code(), path + ": " + loaded.status().message()));
    serving::ModelEngineOptions o;
    o.name = name;
    o.threads = choice->threads;
    o.pin_cpus = choice->pin_cpus;
    o.n_ctx = f.n_ctx;
    o.kv_memory_bytes = static_cast<uint64_t>(f.kv_memory_mib) << 20;
    o.kv_type = choice->kv_type;
    o.max_running = f.max_running;
    o.max_step_tokens = f.max_step_tokens;
    o.max_waiting = f.max_waiting;
    o.default_max_tokens = f.default_max_tokens;
    o.chat_template = f.chat_template;
    o.reasoning_format = f.reasoning_format;
    o.pooling = f.pooling;
    o.calibrate = true;  // admission's speed estimate from the first request on
    o.prefix_cache_reserve_tokens = f.prefix_cache_reserve_tokens;
    o.prefix_cache_ram_bytes = static_cast<uint64_t>(f.prefix_cache_ram_mib) << 20;
    o.prefix_cache_ram_q8 = f.prefix_cache_ram_q8;
    o.prefix_cache_dir = f.prefix_cache_dir;
    o.prefix_cache_disk_bytes = static_cast<uint64_t>(f.prefix_cache_disk_mib) << 20;
    if (!f.prefix_cache_dir.empty()) o.model_file_identity = serving::ModelFileIdentity(path);
    o.spec_tokens = f.speculate;
    o.spec_step_tokens = f.spec_step_tokens;
    o.spec_always = f.spec_always;
    serving::DraftModelSpec draft;
    if (auto d = drafts->find(name); d != drafts->end()) {
      auto dl = LoadModel(d->second, *choice->kernels, /*mlock=*/false, /*no_repack=*/false, f.no_mmap);
      if (!dl.ok()) {
        return Fail(Status(dl.status().code(),
                           "--draft " + d->second + ": " + dl.status().message()));
      }
      draft.model = std::move(dl->model);
      draft.tokenizer = std::move(dl->tokenizer);
      // A draft model means speculation: 4 drafted tokens unless --speculate says otherwise.
      if (!f.speculate_given) o.spec_tokens = std::max(o.spec_tokens, kDraftModelSpecTokens);
      std::fprintf(stderr, "lifeline serve: model '%s' drafts with %s (%d tokens per decode)\n",
                   name.c_str(), d->second.c_str(), o.spec_tokens);
    }
    auto engine = serving::ModelEngine::Create(std::move(loaded->model),
                                               std::move(loaded->tokenizer), o, std::move(draft));
    if (!engine.ok()) return Fail(Status(engine.status().code(), name + ": " + engine.status().message()));
    std::fprintf(stderr, "lifeline serve: model '%s' from %s (ctx %lld, isa %s, %d threads)\n",
                 name.c_str(), path.c_str(), static_cast<long long>((*engine)->n_ctx()),
                 std::string(IsaLevelName(choice->kernels->isa)).c_str(), choice->threads);
    std::fprintf(stderr, "lifeline serve: model '%s' chat template: %s%s%s\n", name.c_str(),
                 serving::DescribeChatTemplate((*engine)->chat_template()).c_str(),
                 (*engine)->chat_template_note().empty() ? "" : " -- ",
                 (*engine)->chat_template_note().c_str());
    engines.push_back(std::move(engine).value());
  }

  std::vector<std::string> member_names;
  for (const auto& e : engines) member_names.push_back(e->name());
  for (const auto& r : remotes) member_names.push_back(r->name());
  auto slo_config = ApplyCascade(f, std::move(base_config).value(), member_names);
  if (!slo_config.ok()) return Fail(slo_config.status());
  serving::ServingHub service(std::move(engines), std::move(remotes),
                                 std::move(slo_config).value());
  // The live economics shows each class's target in force beside its cliff: its TTFT P95 (the
  // wait it measures; autotune's move when [autotune] made one), else its e2e P95. The
  // autotuner moves the TTFT targets on the refits' evidence (off unless enabled).
  const std::shared_ptr<slo::TargetBoard> targets = service.target_board();
  auto autotuner = std::make_shared<slo::Autotuner>(service.slo_config(), targets.get());
  economics::EconomicsOptions eo;
  eo.refit_interval_ms = f.economics_refit_s * 1000;
  eo.window_requests = f.economics_window;
  eo.target_ms = [config = &service.slo_config(), targets](const std::string& cls) -> std::optional<double> {
    const slo::SloClass* c = config->FindClass(cls);
    if (c == nullptr) return std::nullopt;
    const slo::SloClass in_force = targets->Apply(*c);
    return in_force.ttft_p95_ms ? in_force.ttft_p95_ms : in_force.e2e_p95_ms;
  };
  eo.on_refit = [autotuner](const std::vector<slo::CliffEstimate>& cliffs, int64_t now_unix_ms) {
    for (const slo::CliffEstimate& c : cliffs) {
      if (auto m = autotuner->Observe(c, now_unix_ms)) {
        std::fprintf(stderr,
                     "lifeline serve: autotune: class %s ttft_p95_ms %.0f -> %.0f (cliff %.0f ms "
                     "[%.0f, %.0f], p %.3f, %lld samples, stable over %d refits)\n",
                     m->slo_class.c_str(), m->from_ms, m->to_ms, m->cliff_ms, m->ci_lo_ms,
                     m->ci_hi_ms, m->p_value, static_cast<long long>(m->samples), m->stable_refits);
      }
    }
  };
  eo.autotune_json = [autotuner] { return autotuner->Json(); };
  auto live_economics = std::make_shared<economics::LiveEconomics>(std::move(eo));
  service.Start();
  live_economics->Start();
  api::ServerOptions so;
  so.bind_address = f.host;
  so.port = static_cast<uint16_t>(f.port);
  so.io_threads = f.io_threads;
  so.prep_threads = f.prep_threads;
  so.limits.max_prep_queued = static_cast<size_t>(f.max_prep_queued);
  so.api_keys = std::move(api_keys).value();
  so.cors_allowed_origins = f.cors_origins;
  so.reasoning_field = f.reasoning_field;
  so.request_log = request_log;
  so.economics = live_economics;
  so.limits.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  so.limits.max_connections = f.max_connections;
  so.limits.drain_timeout = std::chrono::seconds(f.drain_timeout_s);
  api::HttpServer http(so, &service);
  if (Status s = http.Start(); !s.ok()) {
    service.Stop();
    return Fail(s);
  }
  std::printf("lifeline serve: listening on http://%s:%u\n", f.host.c_str(), http.port());
  // stdout's one line is the contract tools parse; the rest of the welcome goes to stderr.
  std::fprintf(stderr, "lifeline serve: dashboard at http://%s:%u/ (SLO status: /v1/slo, metrics: /metrics)\n",
               f.host.c_str(), http.port());
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      DumpState(http, service);
    } else if (sig == SIGHUP) {
      OnHangup(request_log.get());
    } else {
      break;  // SIGINT, SIGTERM
    }
  }
  std::fprintf(stderr, "lifeline serve: signal %d, draining (up to %d s; again to exit now)\n",
               sig, f.drain_timeout_s);
  // Detached, so it may outlive this function: it owns its copy of the set and touches
  // nothing else of the server (which is being torn down: no state dump while draining).
  std::thread force([sigs] {
    for (;;) {
      int again = 0;
      if (sigwait(&sigs, &again) != 0) continue;
      if (again == SIGINT || again == SIGTERM) break;
      std::fprintf(stderr, "lifeline serve: signal %d ignored while draining\n", again);
    }
    std::fprintf(stderr, "lifeline serve: second signal, exiting now\n");
    _exit(1);
  });
  force.detach();
  http.Stop();
  service.Stop();
  std::fprintf(stderr, "lifeline serve: stopped\n");
  return 0;
}

}  // namespace

CommandFn RegisterServe(CLI::App& root) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = root.add_subcommand("serve", "Serve models over an OpenAI-compatible HTTP/SSE API");
  cmd->add_option("--host", f->host, "Bind address (loopback by default)")->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port; 0 picks a free one")->capture_default_str();
  cmd->add_option("-m,--model", f->models,
                  "NAME=PATH.gguf (repeatable; the first is the default). None: a synthetic model");
  AddEngineFlags(cmd, &f->engine, "Compute threads per model (default: cores, max 8)");
  cmd->add_option("-c,--ctx", f->n_ctx, "Positions per sequence (default min(train ctx, 4096))");
  cmd->add_option("--kv-memory", f->kv_memory_mib, "KV cache budget per model, MiB")->capture_default_str();
  cmd->add_option("--max-running", f->max_running, "Sequences per engine step")->capture_default_str();
  cmd->add_option("--max-step-tokens", f->max_step_tokens,
                  "Tokens per engine step (decodes + chunked prefill)")->capture_default_str();
  cmd->add_option("--max-waiting", f->max_waiting, "Queued requests per model before 429")
      ->capture_default_str();
  cmd->add_option("--speculate", f->speculate,
                  "Speculative decoding: drafted tokens per decode (by prompt lookup, or "
                  "--draft), verified in one pass (0 = off; output unchanged either way)")
      ->capture_default_str()
      ->check(CLI::Range(0, static_cast<int>(kMaxSpecTokens)));
  cmd->add_option("--draft", f->drafts,
                  "Draft model for speculative decoding, same vocabulary as the target: "
                  "NAME=PATH.gguf for --model NAME, or PATH.gguf for the first model "
                  "(repeatable; turns --speculate on at 4 unless given)");
  cmd->add_flag("--spec-always", f->spec_always,
                "Draft at every decode whatever it costs (no cost model): for measuring a "
                "draft's acceptance and the verification cost, not for serving");
  cmd->add_option("--spec-step-tokens", f->spec_step_tokens,
                  "Most decode + drafted tokens a step verifies; no drafts beyond it or while "
                  "requests wait")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--default-max-tokens", f->default_max_tokens,
                  "max_tokens when a request gives none")->capture_default_str();
  AddChatTemplateFlags(cmd, &f->chat_template);
  cmd->add_option("--pooling", f->pooling,
                  "POST /v1/embeddings: how a sequence's hidden states become its vector -- auto "
                  "(the file's pooling_type, else mean), mean, cls, last or rank")
      ->capture_default_str();
  cmd->add_option("--reasoning-format", f->reasoning_format,
                  "How chat answers split thinking from the answer: auto (from the chat "
                  "template), none (all content), think, bracket-think, granite")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "think", "bracket-think", "granite"}));
  cmd->add_option("--api-key", f->api_keys,
                  "Require 'Authorization: Bearer KEY' (except health); repeatable");
  cmd->add_option("--api-key-file", f->api_key_file,
                  "More accepted keys, one per line ('#' comments)");
  cmd->add_option("--cors-origin", f->cors_origins,
                  "Allow browser calls from this origin (http(s)://host[:port], or *); repeatable");
  cmd->add_option("--io-threads", f->io_threads, "HTTP I/O threads")->capture_default_str();
  cmd->add_option("--reasoning-field", f->reasoning_field,
                  "Chat field of a thinking model's thinking: reasoning_content (llama.cpp, "
                  "DeepSeek) or reasoning (vLLM)")
      ->check(CLI::IsMember({"reasoning_content", "reasoning"}))
      ->capture_default_str();
  cmd->add_option("--request-log", f->request_log,
                  "One JSON line per finished generation request (class, tokens, TTFT, e2e, "
                  "the split, outcome, client disconnect) to FILE, or - for stdout; SIGHUP "
                  "reopens it; `lifeline analyze --input FILE` reads it");
  cmd->add_option("--request-log-max-mib", f->request_log_max_mib,
                  "Rotate the request log past this size (FILE -> FILE.1 ...); 0 = never")
      ->capture_default_str();
  cmd->add_option("--request-log-keep", f->request_log_keep, "Rotated request logs kept")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--economics-refit-s", f->economics_refit_s,
                  "Refit each class's latency cliff from the server's traffic and posted "
                  "outcomes every N s (GET /v1/economics); 0 = never")
      ->capture_default_str();
  cmd->add_option("--economics-window", f->economics_window,
                  "Finished requests kept for POST /v1/outcomes joins and the fits")
      ->capture_default_str();
  cmd->add_option("--prep-threads", f->prep_threads,
                  "Threads that parse and submit requests (chat template, tokens, grammar and "
                  "JSON schema compilation) and answer /tokenize, /detokenize, /apply-template, "
                  "so the I/O threads stay free for /health and the streams")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-prep-queued", f->max_prep_queued,
                  "Requests waiting for a prep thread before 503 prep_queue_full + Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--max-body-bytes", f->max_body_bytes, "Request body cap (413 above)")
      ->capture_default_str();
  cmd->add_option("--max-connections", f->max_connections,
                  "Open connections served at once (503 + close above; each takes a file "
                  "descriptor, so keep it under the process's limit, ulimit -n)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--drain-timeout", f->drain_timeout_s, "Seconds to drain on SIGTERM")
      ->capture_default_str();
  cmd->add_option("--config", f->slo_config, "SLO control plane config, TOML (docs/slo.md)");
  cmd->add_option("--cascade", f->cascade,
                  "Model names heavy -> light for SLO fallback, e.g. heavy,light (local or remote)")
      ->delimiter(',');
  cmd->add_option("--remote", f->remotes,
                  "NAME=URL#MODEL: serve NAME from a remote OpenAI-compatible server "
                  "(http:// only), e.g. light=http://10.0.0.2:8000/v1#llama-3-8b (repeatable)");
  cmd->add_option("--remote-connect-timeout-ms", f->remote_connect_timeout_ms,
                  "Remote members: resolve + connect timeout")->capture_default_str();
  cmd->add_option("--remote-timeout-ms", f->remote_timeout_ms,
                  "Remote members: whole-request timeout (an earlier request deadline wins)")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-reserve-tokens", f->prefix_cache_reserve_tokens,
                  "Released prompt tokens the prefix cache keeps before reusing their KV blocks "
                  "instead of touching new KV memory (-1: keep all until the pool is full)")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-ram", f->prefix_cache_ram_mib,
                  "MiB of host RAM per model for the prefix cache's second tier: KV blocks the "
                  "pool evicts are kept there and restored (copied, not recomputed) when their "
                  "prefix returns (0: off)")
      ->capture_default_str();
  cmd->add_flag("--prefix-cache-ram-q8", f->prefix_cache_ram_q8,
                "Keep the RAM tier's copies of F16 / F32 KV blocks as Q8_0: 1.9x (3.8x) the "
                "blocks in the same MiB; a restored prefix is close to, not equal to, a "
                "recomputed one");
  cmd->add_option("--prefix-cache-dir", f->prefix_cache_dir,
                  "Folder for the prefix cache's disk tier: evicted KV blocks (and, at shutdown, "
                  "the pool's cached ones) are written there and restored after a restart "
                  "(one subfolder per model file and KV layout; \"\": off)");
  cmd->add_option("--prefix-cache-disk-mib", f->prefix_cache_disk_mib,
                  "MiB of block files the disk tier keeps per model (oldest deleted first)")
      ->capture_default_str();
  cmd->add_flag("--no-mmap", f->no_mmap,
                "Read model files into memory instead of mapping them: later changes to the "
                "files cannot affect the server (a mapped file that changes fails its model)");
  return [f, cmd] {
    f->speculate_given = cmd->count("--speculate") > 0;
    return RunServe(*f);
  };
}

}  // namespace lifeline::app
