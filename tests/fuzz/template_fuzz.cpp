// libFuzzer harness for the chat-template interpreter (not part of the default build; the
// test suite runs a deterministic mutation pass, tests/template/jinja_robustness_test.cpp).
//
// Build and run from the repository root, e.g.:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -I. tests/fuzz/template_fuzz.cpp text/template/*.cpp base/status.cpp -o template_fuzz
//   ./template_fuzz -max_len=16384 -rss_limit_mb=512 -malloc_limit_mb=128 -timeout=2 \
//     tests/template/data/templates/
// The seed corpus is the real templates. The input is the template; the globals are a fixed
// small conversation. Small budgets keep each input cheap; a render may fail, but only with a
// message, and never past its output budget.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/template/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json kGlobals = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi {{ x }}"},
                 {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
                  "function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "tool", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  auto t = lifeline::jinja::Template::Parse(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) {
    if (t.status().message().empty()) std::abort();
    return 0;
  }
  lifeline::jinja::RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 20;
  limits.max_built_bytes = 16 << 20;
  limits.max_time_ms = 500;
  auto r = t->Render(kGlobals, limits);
  if (r.ok() ? r->size() > limits.max_output_bytes : r.status().message().empty()) std::abort();
  return 0;
}
