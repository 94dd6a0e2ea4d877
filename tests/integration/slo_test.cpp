// The SLO control plane through the real `lifeline serve` binary and HTTP (the in-process
// ladder, level by level, is tests/serving/slo_serving_test.cpp; these check what a client
// sees):
//   - ladder under real load: stories260K served twice, as "heavy" and "light", cascade
//     heavy -> light (from the config file's [[models]], or from --cascade), and a class whose
//     TTFT target (1 us) no request can meet, so "past capacity" holds by construction: every
//     controller tick with 3 samples raises the level. Concurrent clients see routed responses
//     naming "light" in `model` and X-Served-Model, 429 + Retry-After once shed, GET /v1/slo
//     shows the level and events, the level returns to 0 after the load stops, and /metrics
//     reconciles with what the clients counted;
//   - predictive admission: a request whose deadline cannot be met behind a full queue is a
//     429 at once, answered while the requests ahead of it are still running;
//   - a bad config file ends `serve` with a message naming the file, line and key;
//   - an unknown X-SLO-Class / X-User-Role header is a 400 naming the field.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// One TTFT target no request can meet (1 us), a fast controller, a short window, no dwell:
// three samples in the window raise the level one step per 50 ms tick; an empty window lets
// it fall one step per two ticks. Predictive admission is off so that only the ladder routes
// and sheds here.
constexpr const char* kLadderToml = R"(default_class = "tight"

[classes.tight]
ttft_p95_ms = 0.001
priority = 1

[controller]
tick_ms = 50
min_samples = 3

[ladder]
min_dwell_ms = 0
raise_interval_ms = 0
recover_ticks = 2

[window]
bucket_ms = 100
buckets = 2

[admission]
predictive = false
)";

std::string LadderConfig(bool cascade_in_file) {
  std::string toml = kLadderToml;
  if (cascade_in_file) {
    const std::string path = ModelPath("stories260K.gguf");
    toml += "\n[[models]]\nname = \"heavy\"\npath = \"" + path +
            "\"\n\n[[models]]\nname = \"light\"\npath = \"" + path + "\"\n";
  }
  return toml;
}

// The string at `path` in `j` ("" when any step is missing or not the right type), so a body
// of an unexpected shape fails an expectation instead of throwing.
std::string StringAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
  }
  return at->is_string() ? at->get<std::string>() : "";
}

// What the clients saw, by outcome.
struct Tally {
  std::mutex mu;
  int ok_heavy = 0;
  int ok_light = 0;
  std::map<std::string, int> shed_by_model;  // 429s by the model their message names
  int shed = 0;
  std::vector<std::string> failures;  // anything else, for the failure message
};

// The model named in a shed message: "class 'tight' on model 'light' is shedding load: ...".
std::string ShedModel(const std::string& message) {
  const std::string key = "on model '";
  const size_t at = message.find(key);
  if (at == std::string::npos) return "";
  const size_t end = message.find('\'', at + key.size());
  return message.substr(at + key.size(), end - at - key.size());
}

// The class entry `name` of a GET /v1/slo body (null if absent).
json ClassStatus(const json& slo, const std::string& name) {
  if (!slo.is_object() || !slo.contains("classes") || !slo["classes"].is_array()) return nullptr;
  for (const json& c : slo["classes"]) {
    if (StringAt(c, {"name"}) == name) return c;
  }
  return nullptr;
}

// Ladder tests: the parameter tells whether the cascade comes from the config file's
// [[models]] (true) or from --cascade heavy,light (false).
class SloLadderTest : public LiveServerTest, public ::testing::WithParamInterface<bool> {
 protected:
  SloLadderTest() : config_path_(dir_.Write("slo.toml", LadderConfig(GetParam()))) {}

  std::vector<std::string> ServeArgs() const override {
    const std::string model = ModelPath("stories260K.gguf");
    std::vector<std::string> args = {"--model", "heavy=" + model, "--model", "light=" + model,
                                     "--config", config_path_, "--threads", "1",
                                     "--kv-memory", "16", "--max-waiting", "4096",
                                     "--drain-timeout", "5"};
    if (!GetParam()) {
      args.push_back("--cascade");
      args.push_back("heavy,light");
    }
    return args;
  }

