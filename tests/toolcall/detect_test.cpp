// Format detection on the repository's 63 real chat templates. The expected format of each
// was written by reading the template: how it renders an assistant message with tool_calls
// (the syntax the model was trained to write), not by running the detector.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "text/toolcall/format.h"

namespace lifeline::toolcall {
namespace {

std::filesystem::path TemplatesDir() {
  return std::filesystem::path(LIFELINE_TESTS_DIR) / "template" / "data" / "templates";
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using F = ToolCallFormat;

// What each template renders for an assistant tool call, and so what we parse:
const std::map<std::string, F>& Expected() {
  static const std::map<std::string, F> m = {
      // Llama 3.1 / 3.2 / 3.3: '{"name": "...", "parameters": ...}' after the assistant
      // header; tool results under "<|start_header_id|>ipython<|end_header_id|>".
      {"llama3.1-8b-instruct", F::kLlama3Json},
      {"llama3.2-3b-instruct", F::kLlama3Json},
      {"llama3.3-70b-instruct", F::kLlama3Json},
      // Llama 3.0: no tool support in the template.
      {"llama3-8b-instruct", F::kGeneric},
      {"llama3-8b-instruct-orig", F::kGeneric},
      // Llama 4: <|python_start|>...<|python_end|> then JSON calls under <|header_start|>; not
      // a format parsed here.
      {"llama4-scout-17b-16e-instruct", F::kGeneric},
      // <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
      {"hermes-3-llama-3.1-8b-tool_use", F::kHermes},
      {"qwen2.5-instruct", F::kHermes},
      {"qwen3", F::kHermes},
      {"qwq-32b", F::kHermes},
      {"granite-4.0", F::kHermes},
      // <tool_call> wrapping XML, not JSON.
      {"qwen3-coder", F::kGeneric},   // <function=name><parameter=k>v</parameter>
      {"glm-4.5", F::kGeneric},       // <tool_call>name<arg_key>k</arg_key><arg_value>...
      {"glm-4.6", F::kGeneric},
      // [TOOL_CALLS][{"name", "arguments", "id"}, ...]
      {"mistral-nemo-instruct-2407", F::kMistralNemo},
      {"mistral-small-3.1-24b-instruct-2503", F::kMistralNemo},  // "[TOOL_CALLS] [" ...
      {"vllm-mistral-tool", F::kMistralNemo},
      // [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} / [TOOL_CALLS]name[ARGS]{...}
      {"mistral-small-3.2-24b-instruct-2506", F::kMistralArgs},
      {"devstral-small-2507-unsloth", F::kMistralArgs},
      {"magistral-small-2509-unsloth", F::kMistralArgs},
      // Mistral templates without a tool-call section.
      {"mistral-small-24b-instruct-2501", F::kGeneric},
      {"mistral-7b-instruct-v0.2-legacy", F::kGeneric},
      {"mistral-7b-instruct-v0.2-v1", F::kGeneric},
      // Native formats this module does not parse: the generic JSON fallback.
      {"functionary-medium-v3.1", F::kGeneric},  // <function=name>{...}</function>
      {"functionary-medium-v3.2", F::kGeneric},  // >>>name\n{...}
      {"fireworks-llama-3-firefunction-v2", F::kGeneric},  // functools[...]
      {"vllm-phi4-mini-tool", F::kGeneric},                // functools[...]
      {"deepseek-r1-distill-llama-8b", F::kGeneric},       // <｜tool▁calls▁begin｜>
      {"deepseek-r1-distill-llama-8b-jan2025", F::kGeneric},
      {"deepseek-v3", F::kGeneric},
      {"deepseek-v3.1", F::kGeneric},
      {"command-r-plus-tool_use", F::kGeneric},  // Action: ```json [...]```
      {"command-r7b-12-2024-tool_use", F::kGeneric},  // <|START_ACTION|>[...]<|END_ACTION|>
      {"granite-3.0-8b-instruct", F::kGeneric},  // <|tool_call|>[...]
      {"granite-3.3-2b-instruct", F::kGeneric},
      {"gpt-oss-120b", F::kGeneric},             // harmony <|channel|>commentary messages
      {"kimi-k2-instruct", F::kGeneric},         // <|tool_calls_section_begin|>
      {"kimi-k2-thinking", F::kGeneric},
      {"minimax-m2-unsloth", F::kGeneric},       // <minimax:tool_call><invoke name=...>
      {"seed-oss-36b-instruct", F::kGeneric},    // <seed:tool_call><function=...>
      {"apertus-8b-instruct", F::kGeneric},      // <|tools_prefix|>[{"name": args}]
      {"llama-3.3-nemotron-super-49b-v1.5", F::kGeneric},  // <TOOLCALL>[...]</TOOLCALL>
      {"nemotron-nano-v2", F::kGeneric},         // <TOOLCALL>[...]</TOOLCALL>
      {"lfm2-8b-a1b", F::kGeneric},  // tools in <|tool_list_start|>; calls ride in content
      {"lfm2.5-instruct", F::kGeneric},
      {"vllm-internlm2-tool", F::kGeneric},      // <|action_start|><|plugin|>
      {"vllm-minicpm3-tool", F::kGeneric},  // <|tool_call_start|>```python f(a=1)```
      {"smollm3-3b-unsloth", F::kGeneric},       // Unsloth's edit has no tool-call rendering
      // No tool support.
      {"command-r-plus", F::kGeneric},
      {"deepseek-coder-33b-instruct", F::kGeneric},
      {"gemma-2-2b-it", F::kGeneric},
      {"gemma-3-it", F::kGeneric},
      {"gemma-7b-it", F::kGeneric},
      {"llama2-7b-chat", F::kGeneric},
      {"minicpm-3b-openhermes", F::kGeneric},
      {"openchat-3.5-0106", F::kGeneric},
      {"openhermes-2.5-mistral-7b", F::kGeneric},
      {"phi-3-mini-4k-instruct", F::kGeneric},
      {"phi-3.5-mini-instruct", F::kGeneric},
      {"phi-4", F::kGeneric},
      {"qwen2-vl-instruct", F::kGeneric},
      {"vllm-alpaca", F::kGeneric},
      {"zephyr-7b-beta", F::kGeneric},
  };
  return m;
}

TEST(ToolCallDetect, EveryRealTemplateHasItsFormat) {
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TemplatesDir())) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = entry.path().stem().string();
    auto it = Expected().find(name);
    ASSERT_NE(it, Expected().end()) << name << ": a template without an expected format";
    const std::string src = ReadFile(entry.path());
    ASSERT_FALSE(src.empty()) << name;
    EXPECT_EQ(ToolCallFormatName(DetectToolCallFormat(src)), ToolCallFormatName(it->second))
        << name;
    ++seen;
  }
  EXPECT_EQ(seen, Expected().size());
  EXPECT_EQ(seen, 63u);
}

