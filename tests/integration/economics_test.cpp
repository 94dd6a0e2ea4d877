// The live economics through a real `lifeline serve` (docs/economics.md): requests of spread
// prompt lengths give a spread of TTFTs; the application's outcomes are posted from a planted
// model (abandonment 5 % below a knee at the median TTFT, 60 % at or above it), by request
// id; the server's own refit recovers the knee within its interval. The planted model reads
// the TTFT each answer reported -- the wait the server itself records -- so nothing here
// depends on the machine's speed, only on the spread being there.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/live_server.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class EconomicsTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--economics-refit-s", "1"});
    return args;
  }
};

struct Planted {
  double knee_ms = 0;
  int answered = 0;
};


// Requests of spread prompt lengths, then outcomes posted from a knee planted at their median
// TTFT (abandonment 5 % below, 60 % at or above), by request id.
void PlantKnee(uint16_t port, Planted* out) {
  constexpr int kRequests = 1200;
  struct Answer {
    std::string id;
    double ttft_ms;
  };
  std::vector<Answer> answers;
  std::mutex mu;
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < kRequests;) {
        // 1..~300 prompt tokens: the prefill spreads the TTFTs. The number first, so no two
        // prompts share a cached prefix (a cache hit would make every TTFT alike).
        std::string prompt = std::to_string(i) + " Once";
        for (int w = 0; w < (i * 37) % 60; ++w) prompt += " upon a time there";
        auto r = PostJson(port, "/v1/completions", GreedyCompletion(prompt, 1));
        // A busy machine may make the SLO plane shed a few (429): refusals are not samples.
        if (!r || r->status != 200) {
          if (!r || r->status != 429) failed.fetch_add(1);
          continue;
        }
        const json body = r->Json();
        std::lock_guard lock(mu);
        answers.push_back({r->Header("x-request-id"),
                           body.value("/timings/latency/ttft_ms"_json_pointer, -1.0)});
      }
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_EQ(failed.load(), 0);
  ASSERT_GE(answers.size(), static_cast<size_t>(kRequests) * 3 / 4) << "most requests were shed";
  const int answered = static_cast<int>(answers.size());

  std::vector<double> ttfts;
  for (const Answer& a : answers) ttfts.push_back(a.ttft_ms);
  std::sort(ttfts.begin(), ttfts.end());
  const double knee_ms = ttfts[ttfts.size() / 2];
  ASSERT_GT(ttfts[ttfts.size() * 9 / 10], ttfts[ttfts.size() / 10] + 4)
      << "the prompts did not spread the TTFTs";

  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  json events = json::array();
  for (const Answer& a : answers) {
    const bool left = u(rng) < (a.ttft_ms >= knee_ms ? 0.60 : 0.05);
    events.push_back({{"request_id", a.id}, {"type", left ? "abandoned" : "completed"}});
    if (events.size() == 1000) {
      auto r = PostJson(port, "/v1/outcomes", {{"events", events}});
      ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
      EXPECT_EQ(r->Json().value("joined", 0), 1000) << r->body;  // every id is in the window
      events = json::array();
    }
  }
  auto r = PostJson(port, "/v1/outcomes", {{"events", events}});
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  out->knee_ms = knee_ms;
  out->answered = answered;
}

TEST_F(EconomicsTest, PostedOutcomesFromAPlantedKneeAreRecoveredLive) {
  Planted planted;
  ASSERT_NO_FATAL_FAILURE(PlantKnee(port(), &planted));
  const double knee_ms = planted.knee_ms;
  const int answered = planted.answered;

  // The refit runs every second on its own thread: wait for one that saw every outcome.
  const auto deadline = Clock::now() + 60s;
  json cls;
  const int64_t posted_at_refits = [&] {
    auto e = Get("/v1/economics");
    return e ? e->Json().value("refits", int64_t{0}) : int64_t{0};
  }();
  while (Clock::now() < deadline) {
    auto e = Get("/v1/economics");
    ASSERT_TRUE(e && e->status == 200);
    const json j = e->Json();
    if (j.value("refits", int64_t{0}) >= posted_at_refits + 2 && !j["classes"].empty()) {
      cls = j["classes"][0];
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(cls.is_object()) << "no refit within 60 s";
  EXPECT_EQ(cls.value("samples", 0), answered) << cls;
  ASSERT_EQ(cls.value("status", ""), "found") << cls << " knee " << knee_ms;
  const double lo = cls["ci95_ms"][0].get<double>(), hi = cls["ci95_ms"][1].get<double>();
  EXPECT_LE(lo - 1.0, knee_ms) << cls << " knee " << knee_ms;
  EXPECT_GE(hi + 1.0, knee_ms) << cls << " knee " << knee_ms;
  EXPECT_NEAR(cls["cliff_ms"].get<double>(), knee_ms, 2.0) << cls;
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "lifeline_outcome_events_total", R"(result="joined")"), answered) << m;
}

// [autotune] enabled: once the refits agree on the cliff, the class's TTFT target moves toward
// cliff x (1 - margin) within its bounds, and /v1/slo says where the target now comes from.
class AutotuneTest : public LiveServerTest {
 protected:
  AutotuneTest()
      : config_(dir_.Write("slo.toml", R"(default_class = "search"
use_presets = false

[classes.search]
ttft_p95_ms = 60000
max_level = 0

[autotune]
enabled = true
margin = 0.5
max_step = 0.5
min_factor = 0.1
stable_refits = 2
min_interval_ms = 0
)")) {}
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = LiveServerTest::ServeArgs();
    args.insert(args.end(), {"--economics-refit-s", "1", "--config", config_});
    return args;
  }
  TempDir dir_;
  std::string config_;
};

TEST_F(AutotuneTest, AStableCliffMovesTheClassTargetWithinItsBounds) {
  Planted planted;
  ASSERT_NO_FATAL_FAILURE(PlantKnee(port(), &planted));
  // 60 s configured, the cliff a few ms: each move halves the target (max_step 0.5) until the
  // bound, 6 s (min_factor 0.1); the goal (half the cliff) lies below it.
  const auto deadline = Clock::now() + 60s;
  json target;
  while (Clock::now() < deadline) {
    auto s = Get("/v1/slo");
    ASSERT_TRUE(s && s->status == 200);
    const json status = s->Json();
    for (const json& c : status["classes"]) {
      if (c["name"] == "search") target = c;
    }
    if (target.is_object() && target["targets"]["ttft_p95_ms"].get<double>() <= 6000.0) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(target.is_object());
  EXPECT_DOUBLE_EQ(target["targets"]["ttft_p95_ms"].get<double>(), 6000.0) << target;
  EXPECT_EQ(target["target_sources"]["ttft_p95_ms"], "autotune") << target;
  EXPECT_EQ(target["configured_targets"]["ttft_p95_ms"], 60000.0) << target;
  auto e = Get("/v1/economics");
  ASSERT_TRUE(e && e->status == 200);
  const json moves = e->Json()["autotune"]["moves"];
  ASSERT_GE(moves.size(), 1u) << e->body;
  EXPECT_EQ(moves[0]["from_ms"], 60000.0) << moves;
  EXPECT_EQ(moves[0]["to_ms"], 30000.0) << moves;  // one step: half the target at most
  EXPECT_NE(server().StderrText().find("autotune: class search ttft_p95_ms 60000 -> 30000"),
            std::string::npos)
      << server().StderrText();
}

}  // namespace
}  // namespace lifeline::integration
