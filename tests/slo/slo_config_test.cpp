// SLO config: presets, a full valid file, every validation error (key and line named),
// the cascade, and Resolve().
#include "slo/slo_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

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

TEST(SloConfigTest, PresetsMatchTheResearchTargets) {
  const SloConfig c = DefaultSloConfig();
  EXPECT_EQ(c.default_class, "interactive");
  ASSERT_EQ(c.classes.size(), 10u);
  auto ttft = [&](const char* n) { return c.FindClass(n)->ttft_p95_ms.value_or(-1); };
  EXPECT_EQ(ttft("search-embed"), 50);
  EXPECT_EQ(ttft("search-rerank"), 150);
  EXPECT_GT(c.FindClass("search-embed")->priority, c.FindClass("chat")->priority);
  EXPECT_EQ(ttft("interactive"), 387);
  EXPECT_EQ(ttft("chat"), 350);
  EXPECT_EQ(ttft("customer-service"), 220);
  EXPECT_EQ(ttft("medical"), 150);
  EXPECT_EQ(ttft("video-call"), 150);
  EXPECT_EQ(ttft("asr"), 300);
  EXPECT_TRUE(c.FindClass("code-completion")->ttft_p95_ms.has_value());
  EXPECT_FALSE(c.FindClass("code-completion")->e2e_p95_ms.has_value());
  EXPECT_EQ(c.FindClass("risk-control")->e2e_p95_ms.value_or(-1), 85);
  EXPECT_GT(c.FindClass("medical")->priority, c.FindClass("interactive")->priority);
  EXPECT_EQ(c.RoleMultiplier("doctor").value_or(-1), 0.8);
  EXPECT_EQ(c.RoleMultiplier("agent").value_or(-1), 1.0);
  EXPECT_EQ(c.RoleMultiplier("user").value_or(-1), 1.3);
  EXPECT_FALSE(c.RoleMultiplier("nurse").has_value());
  // The research's controller: halve above 1.1 x, double below 0.9 x, floor 4, cap 128.
  EXPECT_EQ(c.controller.batch_high_ratio, 1.1);
  EXPECT_EQ(c.controller.batch_low_ratio, 0.9);
  EXPECT_EQ(c.batching.floor, 4);
  EXPECT_EQ(c.batching.cap, 128);
  EXPECT_EQ(c.ladder.recover_ratio, 0.9);
  EXPECT_TRUE(c.models.empty());
  // The empty document is the defaults.
  auto parsed = ParseSloConfig("", "empty.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->classes.size(), 10u);
}

constexpr const char* kFullFile = R"(
default_class = "chat"

[classes.chat]
ttft_p95_ms = 300
tpot_p95_ms = 40

[classes.medical]
priority = 9

[classes.search]
e2e_p95_ms = 120.5
priority = 3
max_level = 2

[classes.risk-control]
ttft_p95_ms = 60
e2e_p95_ms = 0

[roles]
doctor = 0.5
vip = 0.7

[[models]]
name = "big"
path = "/models/llama-8b.gguf"
max_queue_requests = 32
max_queue_tokens = 65536

[[models]]
name = "embed"
path = "/models/embed.gguf"
cascade = false

[[models]]
name = "small"
path = "/models/llama-1b.gguf"

[[models]]
name = "cloud"
url = "http://10.0.0.5:8000/v1"
model = "meta-llama/Llama-3.1-8B-Instruct"

[window]
bucket_ms = 5000
buckets = 6

[controller]
tick_ms = 250
min_samples = 10
batch_high_ratio = 1.2
batch_low_ratio = 0.8
batch_adjust_interval_ms = 500

[batching]
initial = 32
floor = 2
cap = 64
step_tokens_per_seq = 16
min_step_tokens = 64
preferred_batch_sizes = [4, 8, 16]
max_queue_delay_ms = 80

[ladder]
enter_ratio = 1.05
recover_ratio = 0.85
recover_ticks = 4
min_dwell_ms = 3000
raise_interval_ms = 600
max_level = 3
truncate_max_tokens = 128
event_log_size = 16

[admission]
predictive = false
ewma_alpha = 0.5
prediction_margin = 1.3
speed_stale_ms = 2500
max_retry_after_s = 30
not_ready_retry_after_s = 2
)";

