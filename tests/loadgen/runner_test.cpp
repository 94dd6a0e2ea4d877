// The run loop against scripted servers: interleaved targets with identical requests and the
// hand-computed offset, a reproducible schedule, closed-loop concurrency, a sweep whose
// failing target stops early and is skipped at the higher load, and one without early stop
// that runs every step to the end for every target.
#include <algorithm>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "bench/loadgen/report.h"
#include "bench/loadgen/runner.h"
#include "loadgen/script_server.h"

namespace lifeline::loadgen {
namespace {

using testing::ChunkFrame;
using testing::JsonResponse;
using testing::Script;
using testing::ScriptServer;
using testing::SseHead;
using testing::TextEvent;

Script OneTokenStream(int delay_ms) {
  return Script{{{delay_ms, SseHead() + ChunkFrame(TextEvent("x")) +
                                ChunkFrame("data: {\"choices\":[{\"index\":0,\"text\":\"\","
                                           "\"finish_reason\":\"stop\"}]}\n\n") +
                                ChunkFrame("data: [DONE]\n\n") + "0\r\n\r\n"}}};
}

std::string Body(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }

RunOptions BaseOptions(const std::vector<const ScriptServer*>& servers) {
  RunOptions o;
  char label = 'A';
  for (const ScriptServer* s : servers) {
    o.targets.push_back(*ParseTargetSpec("--target", s->url() + ",label=" + std::string(1, label++)));
  }
  o.workload.prompt_words = *ParseLengthDist("--prompt-len", "uniform:3:9");
  o.workload.output_tokens = *ParseLengthDist("--output-len", "4");
  o.timeout_s = 5;
  o.seed = 11;
  o.cooldown_s = 0.1;
  return o;
}

TEST(Runner, TwoTargetsInterleavedWithIdenticalRequests) {
  ScriptServer a([](const std::string&) { return OneTokenStream(0); });
  ScriptServer b([](const std::string&) { return OneTokenStream(0); });
  RunOptions o = BaseOptions({&a, &b});
  o.loads = {50};
  o.requests = 10;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 20u);
  std::map<int64_t, double> sched[2], start[2];
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.x.error, "") << r.x.error_detail;
    sched[r.target][r.index] = r.scheduled_ms;
    start[r.target][r.index] = r.start_ms;
  }
  // Target B sends request i 1 / (rate * targets) = 1 / (50 * 2) s = 10 ms after target A.
  double sum_gap = 0;
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(sched[1][i] - sched[0][i], 10.0, 1e-6);
    sum_gap += start[1][i] - start[0][i];
  }
  EXPECT_NEAR(sum_gap / 10, 10.0, 8.0);
  EXPECT_EQ(sched[0][0], 0.0);
  // Both targets got the same ten bodies.
  std::vector<std::string> ba, bb;
  for (const auto& r : a.requests()) ba.push_back(Body(r));
  for (const auto& r : b.requests()) bb.push_back(Body(r));
  std::sort(ba.begin(), ba.end());
  std::sort(bb.begin(), bb.end());
  EXPECT_EQ(ba, bb);
  EXPECT_EQ(ba.size(), 10u);
}

TEST(Runner, FixedSeedGivesTheSameSchedule) {
  ScriptServer a([](const std::string&) { return OneTokenStream(0); });
  RunOptions o = BaseOptions({&a});
  o.loads = {200};
  o.requests = 8;
  auto first = RunLoad(o, nullptr);
  auto second = RunLoad(o, nullptr);
  ASSERT_TRUE(first.ok() && second.ok());
  auto schedule = [](const RunData& r) {
    std::map<int64_t, double> m;
    for (const RequestRecord& rec : r.records) m[rec.index] = rec.scheduled_ms;
    return m;
  };
  EXPECT_EQ(schedule(*first), schedule(*second));
  o.seed = 12;
  auto other = RunLoad(o, nullptr);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(schedule(*first), schedule(*other));
}

TEST(Runner, ClosedLoopKeepsConcurrency) {
  ScriptServer a([](const std::string&) { return OneTokenStream(100); });
  RunOptions o = BaseOptions({&a});
  o.mode = LoadMode::kConcurrency;
  o.loads = {2};
  o.requests = 6;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->records.size(), 6u);
  EXPECT_EQ(a.max_concurrent(), 2);
  // Six 100 ms requests, two at a time: three rounds, at least 300 ms.
  EXPECT_GE(run->steps[0].targets[0].wall_s, 0.29);
}

