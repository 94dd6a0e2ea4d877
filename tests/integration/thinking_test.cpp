// A thinking model behind the real server: a model on Qwen's real vocabulary (make-model
// --vocab-from ../shared/reference/tokenizer/ggml-vocab-qwen2.gguf) served with DeepSeek R1's
// real chat template (tests/template/data/templates), whose generation prompt already opens
// "<think>\n" -- the shape of the R1 Qwen distills. The model is random, so it never closes
// its thinking by itself: only the budget ends it.
//   - /v1/models announces the reasoning format the template implies;
//   - thinking_budget_tokens: the thinking stops at the budget (the close is forced) and an
//     answer follows; message.reasoning_content holds the thinking, content the answer;
//     usage and timings.lifeline.reasoning count it; ttfa_ms comes after ttft_ms;
//   - the streamed answer splits exactly as the whole one (greedy, same body);
//   - reasoning_effort maps to a budget ("minimal": none); enable_thinking=false is none;
//   - response_format constrains the answer, not the thinking;
//   - bad values are 400s naming the field.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/live_server.h"
#include "test_paths.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using lifeline::testing::SseData;

class ThinkingTest : public LiveServerTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("lifeline-thinking-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const std::string cmd =
        testing::LifelineBinary() +
        " make-model --dim 64 --layers 1 --heads 2 --ffn 128 --tied --type f16 --seed 5 "
        "--ctx 2048 --vocab-from " +
        testing::SharedPath("reference/tokenizer/ggml-vocab-qwen2.gguf") + " -o " +
        (dir_ / "r1.gguf").string() + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  std::vector<std::string> ServeArgs() const override {
    return {"--model", "r1=" + (dir_ / "r1.gguf").string(), "--chat-template-file",
            std::string(LIFELINE_SOURCE_DIR) +
                "/tests/template/data/templates/deepseek-r1-distill-llama-8b.jinja",
            "--threads", "1", "--kv-memory", "64"};
  }

  static json Body(json extra) {
    json b = {{"model", "r1"},
              {"messages", json::array({{{"role", "user"}, {"content", "Why is the sky blue?"}}})},
              {"max_tokens", 40},
              {"temperature", 0}};
    for (auto& [k, v] : extra.items()) b[k] = v;
    return b;
  }

  static std::filesystem::path dir_;
};

std::filesystem::path ThinkingTest::dir_;

TEST_F(ThinkingTest, TheModelsListNamesTheReasoningFormat) {
  auto models = Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->Json()["data"].size(), 1u);
  EXPECT_EQ(models->Json()["data"][0]["meta"]["reasoning_format"], "think");
}