TEST(SloConfigTest, FullFile) {
  auto r = ParseSloConfig(kFullFile, "slo.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SloConfig& c = *r;
  EXPECT_EQ(c.default_class, "chat");
  ASSERT_EQ(c.classes.size(), 11u);  // 10 presets + search
  const SloClass* chat = c.FindClass("chat");
  EXPECT_EQ(chat->ttft_p95_ms.value_or(-1), 300);
  EXPECT_EQ(chat->tpot_p95_ms.value_or(-1), 40);
  EXPECT_EQ(chat->priority, 1);  // kept from the preset
  EXPECT_EQ(chat->max_level, 3);  // ladder.max_level applies to presets
  EXPECT_EQ(c.FindClass("medical")->priority, 9);
  EXPECT_EQ(c.FindClass("medical")->ttft_p95_ms.value_or(-1), 150);  // kept
  const SloClass* search = c.FindClass("search");
  EXPECT_EQ(search->e2e_p95_ms.value_or(-1), 120.5);
  EXPECT_FALSE(search->ttft_p95_ms.has_value());
  EXPECT_EQ(search->max_level, 2);
  const SloClass* risk = c.FindClass("risk-control");
  EXPECT_EQ(risk->ttft_p95_ms.value_or(-1), 60);
  EXPECT_FALSE(risk->e2e_p95_ms.has_value());  // 0 removed the preset's target
  EXPECT_EQ(c.RoleMultiplier("doctor").value_or(-1), 0.5);
  EXPECT_EQ(c.RoleMultiplier("vip").value_or(-1), 0.7);
  EXPECT_EQ(c.RoleMultiplier("user").value_or(-1), 1.3);

  ASSERT_EQ(c.models.size(), 4u);
  EXPECT_EQ(c.models[0].name, "big");
  EXPECT_EQ(c.models[0].max_queue_requests, 32);
  EXPECT_EQ(c.models[0].max_queue_tokens, 65536);
  EXPECT_FALSE(c.models[0].remote());
  EXPECT_TRUE(c.models[3].remote());
  EXPECT_EQ(c.models[3].remote_model, "meta-llama/Llama-3.1-8B-Instruct");
  // Cascade heavy -> light, skipping the non-member.
  EXPECT_EQ(c.NextInCascade("big")->name, "small");
  EXPECT_EQ(c.NextInCascade("small")->name, "cloud");
  EXPECT_EQ(c.NextInCascade("cloud"), nullptr);
  EXPECT_EQ(c.NextInCascade("embed"), nullptr);
  EXPECT_EQ(c.NextInCascade("nope"), nullptr);

  EXPECT_EQ(c.window.bucket_us, 5'000'000);
  EXPECT_EQ(c.window.n_buckets, 6);
  EXPECT_EQ(c.controller.tick_ms, 250);
  EXPECT_EQ(c.controller.min_samples, 10);
  EXPECT_EQ(c.controller.batch_high_ratio, 1.2);
  EXPECT_EQ(c.controller.batch_low_ratio, 0.8);
  EXPECT_EQ(c.controller.batch_adjust_interval_ms, 500);
  EXPECT_EQ(c.batching.initial, 32);
  EXPECT_EQ(c.batching.floor, 2);
  EXPECT_EQ(c.batching.cap, 64);
  EXPECT_EQ(c.batching.step_tokens_per_seq, 16);
  EXPECT_EQ(c.batching.min_step_tokens, 64);
  EXPECT_EQ(c.batching.preferred_batch_sizes, (std::vector<int32_t>{4, 8, 16}));
  EXPECT_EQ(c.batching.max_queue_delay_ms, 80);
  EXPECT_EQ(c.ladder.enter_ratio, 1.05);
  EXPECT_EQ(c.ladder.recover_ratio, 0.85);
  EXPECT_EQ(c.ladder.recover_ticks, 4);
  EXPECT_EQ(c.ladder.min_dwell_ms, 3000);
  EXPECT_EQ(c.ladder.raise_interval_ms, 600);
  EXPECT_EQ(c.ladder.max_level, 3);
  EXPECT_EQ(c.ladder.truncate_max_tokens, 128);
  EXPECT_EQ(c.ladder.event_log_size, 16);
  EXPECT_FALSE(c.admission.predictive);
  EXPECT_EQ(c.admission.ewma_alpha, 0.5);
  EXPECT_EQ(c.admission.prediction_margin, 1.3);
  EXPECT_EQ(c.admission.speed_stale_ms, 2500);
  EXPECT_EQ(c.admission.max_retry_after_s, 30);
  EXPECT_EQ(c.admission.not_ready_retry_after_s, 2);
}

TEST(SloConfigTest, WithoutPresetsOnlyFileClasses) {
  auto r = ParseSloConfig(
      "use_presets = false\ndefault_class = \"a\"\n[classes.a]\nttft_p95_ms = 100\n", "x.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->classes.size(), 1u);
  EXPECT_TRUE(r->roles.empty());
  // Without presets the default class must come from the file.
  auto bad = ParseSloConfig("use_presets = false\n", "x.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("default_class"), std::string::npos);
}

// A thinking class: a TTFA target alone gives the first-token budget, and the thinking
// budgets come from the file.
TEST(SloConfigTest, ThinkingClassTargetsAndBudgets) {
  auto r = ParseSloConfig(
      "default_class = \"think\"\n[classes.think]\nttfa_p95_ms = 2000\n"
      "reasoning_budget_tokens = 256\nmax_reasoning_budget_tokens = 1024\n"
      "reasoning_effort_tokens = { minimal = 0, low = 64, medium = 256, high = 1024 }\n"
      "[ladder]\nmin_thinking_scale = 0.25\n",
      "x.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SloClass* c = r->FindClass("think");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ttfa_p95_ms, 2000);
  EXPECT_EQ(c->thinking.default_budget_tokens, 256);
  EXPECT_EQ(c->thinking.max_budget_tokens, 1024);
  EXPECT_EQ(c->thinking.effort_budget_tokens, (std::array<int64_t, 4>{0, 64, 256, 1024}));
  EXPECT_EQ(r->ladder.min_thinking_scale, 0.25);
  auto budget = Resolve(*r, RequestSloFields{"think", "", std::nullopt, false});
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->ttft_budget_ms, 2000);

  auto bad = ParseSloConfig("[classes.x]\nttfa_p95_ms = 100\nreasoning_effort_tokens = 3\n",
                            "x.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("classes.x.reasoning_effort_tokens"), std::string::npos)
      << bad.status().message();
  auto unknown = ParseSloConfig(
      "[classes.x]\nttfa_p95_ms = 100\nreasoning_effort_tokens = { extreme = 1 }\n", "x.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("extreme"), std::string::npos);
}

struct BadCase {
  const char* name;
  const char* toml;
  const char* expect_key;   // substring naming the key
  int expect_line;          // the line the message names
};

TEST(SloConfigTest, EveryErrorNamesKeyAndLine) {
  const BadCase cases[] = {
      {"syntax", "a = 1\n[ladder\n", "TOML syntax", 2},
      {"unknown top key", "\nfoo = 1\n", "foo: unknown key", 2},
      {"unknown section key", "[ladder]\nrecover_tick = 3\n", "ladder.recover_tick: unknown key", 2},
      {"section not a table", "ladder = 3\n", "ladder: expected a table", 1},
      {"wrong type int", "[ladder]\nrecover_ticks = \"3\"\n", "ladder.recover_ticks: expected an integer", 2},
      {"int below min", "[ladder]\nrecover_ticks = 0\n", "ladder.recover_ticks: value 0 is outside [1, 100000]", 2},
      {"int above max", "[ladder]\n\nmax_level = 5\n", "ladder.max_level: value 5 is outside [0, 4]", 3},
      {"wrong type number", "[controller]\nbatch_high_ratio = true\n", "controller.batch_high_ratio: expected a number", 2},
      {"ratio not positive", "[ladder]\nenter_ratio = 0\n", "ladder.enter_ratio: value 0 is outside (0, 100]", 2},
      {"hysteresis inverted", "[ladder]\nrecover_ratio = 1.0\n", "ladder.recover_ratio", 1},
      {"batch ratios inverted", "[controller]\nbatch_low_ratio = 1.5\n", "controller.batch_low_ratio", 1},
      {"wrong type bool", "[admission]\npredictive = 1\n", "admission.predictive: expected true or false", 2},
      {"floor above cap", "[batching]\nfloor = 200\n", "batching.floor: value 200 is above cap 128", 1},
      {"initial outside", "[batching]\ninitial = 2\n", "batching.initial: value 2 is outside [floor, cap] = [4, 128]", 1},
      {"preferred not ascending", "[batching]\npreferred_batch_sizes = [8, 4]\n", "batching.preferred_batch_sizes", 2},
      {"preferred above cap", "[batching]\npreferred_batch_sizes = [256]\n", "batching.preferred_batch_sizes", 2},
      {"preferred not array", "[batching]\npreferred_batch_sizes = 8\n", "batching.preferred_batch_sizes: expected an array", 2},
      {"window bucket too small", "[window]\nbucket_ms = 10\n", "window.bucket_ms: value 10 is outside [100, 600000]", 2},
      {"bad class name", "[classes.\"Bad Name\"]\nttft_p95_ms = 1\n", "classes.Bad Name: class names", 1},
      {"class without first-token budget", "[classes.x]\ntpot_p95_ms = 20\n", "classes.x: needs ttft_p95_ms, ttfa_p95_ms or e2e_p95_ms", 1},
      {"target negative", "[classes.chat]\nttft_p95_ms = -1\n", "classes.chat.ttft_p95_ms: value -1 is outside [0, 3600000]", 2},
      {"target too large", "[classes.chat]\n\nttft_p95_ms = 4e6\n", "classes.chat.ttft_p95_ms", 3},
      {"unknown class key", "[classes.chat]\nttft = 1\n", "classes.chat.ttft: unknown key", 2},
      {"class not a table", "[classes]\nchat = 1\n", "classes.chat: expected a table", 2},
      {"removing the only target", "[classes.chat]\nttft_p95_ms = 0\n", "classes.chat: needs", 1},
      {"role multiplier zero", "[roles]\nuser = 0\n", "roles.user: value 0 is outside (0, 100]", 2},
      {"role not a number", "[roles]\nuser = \"high\"\n", "roles.user: expected a number", 2},
      {"unknown default class", "default_class = \"gold\"\n", "default_class: 'gold' is not a configured class", 1},
      {"models not array", "models = 3\n", "models: expected an array of tables", 1},
      {"model without name", "[[models]]\npath = \"a.gguf\"\n", "models[0].name: required", 1},
      {"duplicate model", "[[models]]\nname = \"a\"\npath = \"a.gguf\"\n[[models]]\nname = \"a\"\npath = \"b.gguf\"\n",
       "models[1].name: duplicate model name 'a'", 4},
      {"path and url", "[[models]]\nname = \"a\"\npath = \"a.gguf\"\nurl = \"http://h\"\nmodel = \"m\"\n",
       "models[0]: needs exactly one of path (local) or url (remote)", 1},
      {"neither path nor url", "[[models]]\nname = \"a\"\n", "models[0]: needs exactly one", 1},
      {"url scheme", "[[models]]\nname = \"a\"\nurl = \"ftp://h\"\nmodel = \"m\"\n", "models[0].url: 'ftp://h' must start with http://", 1},
      {"remote without model", "[[models]]\nname = \"a\"\nurl = \"http://h\"\n", "models[0].model: required for a remote backend", 1},
      {"local with model", "[[models]]\nname = \"a\"\npath = \"a.gguf\"\nmodel = \"m\"\n", "models[0].model: only for remote", 1},
      {"unknown model key", "[[models]]\nname = \"a\"\npath = \"p\"\nweight = 2\n", "models[0].weight: unknown key", 4},
      {"queue bound", "[[models]]\nname = \"a\"\npath = \"p\"\nmax_queue_requests = 0\n",
       "models[0].max_queue_requests: value 0 is outside", 4},
      {"margin below 1", "[admission]\nprediction_margin = 0.9\n",
       "admission.prediction_margin: value 0.9 is outside", 2},
      {"negative stale", "[admission]\nspeed_stale_ms = -1\n",
       "admission.speed_stale_ms: value -1 is outside", 2},
  };
  for (const BadCase& bc : cases) {
    auto r = ParseSloConfig(bc.toml, "slo.toml");
    ASSERT_FALSE(r.ok()) << bc.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bc.name;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(bc.expect_key), std::string::npos) << bc.name << ": " << m;
    const std::string where = "slo.toml:" + std::to_string(bc.expect_line) + ":";
    EXPECT_EQ(m.rfind(where, 0), 0u) << bc.name << ": " << m;
  }
}

TEST(SloConfigTest, LoadFile) {
  auto missing = LoadSloConfigFile("/nonexistent/dir/slo.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/slo.toml"), std::string::npos);

  const std::string path = ::testing::TempDir() + "/slo_config_test_" + std::to_string(::getpid()) + ".toml";
  {
    std::ofstream out(path);
    out << "[ladder]\nrecover_ticks = 7\n\n[batching]\ncap = 0\n";
  }
  auto bad = LoadSloConfigFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind(path + ":5: batching.cap", 0), 0u)
      << bad.status().message();
  {
    std::ofstream out(path);
    out << "[ladder]\nrecover_ticks = 7\n";
  }
  auto good = LoadSloConfigFile(path);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->ladder.recover_ticks, 7);
  std::remove(path.c_str());
}

// serve's start-up check of the file's local [[models]] paths: each failure names the file,
// the entry's line, index and name, and the path.
TEST(SloConfigTest, CheckModelFilesNamesFileEntryAndPath) {
  const std::string dir = ::testing::TempDir() + "/slo_model_files_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string model = dir + "/m.gguf";
  {
    std::ofstream out(model);
    out << "GGUF";
  }
  auto check = [](const std::string& toml) {
    auto c = ParseSloConfig(toml, "slo.toml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? CheckModelFiles(*c, "slo.toml") : c.status();
  };
  // Existing files and remote members pass.
  EXPECT_TRUE(check("[[models]]\nname = \"a\"\npath = \"" + model +
                    "\"\n[[models]]\nname = \"r\"\nurl = \"http://h:1/v1\"\nmodel = \"x\"\n")
                  .ok());
  const std::string missing = dir + "/missing.gguf";
  Status s = check("[[models]]\nname = \"a\"\npath = \"" + model +
                   "\"\n\n[[models]]\nname = \"b\"\npath = \"" + missing + "\"\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "slo.toml:5: models[1] ('b').path: '" + missing + "' does not exist");
  s = check("[[models]]\nname = \"d\"\npath = \"" + dir + "\"\n");
  EXPECT_EQ(s.message(), "slo.toml:1: models[0] ('d').path: '" + dir + "' is a directory, not a file");
  s = check("[[models]]\nname = \"n\"\npath = \"/dev/null\"\n");
  EXPECT_EQ(s.message(), "slo.toml:1: models[0] ('n').path: '/dev/null' is not a regular file");
  if (::geteuid() != 0) {  // root reads any file
    ASSERT_EQ(::chmod(model.c_str(), 0), 0);
    s = check("[[models]]\nname = \"u\"\npath = \"" + model + "\"\n");
    EXPECT_EQ(s.message().rfind("slo.toml:1: models[0] ('u').path: '" + model + "' cannot be read: ", 0),
              0u) << s.message();
  }
  std::remove(model.c_str());
  ::rmdir(dir.c_str());
}

TEST(ResolveTest, DefaultClassAndRoleMultiplier) {
  const SloConfig c = DefaultSloConfig();
  auto b = Resolve(c, {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->slo_class, "interactive");
  EXPECT_DOUBLE_EQ(b->ttft_budget_ms, 387);
  EXPECT_FALSE(b->e2e_budget_ms.has_value());
  EXPECT_DOUBLE_EQ(b->multiplier, 1.0);

  auto med = Resolve(c, Fields("Medical", "DOCTOR"));
  ASSERT_TRUE(med.ok()) << med.status().ToString();
  EXPECT_EQ(med->slo_class, "medical");
  EXPECT_EQ(med->priority, c.FindClass("medical")->priority);
  EXPECT_DOUBLE_EQ(med->ttft_budget_ms, 150 * 0.8);  // 120 ms

  auto user = Resolve(c, Fields("chat", "user", std::nullopt, true));
  ASSERT_TRUE(user.ok());
  EXPECT_DOUBLE_EQ(user->ttft_budget_ms, 350 * 1.3);  // 455 ms
  EXPECT_TRUE(user->allow_context_trim);
}

TEST(ResolveTest, DeadlinesAndEndToEndClasses) {
  const SloConfig c = DefaultSloConfig();
  // An e2e-only class: the first token must come within the e2e budget too.
  auto risk = Resolve(c, Fields("risk-control", "agent"));
  ASSERT_TRUE(risk.ok());
  EXPECT_DOUBLE_EQ(risk->e2e_budget_ms.value_or(-1), 85);
  EXPECT_DOUBLE_EQ(risk->ttft_budget_ms, 85);
  // An explicit deadline is the e2e budget (not scaled) and caps the TTFT budget.
  auto tight = Resolve(c, Fields("chat", "", 200));
  ASSERT_TRUE(tight.ok());
  EXPECT_DOUBLE_EQ(tight->e2e_budget_ms.value_or(-1), 200);
  EXPECT_DOUBLE_EQ(tight->ttft_budget_ms, 200);
  auto loose = Resolve(c, Fields("chat", "", 5000));
  ASSERT_TRUE(loose.ok());
  EXPECT_DOUBLE_EQ(loose->ttft_budget_ms, 350);
  EXPECT_DOUBLE_EQ(loose->e2e_budget_ms.value_or(-1), 5000);
  // A per-token target scales with the role.
  auto cfg = ParseSloConfig("[classes.chat]\ntpot_p95_ms = 50\n", "x");
  ASSERT_TRUE(cfg.ok());
  auto tp = Resolve(*cfg, Fields("chat", "doctor"));
  ASSERT_TRUE(tp.ok());
  EXPECT_DOUBLE_EQ(tp->tpot_budget_ms.value_or(-1), 40);
}

TEST(ResolveTest, ErrorsNameTheField) {
  const SloConfig c = DefaultSloConfig();
  auto cls = Resolve(c, Fields("gold"));
  ASSERT_FALSE(cls.ok());
  EXPECT_EQ(cls.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cls.status().message().rfind("slo_class: unknown class 'gold'", 0), 0u);
  EXPECT_NE(cls.status().message().find("interactive"), std::string::npos);  // lists known

  auto role = Resolve(c, Fields("chat", "nurse"));
  ASSERT_FALSE(role.ok());
  EXPECT_EQ(role.status().message().rfind("user_role: unknown role 'nurse'", 0), 0u);

  for (double bad : {0.0, -1.0, 3.6e6 + 1, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    auto d = Resolve(c, Fields("", "", bad));
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message().rfind("deadline_ms: value", 0), 0u) << d.status().message();
  }
  // A long hostile class name is not echoed in full.
  auto longname = Resolve(c, Fields(std::string(10000, 'x')));
  ASSERT_FALSE(longname.ok());
  EXPECT_LT(longname.status().message().size(), 400u);
}

}  // namespace
}  // namespace lifeline::slo