  // The level of class "tight" on GET /v1/slo (-1 if unreadable).
  int TightLevel(json* slo_out = nullptr) {
    auto r = Get("/v1/slo");
    if (!r || r->status != 200) return -1;
    json slo = r->Json();
    const json c = ClassStatus(slo, "tight");
    if (slo_out != nullptr) *slo_out = slo;
    return c.is_object() && c.contains("level") && c["level"].is_number_integer()
               ? c["level"].get<int>()
               : -1;
  }

  TempDir dir_;
  std::string config_path_;
};

TEST_P(SloLadderTest, LadderRoutesShedsRecoversAndMetricsReconcile) {
  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int> max_level_seen{0};

  // Watches GET /v1/slo while the load runs.
  std::thread monitor([&] {
    while (!stop.load()) {
      const int level = TightLevel();
      if (level > max_level_seen.load()) max_level_seen.store(level);
      std::this_thread::sleep_for(20ms);
    }
  });

  // Eight clients ask "heavy" for short completions until each outcome was seen (or 90 s).
  auto seen_everything = [&] {
    std::lock_guard<std::mutex> lock(tally.mu);
    return tally.ok_light > 0 && tally.shed > 0 && tally.ok_heavy > 0 &&
           max_level_seen.load() > 0;
  };
  const auto deadline = Clock::now() + 90s;
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      json body = {{"model", "heavy"}, {"prompt", t % 2 ? "Once upon a time" : "The cat"},
                   {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
      while (!stop.load() && Clock::now() < deadline) {
        auto r = PostJson(port(), "/v1/completions", body, 60s);
        std::lock_guard<std::mutex> lock(tally.mu);
        if (!r) {
          tally.failures.push_back("no reply");
          continue;
        }
        const json j = r->Json();
        if (r->status == 200) {
          const std::string model = StringAt(j, {"model"});
          const std::string header = r->Header("x-served-model");
          if (model != header) {
            tally.failures.push_back("body model '" + model + "' but X-Served-Model '" + header + "'");
          }
          if (model == "heavy") {
            ++tally.ok_heavy;
          } else if (model == "light") {
            ++tally.ok_light;
          } else {
            tally.failures.push_back("200 from model '" + model + "'");
          }
        } else if (r->status == 429) {
          ++tally.shed;
          const std::string message = StringAt(j, {"error", "message"});
          ++tally.shed_by_model[ShedModel(message)];
          const std::string retry = r->Header("retry-after");
          if (retry.empty() || retry.find_first_not_of("0123456789") != std::string::npos ||
              std::stoi(retry) < 1) {
            tally.failures.push_back("429 with Retry-After '" + retry + "'");
          }
          if (StringAt(j, {"error", "code"}) != "slo_shed" ||
              message.find("'tight'") == std::string::npos) {
            tally.failures.push_back("429 body " + r->body);
          }
        } else {
          tally.failures.push_back(std::to_string(r->status) + " " + r->body);
        }
      }
    });
  }
  while (Clock::now() < deadline && !seen_everything()) std::this_thread::sleep_for(50ms);
  stop.store(true);
  for (auto& c : clients) c.join();
  monitor.join();

  {
    std::lock_guard<std::mutex> lock(tally.mu);
    std::printf("clients: %d from heavy, %d from light, %d shed; max level seen %d\n",
                tally.ok_heavy, tally.ok_light, tally.shed, max_level_seen.load());
    EXPECT_TRUE(tally.failures.empty())
        << tally.failures.size() << " unexpected replies, first: " << tally.failures.front();
    EXPECT_GT(tally.ok_heavy, 0);
    EXPECT_GT(tally.ok_light, 0) << "no request routed to the light model";
    EXPECT_GT(tally.shed, 0) << "no request shed";
    EXPECT_GT(max_level_seen.load(), 0) << "GET /v1/slo never showed the ladder engaged";
  }

  // Load stopped: the window empties, every tick is healthy, the level falls back to 0.
  json slo;
  int level = -1;
  const auto recover_deadline = Clock::now() + 30s;
  while (Clock::now() < recover_deadline) {
    level = TightLevel(&slo);
    if (level == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(level, 0) << "the ladder did not return to normal within 30 s: " << slo.dump();
  ASSERT_TRUE(slo["events"].is_array() && !slo["events"].empty()) << slo.dump();
  const json& events = slo["events"];
  EXPECT_EQ(StringAt(events.back(), {"to"}), "normal") << events.back().dump();
  bool shed_event = false;
  for (const json& e : events) {
    EXPECT_EQ(StringAt(e, {"class"}), "tight") << e.dump();
    EXPECT_NE(StringAt(e, {"reason"}), "") << e.dump();
    shed_event = shed_event || StringAt(e, {"to"}) == "shed";
  }
  EXPECT_TRUE(shed_event || slo.value("events_total", int64_t{-1}) > static_cast<int64_t>(events.size()))
      << "no transition to shed among the events: " << slo.dump();

  // /metrics against the clients' tally (the ledger identity itself is checked in TearDown).
  ASSERT_TRUE(WaitIdle(10s)) << Metrics();
  const std::string m = Metrics();
  const double ok_total = tally.ok_heavy + tally.ok_light;
  auto outcome = [&](const std::string& model, const std::string& what) {
    return MetricValue(m, "lifeline_slo_requests_total",
                       "class=\"tight\",model=\"" + model + "\",outcome=\"" + what + "\"")
        .value_or(0);
  };
  EXPECT_EQ(outcome("heavy", "admitted"), tally.ok_heavy) << m;
  EXPECT_EQ(outcome("light", "admitted"), tally.ok_light) << m;
  EXPECT_EQ(outcome("heavy", "shed_429"), tally.shed_by_model["heavy"]) << m;
  EXPECT_EQ(outcome("light", "shed_429"), tally.shed_by_model["light"]) << m;
  EXPECT_EQ(tally.shed_by_model["heavy"] + tally.shed_by_model["light"], tally.shed)
      << "a 429 message named neither model";
  // Every request that reached "light" came through a route from "heavy".
  EXPECT_EQ(outcome("heavy", "routed"), tally.ok_light + tally.shed_by_model["light"]) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_accepted_total"), ok_total) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_requests_completed_total"), ok_total) << m;
  EXPECT_EQ(MetricValue(m, "lifeline_http_responses_total",
                        R"(route="/v1/completions",status="429")")
                .value_or(0),
            tally.shed)
      << m;
  // Every completed request left one TTFT sample under its (class, model).
  EXPECT_EQ(MetricValue(m, "lifeline_ttft_seconds_count", R"(class="tight",model="heavy")"),
            tally.ok_heavy)
      << m;
  EXPECT_EQ(MetricValue(m, "lifeline_ttft_seconds_count", R"(class="tight",model="light")"),
            tally.ok_light)
      << m;
  // Transition counters agree with the event log; the level gauge is back at 0.
  EXPECT_EQ(MetricValue(m, "lifeline_slo_ladder_transitions_total", R"(class="tight")"),
            slo.value("events_total", -1.0))
      << m;
  EXPECT_EQ(MetricValue(m, "lifeline_slo_degradation_level", R"(class="tight")"), 0.0) << m;

  // Recovered: a request for "heavy" is served by "heavy" again.
  auto after = Post("/v1/completions", {{"model", "heavy"}, {"prompt", "Once"}, {"max_tokens", 2}});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200) << after->body;
  EXPECT_EQ(StringAt(after->Json(), {"model"}), "heavy");
  EXPECT_EQ(after->Header("x-served-model"), "heavy");
}

