// A real server on models carrying real vocabularies (make-model --vocab-from the Qwen2/3 and
// Llama 3 vocabularies of ../shared/reference/tokenizer, with their chat templates):
//   - fill-in-the-middle: POST /infill and `suffix` on /v1/completions build
//     <|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> from the vocabulary's FIM
//     tokens (prompt_tokens = 3 + the tokens of both texts, counted through /tokenize);
//   - a forced tool call in Qwen3's own format (<tool_call> is a special token of its
//     vocabulary that the output must still show) parsed into message.tool_calls, streamed
//     and not; the format is announced in /v1/models.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "integration/live_server.h"
#include "test_paths.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;

class CodeAndToolsTest : public LiveServerTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("lifeline-code-tools-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    for (const auto& [vocab, out] : {std::pair{"ggml-vocab-qwen2.gguf", "qwen.gguf"},
                                     std::pair{"ggml-vocab-llama-bpe.gguf", "llama3.gguf"}}) {
      const std::string cmd =
          testing::LifelineBinary() +
          " make-model --dim 64 --layers 1 --heads 2 --ffn 128 --tied --type f16 --seed 3 "
          "--ctx 2048 --vocab-from " + testing::SharedPath(std::string("reference/tokenizer/") + vocab) +
          " -o " + (dir_ / out).string() + " > /dev/null 2>&1";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  std::vector<std::string> ServeArgs() const override {
    return {"--model", "qwen=" + (dir_ / "qwen.gguf").string(), "--model",
            "llama3=" + (dir_ / "llama3.gguf").string(), "--threads", "1", "--kv-memory", "64"};
  }

  size_t Tokens(const std::string& model, const std::string& text) {
    auto r = Post("/tokenize", {{"model", model}, {"content", text}, {"add_special", false}});
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->Json()["tokens"].size() : 0;
  }

  static inline std::filesystem::path dir_;
};

TEST_F(CodeAndToolsTest, InfillBuildsThePrefixSuffixMiddlePrompt) {
  const std::string prefix = "def add(a, b):\n    return ";
  const std::string suffix = "\n\nprint(add(1, 2))\n";
  const size_t expected = 3 + Tokens("qwen", prefix) + Tokens("qwen", suffix);

  auto infill = Post("/infill", {{"model", "qwen"}, {"input_prefix", prefix},
                                 {"input_suffix", suffix}, {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_TRUE(infill);
  ASSERT_EQ(infill->status, 200) << infill->body;
  const json body = infill->Json();
  EXPECT_EQ(body["usage"]["prompt_tokens"], expected);
  EXPECT_EQ(body["content"], body["choices"][0]["text"]);
  EXPECT_EQ(body["object"], "text_completion");

  auto completion = Post("/v1/completions", {{"model", "qwen"}, {"prompt", prefix},
                                             {"suffix", suffix}, {"max_tokens", 4},
                                             {"temperature", 0}});
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(completion->Json()["usage"]["prompt_tokens"], expected);
  EXPECT_EQ(completion->Json()["choices"][0]["text"], body["choices"][0]["text"]);

  // Without a suffix it is an ordinary completion of the prefix.
  auto plain = Post("/v1/completions", {{"model", "qwen"}, {"prompt", prefix}, {"max_tokens", 1}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->Json()["usage"]["prompt_tokens"], Tokens("qwen", prefix));

  auto missing = Post("/infill", {{"model", "qwen"}, {"input_suffix", suffix}});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(missing->Json()["error"]["param"], "input_prefix");
}

const json kWeatherTool = json::parse(R"({"type":"function","function":{"name":"get_weather",
  "parameters":{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]},
  "days":{"type":"integer"}},"required":["unit","days"],"additionalProperties":false}}})");

TEST_F(CodeAndToolsTest, QwenForcedToolCallInItsOwnFormat) {
  auto models = Get("/v1/models");
  ASSERT_TRUE(models);
  for (const json& m : models->Json()["data"]) {
    if (m["id"] == "qwen") EXPECT_EQ(m["meta"]["tool_call_format"], "hermes");
  }
  const json body = {{"model", "qwen"},
                     {"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
                     {"tools", json::array({kWeatherTool})},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                     // The template is Qwen3's, which thinks first; a random model would
                     // think until max_tokens (thinking then calling: ThinkingTest).
                     {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"max_tokens", 120},
                     {"temperature", 0}};
  auto r = Post("/v1/chat/completions", body, 60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;
  EXPECT_TRUE(args["days"].is_number_integer()) << args;
  EXPECT_TRUE(choice["message"]["content"].is_null());

  // Streamed: the same call, as OpenAI streams it.
  json streamed = body;
  streamed["stream"] = true;
  auto s = Post("/v1/chat/completions", streamed, 60s);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  std::string name, arguments, finish;
  for (const std::string& data : SseData(s->body)) {
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    const json& c = chunk["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    const json& tc = c["delta"]["tool_calls"][0];
    if (tc.contains("id")) name = tc["function"]["name"];
    arguments += tc["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), args);  // greedy: the same call
}

// tool_choice "auto": free text until the model writes <tool_call>, then the call must be well
// formed. The random model is pushed to the marker with logit_bias; without the grammar that
// starts at the marker it would write the marker again and again (no call at all).
TEST_F(CodeAndToolsTest, AutoToolChoiceCallsAreWellFormedFromTheMarkerOn) {
  auto tok = Post("/tokenize", {{"model", "qwen"}, {"content", "<tool_call>"}});
  ASSERT_TRUE(tok);
  ASSERT_EQ(tok->Json()["tokens"].size(), 1u) << tok->body;  // one special token
  const int marker = tok->Json()["tokens"][0];
  const json body = {{"model", "qwen"},
                     {"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
                     {"tools", json::array({kWeatherTool})},
                     {"parallel_tool_calls", false},
                     {"logit_bias", {{std::to_string(marker), 100}}},
                     {"max_tokens", 120},
                     {"temperature", 0}};
  auto r = Post("/v1/chat/completions", body, 60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
  const json args = json::parse(
      choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;

  // tool_choice "none": no grammar, the marker is not even written as text.
  json none = body;
  none["tool_choice"] = "none";
  auto n = Post("/v1/chat/completions", none, 60s);
  ASSERT_TRUE(n);
  ASSERT_EQ(n->status, 200) << n->body;
  EXPECT_FALSE(n->Json()["choices"][0]["message"].contains("tool_calls"));
}

TEST_F(CodeAndToolsTest, ASchemaAnswerOnA128kVocabulary) {
  const json schema = json::parse(R"({"type":"object","properties":{"ok":{"type":"boolean"},
      "n":{"type":"integer"}},"required":["ok","n"],"additionalProperties":false})");
  auto r = Post("/v1/chat/completions",
                {{"model", "llama3"},
                 {"messages", json::array({{{"role", "user"}, {"content", "JSON please"}}})},
                 {"response_format", {{"type", "json_schema"},
                                      {"json_schema", {{"name", "r"}, {"strict", true},
                                                       {"schema", schema}}}}},
                 {"max_tokens", 100},
                 {"temperature", 0}},
                60s);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->Json()["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "stop") << choice.dump();
  const json value = json::parse(choice["message"]["content"].get<std::string>());
  EXPECT_TRUE(value["ok"].is_boolean()) << value;
  EXPECT_TRUE(value["n"].is_number_integer()) << value;
  EXPECT_EQ(value.size(), 2u) << value;
}

}  // namespace
}  // namespace lifeline::integration
