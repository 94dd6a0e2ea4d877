// Target specs, URLs, the planned requests and their bodies and headers, prompts files,
// header flags and the Server-Timing parser.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/loadgen/workload.h"

namespace lifeline::loadgen {
namespace {

TEST(TargetSpec, UrlModelLabelAndFacts) {
  auto t = ParseTargetSpec("--target",
                           "http://127.0.0.1:8080/api/,model=stories,label=lifeline,quant=Q8_0");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->url.host, "127.0.0.1");
  EXPECT_EQ(t->url.port, 8080);
  EXPECT_EQ(t->url.base_path, "/api");
  EXPECT_EQ(t->model, "stories");
  EXPECT_EQ(t->label, "lifeline");
  EXPECT_EQ(t->quant, "Q8_0");

  auto plain = ParseTargetSpec("--target", "http://localhost");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->url.port, 80);
  EXPECT_EQ(plain->label, "localhost:80");
  EXPECT_EQ(plain->model, "");

  auto v6 = net::ParseHttpUrl("http://[::1]:9000", "--target");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000");
}

TEST(TargetSpec, ErrorsNameTheFlag) {
  for (const char* bad : {"https://x:1", "ftp://x", "http://:80", "http://x:0", "http://x:99999",
                          "http://x:1,color=red", "http://x:1,model"}) {
    auto t = ParseTargetSpec("--target", bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("--target"), std::string::npos) << bad;
  }
  EXPECT_NE(ParseTargetSpec("--target", "https://x:1").status().message().find("https"),
            std::string::npos);
}

TEST(PlanRequest, DeterministicPerIndexAndWordCount) {
  WorkloadSpec w;
  w.prompt_words = *ParseLengthDist("--prompt-len", "uniform:5:40");
  w.output_tokens = *ParseLengthDist("--output-len", "uniform:1:100");
  for (int64_t i = 0; i < 50; ++i) {
    const PlannedRequest a = PlanRequest(w, 9, 0, i);
    const PlannedRequest b = PlanRequest(w, 9, 0, i);
    EXPECT_EQ(a.prompt, b.prompt);
    EXPECT_EQ(a.max_tokens, b.max_tokens);
    EXPECT_EQ(CountWords(a.prompt), a.prompt_words);
    EXPECT_GE(a.prompt_words, 5);
    EXPECT_LE(a.prompt_words, 40);
  }
  EXPECT_NE(PlanRequest(w, 9, 0, 1).prompt, PlanRequest(w, 10, 0, 1).prompt);

  w.prompts = {"alpha beta", "gamma"};
  const PlannedRequest f = PlanRequest(w, 1, 0, 3);
  EXPECT_TRUE(f.prompt == "alpha beta" || f.prompt == "gamma");
  EXPECT_EQ(f.prompt_words, CountWords(f.prompt));
}

TEST(RequestBody, CompletionsAndChat) {
  WorkloadSpec w;
  TargetSpec t;
  t.model = "m";
  PlannedRequest r;
  r.prompt = "hello there";
  r.max_tokens = 7;
  w.ignore_eos = true;
  w.slo_class = "interactive";
  w.slo_in_body = true;
  w.extra_body = {{"temperature", 0}};
  nlohmann::json b = nlohmann::json::parse(RequestBody(w, t, r));
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["prompt"], "hello there");
  EXPECT_EQ(b["max_tokens"], 7);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["slo_class"], "interactive");
  EXPECT_EQ(b["temperature"], 0);
  EXPECT_FALSE(b.contains("user_role"));

  w.api = Api::kChat;
  w.stream = false;
  t.model.clear();
  b = nlohmann::json::parse(RequestBody(w, t, r));
  EXPECT_FALSE(b.contains("model"));
  EXPECT_FALSE(b.contains("prompt"));
  EXPECT_EQ(b["messages"][0]["role"], "user");
  EXPECT_EQ(b["messages"][0]["content"], "hello there");
  EXPECT_EQ(b["stream"], false);
  EXPECT_FALSE(b.contains("stream_options"));
}