TEST(ToolCallDetect, MarkerRulesOnSnippets) {
  EXPECT_EQ(DetectToolCallFormat(""), F::kGeneric);
  EXPECT_EQ(DetectToolCallFormat("{{ '[TOOL_CALLS]' + name + '[ARGS]' }}"), F::kMistralArgs);
  EXPECT_EQ(DetectToolCallFormat("{{ '[TOOL_CALLS][' }}"), F::kMistralNemo);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n{{ call | tojson }}"), F::kHermes);
  EXPECT_EQ(DetectToolCallFormat("<tool_call><function=f><parameter=x>"), F::kGeneric);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>{{ name }}<arg_key>"), F::kGeneric);
  EXPECT_EQ(DetectToolCallFormat("<|start_header_id|>ipython<|end_header_id|>"), F::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("<|start_header_id|>ipython<|end_header_id|><function="),
            F::kGeneric);
  // Mistral's marker wins over a <tool_call> mention, as in llama.cpp's order of checks.
  EXPECT_EQ(DetectToolCallFormat("[TOOL_CALLS] <tool_call>"), F::kMistralNemo);
}

TEST(ToolCallDetect, NamesRoundTrip) {
  for (F f : {F::kNone, F::kLlama3Json, F::kHermes, F::kMistralNemo, F::kMistralArgs,
              F::kGeneric}) {
    auto back = ToolCallFormatFromName(ToolCallFormatName(f));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, f);
  }
  EXPECT_FALSE(ToolCallFormatFromName("qwen").has_value());
}

TEST(ToolCallDetect, MarkersTheDetokenizerMustRender) {
  auto has = [](F f, std::string_view m) {
    for (std::string_view x : ToolCallMarkers(f)) {
      if (x == m) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(F::kHermes, "<tool_call>"));
  EXPECT_TRUE(has(F::kHermes, "</tool_call>"));
  EXPECT_TRUE(has(F::kLlama3Json, "<|python_tag|>"));
  EXPECT_TRUE(has(F::kMistralNemo, "[TOOL_CALLS]"));
  EXPECT_TRUE(has(F::kMistralArgs, "[ARGS]"));
  EXPECT_TRUE(has(F::kMistralArgs, "[CALL_ID]"));
  EXPECT_TRUE(ToolCallMarkers(F::kGeneric).empty());
  EXPECT_TRUE(ToolCallMarkers(F::kNone).empty());
}

}  // namespace
}  // namespace lifeline::toolcall