TEST_F(ThinkingTest, TheBudgetEndsTheThinkingAndTheAnswerFollows) {
  auto r = Post("/v1/chat/completions", Body({{"thinking_budget_tokens", 8}}), 60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->Json();
  const json& message = body["choices"][0]["message"];
  ASSERT_TRUE(message.contains("reasoning_content")) << message.dump();
  const std::string reasoning = message["reasoning_content"];
  const std::string content = message["content"];
  EXPECT_FALSE(reasoning.empty());
  EXPECT_FALSE(content.empty()) << "the answer comes after the forced close";
  EXPECT_EQ(reasoning.find("</think>"), std::string::npos);
  EXPECT_EQ(content.find("</think>"), std::string::npos);

  const int64_t thought = body["usage"]["completion_tokens_details"]["reasoning_tokens"];
  EXPECT_GE(thought, 9) << "8 thinking tokens and the close";
  EXPECT_LE(thought, 8 + 4) << "the close is '\\n</think>\\n\\n': a few tokens";
  EXPECT_GT(body["usage"]["completion_tokens"].get<int64_t>(), thought);
  const json& lifeline = body["timings"]["lifeline"]["reasoning"];
  EXPECT_EQ(lifeline["budget_tokens"], 8);
  EXPECT_EQ(lifeline["cut"], true);
  EXPECT_EQ(lifeline["tokens"], thought);
  EXPECT_EQ(r->Header("x-lifeline-thinking"),
            "tokens=" + std::to_string(thought) + "; budget=8; cut");
  EXPECT_NE(r->Header("server-timing").find("ttfa;dur="), std::string::npos);
  const json& latency = body["timings"]["latency"];
  EXPECT_GT(latency["ttfa_ms"].get<double>(), latency["ttft_ms"].get<double>())
      << "the answer starts after the thinking";
}

TEST_F(ThinkingTest, AStreamSplitsExactlyAsTheWholeAnswer) {
  const json body = Body({{"thinking_budget_tokens", 6}, {"max_tokens", 30}});
  auto whole = Post("/v1/chat/completions", body, 60s);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  json streamed = body;
  streamed["stream"] = true;
  auto s = Post("/v1/chat/completions", streamed, 60s);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  std::string reasoning, content;
  bool content_before_reasoning_ended = false;
  for (const std::string& data : SseData(s->body)) {
    if (data == "[DONE]") continue;
    const json ev = json::parse(data);
    if (ev["choices"].empty()) continue;
    const json& delta = ev["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      if (!content.empty()) content_before_reasoning_ended = true;
      reasoning += delta["reasoning_content"].get<std::string>();
    }
    if (delta.contains("content") && delta["content"].is_string()) {
      content += delta["content"].get<std::string>();
    }
  }
  const json whole_body = whole->Json();
  const json& message = whole_body["choices"][0]["message"];
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  EXPECT_EQ(content, message["content"]);
  EXPECT_FALSE(content_before_reasoning_ended);
}

TEST_F(ThinkingTest, ReasoningEffortAndEnableThinkingSetTheBudget) {
  auto minimal = Post("/v1/chat/completions", Body({{"reasoning_effort", "minimal"}}), 60s);
  ASSERT_TRUE(minimal);
  ASSERT_EQ(minimal->status, 200) << minimal->body;
  EXPECT_EQ(minimal->Json()["timings"]["lifeline"]["reasoning"]["budget_tokens"], 0);
  EXPECT_LE(minimal->Json()["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(), 4)
      << "only the close";
  EXPECT_FALSE(minimal->Json()["choices"][0]["message"]["content"].get<std::string>().empty());

  auto off = Post("/v1/chat/completions",
                  Body({{"chat_template_kwargs", {{"enable_thinking", false}}}}), 60s);
  ASSERT_TRUE(off);
  ASSERT_EQ(off->status, 200) << off->body;
  EXPECT_EQ(off->Json()["timings"]["lifeline"]["reasoning"]["budget_tokens"], 0);

  // No budget at all: the random model thinks until max_tokens; all of it is reasoning.
  auto open = Post("/v1/chat/completions", Body({{"max_tokens", 12}}), 60s);
  ASSERT_TRUE(open);
  ASSERT_EQ(open->status, 200) << open->body;
  const json b = open->Json();
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["choices"][0]["message"]["content"], "");
  EXPECT_EQ(b["usage"]["completion_tokens_details"]["reasoning_tokens"], 12);
  EXPECT_EQ(b["timings"]["latency"]["ttfa_ms"], -1) << "no answer came";
}

TEST_F(ThinkingTest, AResponseFormatConstrainsTheAnswerNotTheThinking) {
  auto r = Post("/v1/chat/completions",
                Body({{"thinking_budget_tokens", 5},
                      {"max_tokens", 80},
                      {"response_format", {{"type", "json_object"}}}}),
                60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->Json();
  const json& message = body["choices"][0]["message"];
  EXPECT_FALSE(message["reasoning_content"].get<std::string>().empty());
  const std::string content = message["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content.front(), '{') << content;
  if (body["choices"][0]["finish_reason"] == "stop") {
    EXPECT_FALSE(json::parse(content, nullptr, false).is_discarded()) << content;
  }
}

// The load generator against the thinking model: it sends the thinking budget, sees the
// streamed thinking as the first tokens and the answer after them, and judges by TTFA.
TEST_F(ThinkingTest, TheBenchMeasuresTtfaAfterTheThinking) {
  const std::filesystem::path out = dir_ / "bench";
  const std::string cmd = testing::LifelineBinary() + " bench --target http://127.0.0.1:" +
                          std::to_string(port()) +
                          ",model=r1,label=r1 --api chat --thinking-budget 6 --output-len 14 "
                          "--rate 20 --requests 3 --seed 1 --slo-metric ttfa "
                          "--threshold-ms 600000 --extra-body '{\"temperature\":0}' "
                          "--progress never --out " + out.string() + " > " +
                          (dir_ / "bench.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out / "report.json");
  const json j = json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["config"]["slo_metric"], "ttfa");
  EXPECT_EQ(j["config"]["thinking_budget_tokens"], 6);
  ASSERT_EQ(j["requests"].size(), 3u);
  for (const json& r : j["requests"]) {
    ASSERT_TRUE(r["error"].is_null()) << r.dump();
    EXPECT_GE(r["reasoning_events"].get<int64_t>(), 1) << r.dump();
    ASSERT_TRUE(r["ttfa_ms"].is_number()) << r.dump();
    // The answer comes after the thinking (equal when one socket read carried both: a tiny
    // model decodes faster than the client reads).
    EXPECT_GE(r["ttfa_ms"].get<double>(), r["ttft_ms"].get<double>()) << r.dump();
    EXPECT_LE(r["ttfa_ms"].get<double>(), r["e2e_ms"].get<double>());
  }
  EXPECT_EQ(j["verdicts"][0]["p95_ms"], j["verdicts"][0]["ttfa_p95_ms"]);
}

TEST_F(ThinkingTest, BadReasoningFieldsAreRefusedByName) {
  auto effort = Post("/v1/chat/completions", Body({{"reasoning_effort", "extreme"}}));
  ASSERT_TRUE(effort);
  EXPECT_EQ(effort->status, 400);
  EXPECT_EQ(effort->Json()["error"]["param"], "reasoning_effort");
  auto budget = Post("/v1/chat/completions", Body({{"thinking_budget_tokens", -2}}));
  ASSERT_TRUE(budget);
  EXPECT_EQ(budget->status, 400);
  EXPECT_EQ(budget->Json()["error"]["param"], "thinking_budget_tokens");
  auto type = Post("/v1/chat/completions", Body({{"thinking_budget_tokens", "8"}}));
  ASSERT_TRUE(type);
  EXPECT_EQ(type->status, 400);
}

// serve --reasoning-field reasoning: vLLM's name for the thinking, whole and streamed.
class ThinkingVllmFieldTest : public ThinkingTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    std::vector<std::string> args = ThinkingTest::ServeArgs();
    args.push_back("--reasoning-field");
    args.push_back("reasoning");
    return args;
  }
};

TEST_F(ThinkingVllmFieldTest, TheThinkingIsCalledReasoning) {
  auto r = Post("/v1/chat/completions", Body({{"thinking_budget_tokens", 6}}), 60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->Json();
  const json& message = body["choices"][0]["message"];
  ASSERT_TRUE(message.contains("reasoning")) << message.dump();
  EXPECT_FALSE(message.contains("reasoning_content"));
  EXPECT_FALSE(message["reasoning"].get<std::string>().empty());
  auto s = Post("/v1/chat/completions", Body({{"thinking_budget_tokens", 6}, {"stream", true}}), 60s);
  ASSERT_TRUE(s);
  EXPECT_NE(s->body.find("\"reasoning\":"), std::string::npos);
  EXPECT_EQ(s->body.find("\"reasoning_content\":"), std::string::npos);
}

}  // namespace
}  // namespace lifeline::integration