INSTANTIATE_TEST_SUITE_P(CascadeFrom, SloLadderTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "ConfigFile" : "CascadeFlag";
                         });

// Predictive admission: one model, one running sequence and 16-token steps, so a queue of
// long prompts takes many steps to drain. The "bulk" class has a TTFT budget no prediction
// reaches and a ladder that stays at 0, so only a request's own deadline can make the
// prediction refuse it.
constexpr const char* kAdmissionToml = R"(default_class = "bulk"

[classes.bulk]
ttft_p95_ms = 600000
max_level = 0
)";

class PredictiveAdmissionTest : public LiveServerTest {
 protected:
  PredictiveAdmissionTest() : config_path_(dir_.Write("slo.toml", kAdmissionToml)) {}

  std::vector<std::string> ServeArgs() const override {
    return {"--model", "stories=" + ModelPath("stories260K.gguf"), "--config", config_path_,
            "--threads", "1", "--kv-memory", "16", "--max-running", "1",
            "--max-step-tokens", "16", "--max-waiting", "1024", "--drain-timeout", "5"};
  }

  TempDir dir_;
  std::string config_path_;
};

// About 340 prompt tokens for stories260K's 512-token vocabulary.
std::string LongPrompt() {
  std::string p;
  for (int i = 0; i < 24; ++i) p += "Once upon a time there was a little girl named Lily. ";
  return p;
}