TEST(RequestBody, ExtraBodyStreamDecidesWhetherRequestsStream) {
  // --extra-body is merged last, so its "stream" is what the server sees: the Accept header,
  // stream_options and the default SLO metric must follow it, not --no-stream alone.
  WorkloadSpec w;
  EXPECT_TRUE(RequestsStream(w));
  w.extra_body = {{"stream", false}};
  EXPECT_FALSE(RequestsStream(w));
  const nlohmann::json b = nlohmann::json::parse(RequestBody(w, TargetSpec{}, PlannedRequest{}));
  EXPECT_EQ(b["stream"], false);
  EXPECT_FALSE(b.contains("stream_options"));
  const HttpRequestSpec spec = RequestSpec(w, TargetSpec{}, PlannedRequest{}, 5);
  bool json_accept = false;
  for (const auto& [k, v] : spec.headers) json_accept |= k == "Accept" && v == "application/json";
  EXPECT_TRUE(json_accept);
  w.stream = false;
  w.extra_body = {{"stream", true}};
  EXPECT_TRUE(RequestsStream(w));
  w.extra_body = {{"stream", "yes"}};  // not a boolean: the flag decides
  EXPECT_FALSE(RequestsStream(w));
}

TEST(RequestSpec, PathAndPassThroughHeaders) {
  WorkloadSpec w;
  w.slo_class = "batch";
  w.user_role = "admin";
  w.api_key = "k1";
  w.headers = {{"X-Trace", "abc"}};
  TargetSpec t = *ParseTargetSpec("--target", "http://h:1/base");
  const HttpRequestSpec s = RequestSpec(w, t, PlannedRequest{}, 5);
  EXPECT_EQ(s.path, "/v1/completions");
  EXPECT_EQ(s.url.base_path, "/base");
  auto has = [&](const std::string& k, const std::string& v) {
    for (const auto& [hk, hv] : s.headers) {
      if (hk == k && hv == v) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("X-SLO-Class", "batch"));
  EXPECT_TRUE(has("X-User-Role", "admin"));
  EXPECT_TRUE(has("Authorization", "Bearer k1"));
  EXPECT_TRUE(has("X-Trace", "abc"));
  w.api = Api::kChat;
  EXPECT_EQ(RequestSpec(w, t, PlannedRequest{}, 5).path, "/v1/chat/completions");
}

TEST(PromptsFile, LinesAndJsonl) {
  const std::string path = ::testing::TempDir() + "/prompts_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream out(path);
    out << "first prompt\n\n  {\"prompt\": \"from json\"}\n{\"text\": \"t\"}\r\nlast\n";
  }
  auto p = LoadPromptsFile(path);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (std::vector<std::string>{"first prompt", "from json", "t", "last"}));
  {
    std::ofstream out(path);
    out << "ok\n{\"other\": 1}\n";
  }
  auto bad = LoadPromptsFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(LoadPromptsFile(path).ok());
}

