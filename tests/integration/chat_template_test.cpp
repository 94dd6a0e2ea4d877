// Chat templates through the real server: models whose GGUF carries a real chat template (the
// Llama 3 and Qwen3 vocabularies of ../shared/reference/tokenizer, copied by make-model
// --vocab-from) are served, and for every conversation of tests/template/data the prompt the
// server builds is the one Python jinja2 rendered (reference.json): /apply-template character
// for character, and usage.prompt_tokens equal to the tokens of that rendering.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "integration/live_server.h"
#include "test_paths.h"

namespace lifeline::integration {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

std::filesystem::path TemplateData() {
  return std::filesystem::path(LIFELINE_TESTS_DIR) / "template" / "data";
}

ojson ReadJson(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ojson::parse(ss.str(), nullptr, false);
}

// reference.json's rendering of `conversation` by `tmpl` ("" + false when jinja2 refused it).
std::pair<std::string, bool> Reference(const std::string& tmpl, const std::string& conversation) {
  static const ojson ref = ReadJson(TemplateData() / "reference.json");
  for (const ojson& c : ref["cases"]) {
    if (c["template"] == tmpl && c["conversation"] == conversation) {
      if (c.contains("expected")) return {c["expected"].get<std::string>(), true};
      return {"", false};
    }
  }
  ADD_FAILURE() << "no reference case " << tmpl << " x " << conversation;
  return {"", false};
}

// The field the server refuses by design in `conv` ("" if none): Lifeline serves text models,
// so only text content parts and function tools are accepted (400 naming the field).
std::string RefusedByDesign(const ojson& conv) {
  const ojson& msgs = conv["messages"];
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ojson& c = msgs[i].contains("content") ? msgs[i]["content"] : ojson();
    if (!c.is_array()) continue;
    for (size_t j = 0; j < c.size(); ++j) {
      if (c[j].value("type", "") != "text") {
        return "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "].type";
      }
    }
  }
  if (conv.contains("tools")) {
    for (size_t i = 0; i < conv["tools"].size(); ++i) {
      if (conv["tools"][i].value("type", "") != "function") {
        return "tools[" + std::to_string(i) + "].type";
      }
    }
  }
  return "";
}

// A chat body for `conv` in the client's key order (PostJson would sort the keys).
std::string ChatBody(const std::string& model, const ojson& conv, int max_tokens) {
  ojson body = {{"model", model}, {"messages", conv["messages"]}};
  if (conv.contains("tools")) body["tools"] = conv["tools"];
  if (conv.contains("documents")) body["documents"] = conv["documents"];
  if (conv.contains("kwargs")) body["chat_template_kwargs"] = conv["kwargs"];
  if (conv.contains("add_generation_prompt")) body["add_generation_prompt"] = conv["add_generation_prompt"];
  body["max_tokens"] = max_tokens;
  body["temperature"] = 0;
  return body.dump();
}

std::optional<HttpReply> PostRaw(uint16_t port, const std::string& path, const std::string& body) {
  return Roundtrip(port, PostRequest(path, body), 60s);
}