// Conversations: user u's next turn (request i + N) is sent only after its previous turn was
// answered, and each turn's chat body resends the previous turn's messages as its prefix.
TEST(Runner, ConversationTurnsFollowTheirAnswers) {
  std::mutex mu;
  std::vector<std::string> bodies;
  ScriptServer a([&](const std::string& req) {
    std::lock_guard<std::mutex> lock(mu);
    bodies.push_back(Body(req));
    return OneTokenStream(30);
  });
  RunOptions o = BaseOptions({&a});
  o.mode = LoadMode::kConcurrency;
  o.workload.api = Api::kChat;
  o.workload.conversations = 2;
  o.workload.system_words = 5;
  o.workload.think_time_ms = 20;
  o.loads = {2};
  o.requests = 6;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 6u);
  std::map<int64_t, const RequestRecord*> by_index;
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.x.error, "") << r.x.error_detail;
    by_index[r.index] = &r;
  }
  ASSERT_EQ(by_index.size(), 6u);
  for (int64_t i = 2; i < 6; ++i) {
    const RequestRecord& prev = *by_index[i - 2];  // the same user's previous turn
    EXPECT_GE(by_index[i]->start_ms, prev.start_ms + prev.x.e2e_ms + 19) << "turn " << i;
  }
  EXPECT_LE(a.max_concurrent(), 2);
  // Each user's turns: the previous body's messages (but its last) start the next one.
  std::map<std::string, std::vector<nlohmann::json>> by_user;
  for (const std::string& b : bodies) {
    const nlohmann::json j = nlohmann::json::parse(b);
    const std::string first_user = j["messages"][1]["content"];
    by_user[first_user.substr(0, first_user.find(':'))].push_back(j["messages"]);
  }
  ASSERT_EQ(by_user.size(), 2u);
  for (const auto& [user, turns] : by_user) {
    ASSERT_EQ(turns.size(), 3u) << user;
    for (size_t t = 1; t < turns.size(); ++t) {
      ASSERT_EQ(turns[t].size(), turns[t - 1].size() + 2) << user;
      for (size_t m = 0; m < turns[t - 1].size(); ++m) EXPECT_EQ(turns[t][m], turns[t - 1][m]);
      EXPECT_EQ(turns[t][turns[t].size() - 2]["role"], "assistant");
    }
  }
}

TEST(Runner, SweepStopsAFailingTargetEarlyAndFindsKnees) {
  ScriptServer bad([](const std::string&) {
    return Script{{{0, JsonResponse(429, "Too Many Requests", R"({"error":{"message":"full"}})")}}};
  });
  ScriptServer good([](const std::string&) { return OneTokenStream(0); });
  RunOptions o = BaseOptions({&bad, &good});
  o.loads = {40, 80};
  o.requests = 20;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->steps.size(), 2u);
  const TargetStep& bad0 = run->steps[0].targets[0];
  EXPECT_TRUE(bad0.stopped_early);
  // With 20 planned, the second failure decides P95; a few more may have been in flight.
  EXPECT_LT(bad0.sent, 20);
  EXPECT_FALSE(run->steps[1].targets[0].ran);
  EXPECT_TRUE(run->steps[1].targets[1].ran);
  EXPECT_FALSE(run->steps[0].targets[1].stopped_early);

  ReportInputs in;
  in.options = &o;
  in.run = &*run;
  in.facts.resize(2);
  const Report rep = BuildReport(in);
  EXPECT_FALSE(rep.knees[0].has_value());
  EXPECT_EQ(rep.knees[1], 80.0);
  EXPECT_GE(rep.summaries[0].http_429, 2);
}

TEST(Runner, RejectsBadOptions) {
  RunOptions o;
  EXPECT_FALSE(ValidateRunOptions(o).ok());
  o.targets.push_back(*ParseTargetSpec("--target", "http://127.0.0.1:1"));
  o.loads = {1};
  EXPECT_NE(ValidateRunOptions(o).message().find("--requests or --duration"), std::string::npos);
  o.requests = 5;
  EXPECT_TRUE(ValidateRunOptions(o).ok());
  o.mode = LoadMode::kConcurrency;
  o.loads = {1.5};
  EXPECT_NE(ValidateRunOptions(o).message().find("--concurrency"), std::string::npos);
  o.mode = LoadMode::kRate;
  o.burstiness = 0;
  EXPECT_NE(ValidateRunOptions(o).message().find("--burstiness"), std::string::npos);
}

TEST(Runner, WithoutEarlyStopEveryStepRunsToTheEnd) {
  // A server that sheds everything fails every step's SLO; without early stop it still gets
  // every planned request at both loads (a goodput curve past the cliff needs those points).
  ScriptServer bad([](const std::string&) {
    return Script{{{0, JsonResponse(429, "Too Many Requests", R"({"error":{"message":"full"}})")}}};
  });
  RunOptions o = BaseOptions({&bad});
  o.loads = {40, 80};
  o.requests = 6;
  o.early_stop = false;
  auto run = RunLoad(o, nullptr);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->steps.size(), 2u);
  for (const StepData& st : run->steps) {
    EXPECT_TRUE(st.targets[0].ran);
    EXPECT_FALSE(st.targets[0].stopped_early);
    EXPECT_EQ(st.targets[0].sent, 6);
  }
  EXPECT_EQ(run->records.size(), 12u);
  EXPECT_EQ(bad.requests().size(), 12u);
}

}  // namespace
}  // namespace lifeline::loadgen