TEST_F(PredictiveAdmissionTest, UnmeetableDeadlineBehindAFullQueueIs429AtOnce) {
  // "Alone" is the server's own judgement, not a wall-clock reading of this test's (which a
  // busy machine skews either way): on the idle model a deadline it cannot meet even alone
  // is a 400 (tests/integration/reliability_test.cpp), so the deadline grows by 1.25x from
  // 1 ms until the request is admitted: the first admitted deadline is under 1.25 times what
  // the long prompt needs alone by the server's own fit.
  json late = GreedyCompletion(LongPrompt(), 8);
  double alone_deadline_ms = 0;
  for (double d = 1; d <= 60000; d *= 1.25) {
    late["deadline_ms"] = static_cast<int64_t>(std::ceil(d));
    auto w = Post("/v1/completions", late);
    ASSERT_TRUE(w);
    if (w->status == 400) {
      ASSERT_NE(w->body.find("cannot be met"), std::string::npos) << w->body;
      continue;
    }
    // Admitted: the server judged it meetable alone. On a busy machine the admitted request
    // may still miss it (503 deadline_exceeded); the judgement is what this needs.
    if (w->status != 200) {
      ASSERT_EQ(w->status, 503) << w->body;
      ASSERT_EQ(StringAt(w->Json(), {"error", "code"}), "deadline_exceeded") << w->body;
    }
    alone_deadline_ms = std::ceil(d);
    break;
  }
  ASSERT_GT(alone_deadline_ms, 0) << "no deadline up to 60 s was served on the idle model";
  // Fill the queue: long prompts, 64 tokens each, one sequence at a time.
  constexpr int kBackground = 12;
  std::atomic<int> background_ok{0};
  std::mutex mu;
  std::vector<Clock::time_point> finished_at;
  std::vector<std::thread> background;
  for (int i = 0; i < kBackground; ++i) {
    background.emplace_back([&] {
      json body = GreedyCompletion(LongPrompt(), 64);
      body["ignore_eos"] = true;
      auto r = PostJson(port(), "/v1/completions", body, 120s);
      std::lock_guard<std::mutex> lock(mu);
      finished_at.push_back(Clock::now());
      if (r && r->status == 200) background_ok.fetch_add(1);
    });
  }
  const auto queue_deadline = Clock::now() + 30s;
  double depth = 0;
  while (Clock::now() < queue_deadline && depth < 8) {
    depth = MetricValue(Metrics(), "lifeline_queue_depth", R"(model="stories")").value_or(0);
    if (depth < 8) std::this_thread::sleep_for(5ms);
  }
  ASSERT_GE(depth, 8) << "the queue never filled: " << Metrics();

  // That deadline now, behind eight or more queued long prompts: the request could meet it
  // alone but not behind their prefills. (Should the fit have moved so that the request no
  // longer fits alone, a 400 says so, and the deadline grows again.)
  std::optional<HttpReply> r;
  for (double d = alone_deadline_ms; d <= 60000; d *= 1.25) {
    late["deadline_ms"] = static_cast<int64_t>(std::ceil(d));
    r = Post("/v1/completions", late);
    ASSERT_TRUE(r);
    if (r->status != 400) break;
    ASSERT_NE(r->body.find("cannot be met"), std::string::npos) << r->body;
  }
  const auto answered_at = Clock::now();
  for (auto& t : background) t.join();

  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  const json body = r->Json();
  EXPECT_EQ(StringAt(body, {"error", "code"}), "slo_shed") << r->body;
  EXPECT_NE(StringAt(body, {"error", "message"}).find("predicted ttft"), std::string::npos)
      << r->body;
  const std::string retry = r->Header("retry-after");
  EXPECT_FALSE(retry.empty()) << "429 without Retry-After";
  // At once: the refusal came back while requests queued ahead of it were still running
  // (a request admitted and then failed at its deadline would come back as a late 503).
  int finished_after = 0;
  for (const auto& t : finished_at) finished_after += t > answered_at ? 1 : 0;
  EXPECT_GT(finished_after, 0) << "every request ahead had finished before the 429 came back";
  EXPECT_EQ(background_ok.load(), kBackground);
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "lifeline_slo_requests_total",
                        R"(class="bulk",model="stories",outcome="shed_429")"),
            1.0)
      << m;
}

