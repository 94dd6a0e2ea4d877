// lifeline bench-model: prompt-processing and generation throughput of one GGUF model, plus
// measured memory bandwidth and the share of the batch-1 decode roofline reached.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli_common.h"
#include "app/commands.h"
#include "base/cpu_affinity.h"
#include "bench/bandwidth_probe.h"
#include "bench/model_bench.h"
#include "engine/kernels/compute_pool.h"
#include "engine/kernels/op_profile.h"

namespace lifeline::app {
namespace {

struct BenchFlags {
  std::string model_path;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int64_t n_depth = 0;
  int reps = 5;
  bool json = false;
  bool no_bandwidth = false;
  int64_t bandwidth_mib = 1024;
  bool no_repack = false;
  EngineFlags engine;  // -t, --isa, --kv-type, --pin / --cpus
  bool profile_ops = false;
  std::vector<int64_t> verify_k;
};

nlohmann::json StatsJson(const ThroughputStats& s) {
  return {{"samples_tokens_per_s", s.tokens_per_s}, {"median", s.median}, {"mean", s.mean},
          {"stddev", s.stddev},  {"min", s.min},     {"max", s.max}};
}

// A verification pass's time against the first k listed (normally 1: a decode step).
double VsFirst(const ModelBenchResult& r, const VerifyCost& c) {
  const double base = r.verify.front().median_ms;
  return base > 0 ? c.median_ms / base : 0;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "lifeline bench-model: %s\n", s.ToString().c_str());
  return 1;
}

// The tg runs' products: per product (matrices, shape), calls, time, weight bandwidth and
// share of the tg wall time; the rest of that time is attention, norms and the like.
void PrintProfile(const OpProfile& profile, double tg_seconds) {
  std::printf("tg products (wall time inside each matrix product, all tg runs):\n");
  std::printf("| product | calls | ms | us/call | GB/s | share of tg |\n");
  std::printf("| ------- | ----: | -: | ------: | ---: | ----------: |\n");
  for (const OpProfileEntry& e : profile.Entries()) {
    std::printf("| %s | %lld | %.1f | %.1f | %.1f | %.1f %% |\n", e.key.c_str(),
                static_cast<long long>(e.calls), e.seconds * 1e3, e.seconds * 1e6 / e.calls,
                e.gb_per_s(), tg_seconds > 0 ? 100.0 * e.seconds / tg_seconds : 0.0);
  }
  const double in_products = profile.TotalSeconds();
  std::printf("products: %.1f %% of tg time; outside them (attention, RoPE, KV writes, "
              "hand-offs between products): %.1f %%\n",
              tg_seconds > 0 ? 100.0 * in_products / tg_seconds : 0.0,
              tg_seconds > 0 ? 100.0 * (tg_seconds - in_products) / tg_seconds : 0.0);
}

// The stages a profile timed, as shares of `total_seconds`.
void PrintStages(const OpProfile& profile, double total_seconds) {
  for (const OpStage& st : profile.Stages()) {
    std::printf("| %s | %lld | %.1f | %.1f %% |\n", st.name, static_cast<long long>(st.calls),
                st.seconds * 1e3, total_seconds > 0 ? 100.0 * st.seconds / total_seconds : 0.0);
  }
}

// The pp runs: per product, its multiply-add rate (GOP/s, 2 ops per multiply-add) and share
// of the pp wall time; then the stages inside the products (activation quantization) and
// outside them (attention, RoPE and KV writes, the embedding), and what no stage covers.
void PrintPpProfile(const OpProfile& profile, double pp_seconds) {
  std::printf("pp products (wall time inside each matrix product, all pp runs):\n");
  std::printf("| product | calls | ms | GOP/s | share of pp |\n");
  std::printf("| ------- | ----: | -: | ----: | ----------: |\n");
  double macs = 0;
  for (const OpProfileEntry& e : profile.Entries()) {
    macs += e.macs;
    std::printf("| %s | %lld | %.1f | %.1f | %.1f %% |\n", e.key.c_str(),
                static_cast<long long>(e.calls), e.seconds * 1e3, e.gops(),
                pp_seconds > 0 ? 100.0 * e.seconds / pp_seconds : 0.0);
  }
  const double in_products = profile.TotalSeconds();
  std::printf("products: %.1f %% of pp time at %.1f GOP/s\n",
              pp_seconds > 0 ? 100.0 * in_products / pp_seconds : 0.0,
              in_products > 0 ? 2 * macs / in_products / 1e9 : 0.0);
  std::printf("| stage | calls | ms | share of pp |\n| ----- | ----: | -: | ----------: |\n");
  PrintStages(profile, pp_seconds);
  double outside = 0;
  for (const OpStage& st : profile.Stages()) {
    if (std::string_view(st.name).starts_with("activation")) continue;  // inside the products
    outside += st.seconds;
  }
  std::printf("the activation quantization runs inside the products; outside products and "
              "stages (output norm, residual hand-offs, pool wake-ups): %.1f %%\n",
              pp_seconds > 0 ? 100.0 * (pp_seconds - in_products - outside) / pp_seconds : 0.0);
}

nlohmann::json StagesJson(const OpProfile& profile) {
  nlohmann::json out = nlohmann::json::array();
  for (const OpStage& st : profile.Stages()) {
    out.push_back({{"stage", st.name}, {"calls", st.calls}, {"seconds", st.seconds}});
  }
  return out;
}

int RunBench(const BenchFlags& f) {
  // Flags are checked before the (slow) model load.
  auto engine = ResolveEngineFlags(f.engine);
  if (!engine.ok()) return Fail(engine.status());
  auto loaded = LoadModel(f.model_path, *engine->kernels, /*mlock=*/false, f.no_repack);
  if (!loaded.ok()) return Fail(loaded.status());
  ComputePool pool(engine->threads, engine->pin_cpus);
  const KvType kv_type = engine->kv_type;

  ModelBenchOptions opts;
  opts.n_prompt = f.n_prompt;
  opts.n_gen = f.n_gen;
  opts.n_depth = f.n_depth;
  opts.reps = f.reps;
  opts.kv_type = kv_type;
  opts.verify_k = f.verify_k;
  OpProfile profile, pp_profile;
  if (f.profile_ops) {
    opts.tg_profile = &profile;
    opts.pp_profile = &pp_profile;
  }
  // The bandwidth reference: sampled just before and just after every tg run (each sample
  // the median of kPassesPerSample passes over the probe's buffer), so each run is compared
  // with the bandwidth of its own minute; without tg runs, measured once at the end.
  constexpr int kPassesPerSample = 3;
  std::optional<BandwidthProbe> probe;
  if (!f.no_bandwidth) {
    auto p = BandwidthProbe::Create(pool, static_cast<uint64_t>(f.bandwidth_mib) << 20);
    if (!p.ok()) {
      return Fail(Status(p.status().code(), "--bandwidth-mib " + std::to_string(f.bandwidth_mib) +
                                                ": " + p.status().message()));
    }
    probe.emplace(std::move(*p));
    (void)probe->MeasurePass();  // warm-up: first reads after the touch run slower
    opts.bandwidth_sample = [&probe] {
      std::vector<double> passes;
      for (int i = 0; i < kPassesPerSample; ++i) passes.push_back(probe->MeasurePass());
      return MedianOf(passes);
    };
  }
  auto res = RunModelBench(*loaded->model, pool, opts);
  if (!res.ok()) return Fail(res.status());
  std::vector<double> bw_samples = res->tg_bandwidth_gb_per_s;
  if (probe && bw_samples.empty()) bw_samples.push_back(probe->Measure(5).median_gb_per_s);
  const double bw_gb_per_s = MedianOf(bw_samples);

  const double bytes_per_token = static_cast<double>(res->weight_bytes_per_token);
  const double roofline_tps = bw_gb_per_s > 0 ? bw_gb_per_s * 1e9 / bytes_per_token : 0;
  const double share = roofline_tps > 0 ? res->tg.median / roofline_tps : 0;
  // Run by run: tg run i against the mean of the samples just before and after it.
  std::vector<double> paired;
  const std::vector<double>& tg_runs = res->tg.tokens_per_s;
  if (res->tg_bandwidth_gb_per_s.size() == 2 * tg_runs.size()) {
    for (size_t i = 0; i < tg_runs.size(); ++i) {
      const double ref = 0.5 * (bw_samples[2 * i] + bw_samples[2 * i + 1]);
      if (ref > 0) paired.push_back(tg_runs[i] * bytes_per_token / (ref * 1e9));
    }
  }
  const ThroughputStats paired_stats = Summarize(paired);
  const std::string isa(IsaLevelName(engine->kernels->isa));

  if (f.json) {
    nlohmann::json j = {
        {"model", f.model_path},
        {"model_bytes", res->model_bytes},
        {"params", res->n_params},
        {"weight_bytes_per_token", res->weight_bytes_per_token},
        {"expert_bytes", res->expert_bytes},
        {"n_expert", res->n_expert},
        {"n_expert_used", res->n_expert_used},
        {"threads", pool.n_threads()},
        {"pinned_cpus", pool.pin_cpus()},
        {"pinned_threads", pool.pinned_threads()},
        {"isa", isa},
        {"kv_type", KvTypeName(kv_type)},
        {"repacked_bytes", loaded->model->repacked_bytes()},
        {"n_prompt", f.n_prompt},
        {"n_gen", f.n_gen},
        {"n_depth", f.n_depth},
        {"reps", f.reps},
        {"pp", StatsJson(res->pp)},
        {"tg", StatsJson(res->tg)},
        {"bandwidth_gb_per_s", bw_gb_per_s},
        {"bandwidth_samples_gb_per_s", bw_samples},
        {"bandwidth_buffer_bytes", probe ? probe->buffer_bytes() : 0},
        {"decode_roofline_tokens_per_s", roofline_tps},
        {"decode_roofline_share", share},
    };
    if (!paired.empty()) {
      j["decode_roofline_share_paired"] = {{"samples", paired_stats.tokens_per_s},
                                           {"median", paired_stats.median},
                                           {"min", paired_stats.min},
                                           {"max", paired_stats.max}};
    }
    if (f.profile_ops) {
      nlohmann::json ops = nlohmann::json::array();
      for (const OpProfileEntry& e : profile.Entries()) {
        ops.push_back({{"product", e.key},
                       {"decode", e.decode},
                       {"calls", e.calls},
                       {"seconds", e.seconds},
                       {"weight_bytes", e.weight_bytes},
                       {"gb_per_s", e.gb_per_s()}});
      }
      j["tg_seconds"] = res->tg_seconds;
      j["tg_products"] = ops;
      j["tg_stages"] = StagesJson(profile);
      nlohmann::json pp_ops = nlohmann::json::array();
      for (const OpProfileEntry& e : pp_profile.Entries()) {
        pp_ops.push_back({{"product", e.key},
                          {"calls", e.calls},
                          {"seconds", e.seconds},
                          {"macs", e.macs},
                          {"gops", e.gops()}});
      }
      j["pp_seconds"] = res->pp_seconds;
      j["pp_products"] = pp_ops;
      j["pp_stages"] = StagesJson(pp_profile);
    }
    if (!res->verify.empty()) {
      nlohmann::json v = nlohmann::json::array();
      for (const VerifyCost& c : res->verify) {
        v.push_back({{"k", c.k}, {"step_ms", c.step_ms}, {"median_ms", c.median_ms},
                     {"vs_k1", VsFirst(*res, c)}});
      }
      j["verify"] = v;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s\n", f.model_path.c_str());
  std::printf("size: %.2f MiB, params: %.2f M, weights read per token: %.2f MiB, isa: %s, "
              "threads: %d, kv: %s, repacked: %.2f MiB\n",
              res->model_bytes / 1048576.0, res->n_params / 1e6, bytes_per_token / 1048576.0,
              isa.c_str(), pool.n_threads(), KvTypeName(kv_type),
              loaded->model->repacked_bytes() / 1048576.0);
  if (res->n_expert > 0) {
    std::printf("mixture of experts: %lld of %lld experts per token; the decode roofline counts "
                "the active weights (%.2f MiB of %.2f MiB of experts read per token)\n",
                static_cast<long long>(res->n_expert_used), static_cast<long long>(res->n_expert),
                res->expert_bytes * static_cast<double>(res->n_expert_used) /
                    static_cast<double>(res->n_expert) / 1048576.0,
                res->expert_bytes / 1048576.0);
  }
  if (!pool.pin_cpus().empty()) {
    std::printf("pinned to CPUs %s (%d of %d threads bound)\n",
                CpuListString(pool.pin_cpus()).c_str(), pool.pinned_threads(), pool.n_threads());
  }
  std::printf("| test   | tok/s median | mean +- sd       | min - max         |\n");
  std::printf("| ------ | -----------: | ---------------: | ----------------: |\n");
  // llama-bench's names: "pp512", "tg128", and " @ d4096" after a depth.
  const std::string at = f.n_depth > 0 ? " @ d" + std::to_string(f.n_depth) : "";
  if (f.n_prompt > 0) {
    const std::string name = "pp" + std::to_string(f.n_prompt) + at;
    std::printf("| %-6s | %12.2f | %7.2f +- %6.2f | %7.2f - %7.2f |\n", name.c_str(),
                res->pp.median, res->pp.mean, res->pp.stddev, res->pp.min, res->pp.max);
  }
  if (f.n_gen > 0) {
    const std::string name = "tg" + std::to_string(f.n_gen) + at;
    std::printf("| %-6s | %12.2f | %7.2f +- %6.2f | %7.2f - %7.2f |\n", name.c_str(),
                res->tg.median, res->tg.mean, res->tg.stddev, res->tg.min, res->tg.max);
  }
  if (f.profile_ops && f.n_prompt > 0) PrintPpProfile(pp_profile, res->pp_seconds);
  if (f.profile_ops && f.n_gen > 0) PrintProfile(profile, res->tg_seconds);
  if (!res->verify.empty()) {
    std::printf("verification passes (k tokens with logits after a 128-token context, rolled "
                "back; median of %d reps):\n| k | ms per pass | vs the first k | ms per token |\n"
                "| -: | ----------: | ---------: | -----------: |\n", f.reps);
    for (const VerifyCost& c : res->verify) {
      std::printf("| %lld | %.2f | %.2fx | %.2f |\n", static_cast<long long>(c.k), c.median_ms,
                  VsFirst(*res, c), c.median_ms / static_cast<double>(c.k));
    }
  }
  if (probe) {
    std::printf("memory read bandwidth: %.1f GB/s (median of %zu samples%s, %d threads, %lld MiB); "
                "decode roofline %.1f tok/s; tg reaches %.0f %% of it\n",
                bw_gb_per_s, bw_samples.size(),
                res->tg_bandwidth_gb_per_s.empty() ? "" : " taken beside the tg runs",
                pool.n_threads(), static_cast<long long>(f.bandwidth_mib), roofline_tps,
                share * 100.0);
    if (!paired.empty()) {
      std::printf("tg run by run, against the bandwidth sampled just before and after it: "
                  "median %.0f %% (%.0f - %.0f %%)\n",
                  paired_stats.median * 100.0, paired_stats.min * 100.0, paired_stats.max * 100.0);
    }
  }
  return 0;
}

}  // namespace

CommandFn RegisterBenchModel(CLI::App& root) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = root.add_subcommand(
      "bench-model", "Prompt-processing / generation tokens/s and the share of the decode roofline");
  cmd->add_option("-m,--model", f->model_path, "GGUF model file")->required();
  cmd->add_option("-p,--n-prompt", f->n_prompt, "Prompt tokens per pp run (0 skips)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  cmd->add_option("-n,--n-gen", f->n_gen, "Generated tokens per tg run (0 skips)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  cmd->add_option("-d,--n-depth", f->n_depth,
                  "Context tokens in the sequence before each pp / tg run (llama-bench's -d): "
                  "decode and prefill after a long conversation")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("-r,--reps", f->reps, "Repetitions")->capture_default_str()->check(CLI::Range(1, 1000));
  AddEngineFlags(cmd, &f->engine);
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->add_flag("--no-bandwidth", f->no_bandwidth, "Skip the memory-bandwidth probe");
  cmd->add_option("--bandwidth-mib", f->bandwidth_mib,
                  "Memory-bandwidth probe buffer in MiB (keep it far above the last-level cache)")
      ->capture_default_str()->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  cmd->add_flag("--no-repack", f->no_repack,
                "Keep every matrix in the file's row layout (no row-interleaved copies)");
  cmd->add_flag("--profile-ops", f->profile_ops,
                "Time every matrix product of the pp and tg runs (pp: GOP/s, tg: GB/s, share "
                "of the run) and where the rest of a prefill goes (activation quantization, "
                "attention, RoPE + KV writes)");
  cmd->add_option("--verify-k", f->verify_k,
                  "Also time verification passes of k tokens (speculative decoding), e.g. 1,2,4,8")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  return [f] { return RunBench(*f); };
}

}  // namespace lifeline::app
