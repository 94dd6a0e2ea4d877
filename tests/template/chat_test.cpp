// The chat layer: presets, globals as Hugging Face passes them, reserved kwargs, the dry run.
#include "text/template/chat.h"
#include "template/jinja_test_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace lifeline::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::string ReadTemplate(const std::string& name) {
  return jinja::ReadFileBytes(jinja::TemplateDataDir() / "templates" / (name + ".jinja"));
}

TEST(ChatPresets, EveryPresetParsesAndRendersOneUserMessage) {
  ASSERT_EQ(Presets().size(), 7u);
  for (const Preset& p : Presets()) {
    SCOPED_TRACE(p.name);
    auto t = ChatTemplate::FromPreset(p.name, "<s>", "</s>");
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->origin(), Origin::kPreset);
    EXPECT_TRUE(t->DryRun().ok());
  }
  auto unknown = ChatTemplate::FromPreset("vicuna", "", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(PresetNames()), std::string::npos);
}

// The presets are the official files byte for byte (the reference test checks those files).
TEST(ChatPresets, PresetsAreTheReferenceFiles) {
  const std::pair<const char*, const char*> files[] = {
      {"chatml", "openhermes-2.5-mistral-7b"}, {"llama2", "llama2-7b-chat"},
      {"llama3", "llama3-8b-instruct"},        {"mistral", "mistral-7b-instruct-v0.2-v1"},
      {"gemma", "gemma-3-it"},                 {"phi3", "phi-3-mini-4k-instruct"},
      {"zephyr", "zephyr-7b-beta"}};
  for (const auto& [preset, file] : files) {
    bool found = false;
    for (const Preset& p : Presets()) {
      if (std::string(p.name) == preset) {
        found = true;
        EXPECT_EQ(std::string(p.source), ReadTemplate(file)) << preset;
      }
    }
    EXPECT_TRUE(found) << preset;
  }
}

TEST(ChatTemplate, GlobalsAreTheRequestsAndKwargsCannotRebindThem) {
  auto t = ChatTemplate::Create(
      "{{ bos_token }}|{{ eos_token }}|{{ messages|length }}|{{ tools is none }}|"
      "{{ documents is none }}|{{ add_generation_prompt }}|{{ enable_thinking }}",
      Origin::kFile, "t.jinja", "<s>", "</s>");
  ASSERT_TRUE(t.ok());
  ChatInput in;
  in.messages = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  in.kwargs = ojson::parse(R"({"enable_thinking": false})");
  in.add_generation_prompt = false;
  auto r = t->Render(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<s>|</s>|1|True|True|False|False");
  for (const char* own : {"messages", "tools", "documents", "add_generation_prompt",
                          "bos_token", "eos_token"}) {
    ChatInput bad = in;
    bad.kwargs = ojson::object({{own, 1}});
    auto e = t->Render(bad);
    ASSERT_FALSE(e.ok()) << own;
    EXPECT_NE(e.status().message().find(own), std::string::npos);
  }
}

TEST(ChatTemplate, BosRuleLooksAtTheRenderedText) {
  auto t = ChatTemplate::FromPreset("llama3", "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->StartsWithBos("<|begin_of_text|><|start_header_id|>"));
  EXPECT_FALSE(t->StartsWithBos("<|start_header_id|>"));
  auto no_bos = ChatTemplate::FromPreset("chatml", "", "");
  ASSERT_TRUE(no_bos.ok());
  EXPECT_FALSE(no_bos->StartsWithBos("anything"));
}

// Tool-use templates render only with tools; the dry run gives them one. A template that
// fails either way is refused, naming its line.
TEST(ChatTemplate, DryRunAcceptsToolUseTemplatesAndRefusesBrokenOnes) {
  auto tool_use = ChatTemplate::Create(ReadTemplate("hermes-3-llama-3.1-8b-tool_use"),
                                       Origin::kFile, "hermes", "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(tool_use.ok());
  EXPECT_TRUE(tool_use->DryRun().ok());
  auto broken = ChatTemplate::Create("{% for m in messages %}{{ m.content.x.y }}{% endfor %}",
                                     Origin::kGguf, "tokenizer.chat_template", "", "");
  ASSERT_TRUE(broken.ok());
  Status s = broken->DryRun();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("template line 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("gguf"), std::string::npos) << s.message();
  auto syntax = ChatTemplate::Create("{% if %}", Origin::kFile, "x.jinja", "", "");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("x.jinja"), std::string::npos);
}

}  // namespace
}  // namespace lifeline::chat