// A bad config file: `serve` exits non-zero, and its message names the file, line and key.
TEST(SloConfigFileTest, BadConfigExitsNonZeroNamingFileLineAndKey) {
  TempDir dir;
  struct Case {
    std::string toml;
    std::vector<std::string> expected;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"[controller]\ntick_ms = 200\n\n[ladder]\nrecover_ticks = 0\n",
       {"bad.toml:5", "ladder.recover_ticks", "[1, 100000]"}},
      {"default_class = \"interactive\"\n[ladder]\nbogus_knob = 1\n",
       {"bad.toml:3", "ladder.bogus_knob"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.toml);
    const std::string path = dir.Write("bad.toml", c.toml);
    ServerProcess server;
    const std::string err = server.Start({"--model", "stories=" + ModelPath("stories260K.gguf"),
                                          "--threads", "1", "--kv-memory", "16", "--config",
                                          path});
    EXPECT_NE(err, "") << "serve started with a bad config";
    ASSERT_TRUE(server.exit_status().has_value()) << err;
    EXPECT_NE(*server.exit_status(), 0) << err;
    EXPECT_FALSE(server.killed()) << "it had to be killed instead of exiting: " << err;
    const std::string stderr_text = server.StderrText();
    for (const std::string& s : c.expected) {
      EXPECT_NE(stderr_text.find(s), std::string::npos) << "'" << s << "' not in: " << stderr_text;
    }
  }
}

// Unknown class / role in the headers: 400 naming the field, before anything is queued.
using SloHeaderTest = LiveServerTest;

TEST_F(SloHeaderTest, UnknownClassOrRoleHeaderIs400NamingTheField) {
  const std::string body = GreedyCompletion("Once upon a time", 2).dump();
  struct Case {
    std::string header;
    std::string param;
    std::string value;
  };
  for (const Case& c : {Case{"X-SLO-Class: gold\r\n", "slo_class", "gold"},
                        Case{"X-User-Role: nurse\r\n", "user_role", "nurse"}}) {
    auto r = Roundtrip(port(), PostRequest("/v1/completions", body, c.header), 10s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json body = r->Json();
    EXPECT_EQ(StringAt(body, {"error", "param"}), c.param) << r->body;
    const std::string message = StringAt(body, {"error", "message"});
    EXPECT_TRUE(message.starts_with(c.param + ":")) << r->body;
    EXPECT_NE(message.find(c.value), std::string::npos) << r->body;
  }
  // Known names pass, case-insensitively.
  auto ok = Roundtrip(port(),
                      PostRequest("/v1/completions", body, "X-SLO-Class: Chat\r\nX-User-Role: doctor\r\n"),
                      30s);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(MetricValue(Metrics(), "lifeline_requests_accepted_total"), 1.0);
}

}  // namespace
}  // namespace lifeline::integration