// Writes a small random model carrying `vocab`'s tokenizer (and chat template) to `out`.
void MakeModel(const std::string& vocab, const std::string& out) {
  const std::string cmd = testing::LifelineBinary() + " make-model --dim 64 --layers 1 --heads 2 "
                          "--ffn 128 --tied --type f16 --seed 7 --ctx 4096 --vocab-from " +
                          testing::SharedPath("reference/tokenizer/" + vocab) + " -o " + out +
                          " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

class GgufTemplateTest : public LiveServerTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("lifeline-chat-template-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    MakeModel("ggml-vocab-llama-bpe.gguf", (dir_ / "llama3.gguf").string());
    MakeModel("ggml-vocab-qwen2.gguf", (dir_ / "qwen3.gguf").string());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  std::vector<std::string> ServeArgs() const override {
    return {"--model", "llama3=" + (dir_ / "llama3.gguf").string(),
            "--model", "qwen3=" + (dir_ / "qwen3.gguf").string(),
            "--threads", "1", "--kv-memory", "64", "--ctx", "4096"};
  }

  // Every conversation: /apply-template equals the jinja2 rendering of `tmpl`; a chat
  // completion's prompt_tokens equal the tokens of that text as a plain completion encodes
  // it, less the one BOS the completion path adds when the text already starts with it.
  void CheckModel(const std::string& model, const std::string& tmpl, bool text_has_bos) {
    const ojson convs = ReadJson(TemplateData() / "conversations.json");
    ASSERT_TRUE(convs.is_array());
    int compared = 0;
    for (const ojson& conv : convs) {
      const std::string name = conv["name"];
      SCOPED_TRACE(model + " x " + name);
      auto [expected, renders] = Reference(tmpl, name);
      auto applied = PostRaw(port(), "/apply-template", ChatBody(model, conv, 1));
      ASSERT_TRUE(applied);
      if (const std::string field = RefusedByDesign(conv); !field.empty()) {
        EXPECT_EQ(applied->status, 400) << applied->body;
        EXPECT_EQ(applied->Json()["error"]["param"], field) << applied->body;
        continue;
      }
      if (!renders) {  // jinja2 refused it: so must we, with a 400 naming the template
        EXPECT_EQ(applied->status, 400) << applied->body;
        continue;
      }
      ASSERT_EQ(applied->status, 200) << applied->body;
      EXPECT_EQ(applied->Json()["prompt"].get<std::string>(), expected);

      auto chat = PostRaw(port(), "/v1/chat/completions", ChatBody(model, conv, 1));
      ASSERT_TRUE(chat);
      ASSERT_EQ(chat->status, 200) << chat->body;
      auto plain = Post("/v1/completions", {{"model", model}, {"prompt", expected},
                                            {"max_tokens", 1}, {"temperature", 0}});
      ASSERT_TRUE(plain);
      ASSERT_EQ(plain->status, 200) << plain->body;
      const int64_t chat_tokens = chat->Json()["usage"]["prompt_tokens"];
      const int64_t plain_tokens = plain->Json()["usage"]["prompt_tokens"];
      EXPECT_EQ(chat_tokens, plain_tokens - (text_has_bos ? 1 : 0));
      ++compared;
    }
    EXPECT_GE(compared, 10);
  }

  static std::filesystem::path dir_;
};
std::filesystem::path GgufTemplateTest::dir_;

TEST_F(GgufTemplateTest, ModelsListTheTemplateInUse) {
  auto models = Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  for (const json& m : models->Json()["data"]) {
    EXPECT_EQ(m["meta"]["chat_template"]["source"], "gguf") << m.dump();
    EXPECT_EQ(m["meta"]["chat_template"]["name"], "tokenizer.chat_template") << m.dump();
  }
  EXPECT_NE(server().StderrText().find("chat template: gguf tokenizer.chat_template"),
            std::string::npos) << server().StderrText();
}

// The llama-bpe vocabulary's template is Meta-Llama-3-8B-Instruct's original one (byte for
// byte llama3-8b-instruct-orig.jinja); it writes <|begin_of_text|> itself, so no second BOS.
TEST_F(GgufTemplateTest, Llama3PromptsAreJinja2sRenderings) {
  CheckModel("llama3", "llama3-8b-instruct-orig", /*text_has_bos=*/true);
}

// The qwen2 vocabulary carries Qwen3's template (tools, tool results, reasoning, kwargs).
TEST_F(GgufTemplateTest, Qwen3PromptsAreJinja2sRenderings) {
  CheckModel("qwen3", "qwen3", /*text_has_bos=*/false);
}

// A template that refuses a conversation answers 400 with the template's own message (no
// fallback to another format), and the template in use shows as a file.
class FileTemplateTest : public LiveServerTest {
 protected:
  std::vector<std::string> ServeArgs() const override {
    return {"--model", "stories=" + ModelPath("stories260K.gguf"), "--threads", "1",
            "--kv-memory", "16", "--chat-template-file",
            (TemplateData() / "templates" / "gemma-7b-it.jinja").string()};
  }
};

TEST_F(FileTemplateTest, ARaisingTemplateIsA400WithItsMessage) {
  const std::string body =
      R"({"model":"stories","max_tokens":2,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})";
  for (const char* path : {"/v1/chat/completions", "/apply-template"}) {
    SCOPED_TRACE(path);
    auto r = PostRaw(port(), path, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = r->Json()["error"];
    EXPECT_EQ(e["code"], "template_error");
    EXPECT_NE(e["message"].get<std::string>().find("System role not supported"), std::string::npos)
        << e.dump();
  }
  auto ok = PostRaw(port(), "/v1/chat/completions",
                    R"({"model":"stories","max_tokens":2,"messages":[{"role":"user","content":"u"}]})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto models = Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->Json()["data"][0]["meta"]["chat_template"]["source"], "file");
}

// A template that refuses the start-up probe (it insists on a system message) still serves:
// the log warns, conversations it renders work, the others are 400 with its message.
class ProbeRefusingTemplateTest : public LiveServerTest {
 protected:
  static void SetUpTestSuite() {
    path_ = std::filesystem::temp_directory_path() /
            ("lifeline-needs-system-" + std::to_string(::getpid()) + ".jinja");
    std::ofstream(path_) << "{% if messages[0].role != 'system' %}"
                            "{{ raise_exception('a system message comes first') }}{% endif %}"
                            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                            "<|im_end|>\n{% endfor %}<|im_start|>assistant\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  std::vector<std::string> ServeArgs() const override {
    return {"--model", "stories=" + ModelPath("stories260K.gguf"), "--threads", "1",
            "--kv-memory", "16", "--chat-template-file", path_.string()};
  }
  static std::filesystem::path path_;
};
std::filesystem::path ProbeRefusingTemplateTest::path_;

TEST_F(ProbeRefusingTemplateTest, ServesWithAWarningAndRefusesPerRequest) {
  EXPECT_NE(server().StderrText().find("warning: chat template (file"), std::string::npos)
      << server().StderrText();
  auto ok = PostRaw(port(), "/v1/chat/completions",
                    R"({"model":"stories","max_tokens":2,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto refused = PostRaw(port(), "/v1/chat/completions",
                         R"({"model":"stories","max_tokens":2,"messages":[{"role":"user","content":"u"}]})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("a system message comes first"), std::string::npos) << refused->body;
}

}  // namespace
}  // namespace lifeline::integration
