// Hostile and broken templates: real templates mutated at random (bytes flipped, cut, tags and
// operators spliced in) must each parse-and-render to a result or a clean error, never crash,
// hang or allocate without bound; loops with empty bodies still pay for every iteration.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/template/jinja.h"
#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

using ojson = nlohmann::ordered_json;

// Without a step per iteration this runs 8 million empty iterations unbudgeted and succeeds.
TEST(JinjaBudget, EmptyNestedLoopsPayPerIteration) {
  RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_time_ms = 60000;  // steps are under test, also in slow sanitizer builds
  auto t = Template::Parse(
      "{% set x = range(200) %}{% for a in x %}{% for b in x %}{% for c in x %}"
      "{% endfor %}{% endfor %}{% endfor %}done");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(ojson::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().message();
  EXPECT_NE(r.status().message().find("max_steps"), std::string::npos) << r.status().message();
}

TEST(JinjaRobustness, MutatedRealTemplatesNeverCrash) {
  std::vector<std::string> sources;
  for (const auto& e : std::filesystem::directory_iterator(TemplateDataDir() / "templates")) {
    if (e.path().extension() == ".jinja") sources.push_back(ReadFileBytes(e.path()));
  }
  ASSERT_GE(sources.size(), 20u);
  const ojson convs = ojson::parse(ReadFileBytes(TemplateDataDir() / "conversations.json"));
  ASSERT_TRUE(convs.is_array());
  static const char* kSplices[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]",
                                   "{", "}", "'", "\"", "|", ".", "~", "*", "**", " if ",
                                   " else ", " for ", "{% endfor %}", "{% endif %}", "loop",
                                   "namespace(", "range(99999)", "* 999999", "\\", "\n"};
  std::mt19937_64 rng(20261203);
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_built_bytes = 8 << 20;
  limits.max_time_ms = 200;
  int parsed = 0, rendered = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = sources[rng() % sources.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(rng() % 256); break;                 // flip a byte
        case 1: s.erase(at, 1 + rng() % 16); break;                            // cut
        case 2: s.insert(at, kSplices[rng() % std::size(kSplices)]); break;   // splice
        case 3: s.resize(at); break;                                           // truncate
      }
    }
    auto t = Template::Parse(s);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++parsed;
    const ojson& conv = convs[rng() % convs.size()];
    ojson globals = {{"messages", conv["messages"]},
                     {"tools", conv.contains("tools") ? conv["tools"] : ojson()},
                     {"add_generation_prompt", true},
                     {"bos_token", "<s>"},
                     {"eos_token", "</s>"}};
    auto r = t->Render(globals, limits);
    if (r.ok()) {
      ++rendered;
      EXPECT_LE(r->size(), limits.max_output_bytes);
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "mutants: 20000, parsed " << parsed << ", rendered " << rendered << " in " << s
            << " s\n";
  EXPECT_GT(parsed, 100);  // the mutations must reach the evaluator, not only the parser
}

}  // namespace
}  // namespace lifeline::jinja