TEST(Thinking, FlagsAndPromptLinesReachTheBody) {
  WorkloadSpec w;
  w.api = Api::kChat;
  w.thinking.budget_tokens = 256;
  w.thinking.reasoning_effort = "low";
  w.prompts = {"a", "b"};
  ThinkingParams own;
  own.budget_tokens = 0;  // this prompt asks for no thinking
  w.prompt_thinking = {ThinkingParams{}, own};
  ASSERT_TRUE(ValidateWorkload(w).ok());
  TargetSpec t;
  bool saw_a = false, saw_b = false;
  for (int64_t i = 0; i < 64 && !(saw_a && saw_b); ++i) {
    const PlannedRequest r = PlanRequest(w, 7, 0, i);
    const nlohmann::json b = nlohmann::json::parse(RequestBody(w, t, r));
    EXPECT_EQ(b["reasoning_effort"], "low");
    if (r.prompt == "a") {
      saw_a = true;
      EXPECT_EQ(b["thinking_budget_tokens"], 256);
    } else {
      saw_b = true;
      EXPECT_EQ(b["thinking_budget_tokens"], 0) << "the line's own budget wins";
    }
  }
  EXPECT_TRUE(saw_a && saw_b);
  // Nothing is sent when nothing was asked.
  WorkloadSpec plain;
  plain.api = Api::kChat;
  const nlohmann::json b = nlohmann::json::parse(RequestBody(plain, t, PlanRequest(plain, 1, 0, 0)));
  EXPECT_FALSE(b.contains("thinking_budget_tokens"));
  EXPECT_FALSE(b.contains("reasoning_effort"));
}

TEST(Thinking, BadValuesAndCompletionsAreRefusedByName) {
  WorkloadSpec w;
  w.thinking.budget_tokens = 16;  // completions: servers refuse chat fields there
  Status s = ValidateWorkload(w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--api chat"), std::string::npos) << s.message();
  w.api = Api::kChat;
  w.thinking.budget_tokens = -2;
  s = ValidateWorkload(w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--thinking-budget"), std::string::npos) << s.message();
  w.thinking.budget_tokens = -1;
  w.thinking.reasoning_effort = "extreme";
  s = ValidateWorkload(w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'extreme'"), std::string::npos) << s.message();

  const std::string path =
      ::testing::TempDir() + "/thinking_prompts_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream out(path);
    out << "{\"prompt\": \"p\", \"thinking_budget_tokens\": 32, \"reasoning_effort\": \"high\"}\n"
           "plain\n";
  }
  std::vector<ThinkingParams> per_line;
  auto p = LoadPromptsFile(path, &per_line);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(per_line.size(), 2u);
  EXPECT_EQ(per_line[0].budget_tokens, 32);
  EXPECT_EQ(per_line[0].reasoning_effort, "high");
  EXPECT_FALSE(per_line[1].any());
  {
    std::ofstream out(path);
    out << "ok\n{\"prompt\": \"p\", \"thinking_budget_tokens\": \"many\"}\n";
  }
  auto bad = LoadPromptsFile(path, &per_line);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
  EXPECT_NE(bad.status().message().find("thinking_budget_tokens"), std::string::npos);
  std::remove(path.c_str());
}

// Conversations: request i is turn i / N of user i % N; a turn's messages begin with the
// previous turn's (the same text for every target), end with the new user message, and the
// request names its conversation in X-Session-Id.
TEST(Conversations, TurnsGrowFromTheSameHistory) {
  WorkloadSpec w;
  w.api = Api::kChat;
  w.conversations = 3;
  w.system_words = 7;
  w.reply_words = 4;
  const PlannedRequest t0 = PlanRequest(w, 5, 0, 1), t1 = PlanRequest(w, 5, 0, 4),
                       t2 = PlanRequest(w, 5, 0, 7);
  EXPECT_EQ(t0.user, 1);
  EXPECT_EQ(t1.user, 1);
  EXPECT_EQ(t2.turn, 2);
  ASSERT_EQ(t0.messages.size(), 2u);  // system, user
  ASSERT_EQ(t1.messages.size(), 4u);  // + assistant, user
  ASSERT_EQ(t2.messages.size(), 6u);
  EXPECT_EQ(t0.messages[0].first, "system");
  for (size_t m = 0; m < t1.messages.size(); ++m) EXPECT_EQ(t2.messages[m], t1.messages[m]);
  EXPECT_EQ(t1.messages[2].first, "assistant");
  EXPECT_EQ(CountWords(t1.messages[2].second), 4);
  // Another user shares the system text only.
  const PlannedRequest other = PlanRequest(w, 5, 0, 2);
  EXPECT_EQ(other.messages[0], t0.messages[0]);
  EXPECT_NE(other.messages[1], t0.messages[1]);
  TargetSpec t;
  const nlohmann::json body = nlohmann::json::parse(RequestBody(w, t, t1));
  ASSERT_EQ(body["messages"].size(), 4u);
  EXPECT_EQ(body["messages"][3]["role"], "user");
  bool session = false;
  for (const auto& [k, v] : RequestSpec(w, t, t1, 5).headers) {
    session |= k == "X-Session-Id" && v == "bench-user-1";
  }
  EXPECT_TRUE(session);
  // Completions: one transcript, ending where the assistant speaks.
  w.api = Api::kCompletions;
  const PlannedRequest c = PlanRequest(w, 5, 0, 4);
  EXPECT_EQ(c.prompt.rfind("\nassistant:"), c.prompt.size() - 11);
  w.conversations = -1;
  EXPECT_FALSE(ValidateWorkload(w).ok());
}

// Agent loops: after the task, each earlier step is an assistant tool call and its result,
// answered by id, and the request carries the tool; the history grows by the results.
TEST(Conversations, AgentLoopsGrowByToolResults) {
  WorkloadSpec w;
  w.api = Api::kChat;
  w.conversations = 2;
  w.system_words = 5;
  w.agent_tool_words = 40;
  const PlannedRequest step0 = PlanRequest(w, 5, 0, 1), step2 = PlanRequest(w, 5, 0, 5);
  ASSERT_EQ(step0.messages.size(), 2u);  // system, task
  ASSERT_EQ(step2.messages.size(), 6u);  // + (call, result) x 2
  for (size_t m = 0; m < step0.messages.size(); ++m) EXPECT_EQ(step2.messages[m], step0.messages[m]);
  TargetSpec t;
  const nlohmann::json body = nlohmann::json::parse(RequestBody(w, t, step2));
  const nlohmann::json& msgs = body["messages"];
  ASSERT_EQ(msgs.size(), 6u);
  EXPECT_EQ(msgs[1]["role"], "user");
  EXPECT_EQ(msgs[2]["role"], "assistant");
  EXPECT_EQ(msgs[2]["content"], "");
  EXPECT_EQ(msgs[2]["tool_calls"][0]["id"], "call_0");
  EXPECT_EQ(msgs[2]["tool_calls"][0]["function"]["name"], "lookup");
  EXPECT_TRUE(nlohmann::json::parse(msgs[2]["tool_calls"][0]["function"]["arguments"].get<std::string>())
                  .contains("query"));
  EXPECT_EQ(msgs[3]["role"], "tool");
  EXPECT_EQ(msgs[3]["tool_call_id"], "call_0");
  EXPECT_EQ(CountWords(msgs[3]["content"]), 41);  // "Result:" + 40 words
  EXPECT_EQ(msgs[5]["tool_call_id"], "call_1");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "lookup");
  // Agents are conversations.
  w.conversations = 0;
  EXPECT_FALSE(ValidateWorkload(w).ok());
  w.conversations = 2;
  w.agent_tool_words = -1;
  EXPECT_FALSE(ValidateWorkload(w).ok());
}

TEST(Header, ParseAndReject) {
  auto h = ParseHeader("--header", "X-A:  b c ");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->first, "X-A");
  EXPECT_EQ(h->second, "b c");
  EXPECT_FALSE(ParseHeader("--header", "novalue").ok());
  EXPECT_FALSE(ParseHeader("--header", "Bad Name: x").ok());
}

TEST(ServerTiming, ParsesDurations) {
  const nlohmann::json t = ParseServerTiming("queue;dur=1.5, prefill;dur=30, junk, x;desc=\"a\"");
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t["queue_ms"].get<double>(), 1.5);
  EXPECT_EQ(t["prefill_ms"].get<double>(), 30);
}

}  // namespace
}  // namespace lifeline::loadgen
