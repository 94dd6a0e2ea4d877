// The Template API itself: copies share one parsed program, source() is kept, Render is const
// and safe from many threads at once, renders do not leak state into each other.
//
// Expected strings were produced by Python jinja2 3.x configured the way Hugging Face
// transformers configures it (ImmutableSandboxedEnvironment, trim_blocks=True,
// lstrip_blocks=True, loopcontrols, tojson = json.dumps(ensure_ascii=False)).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

constexpr const char* kRolesTemplate =
    "{% for m in messages %}{{ m.role }}:{{ m.content|upper }};{% endfor %}{{ messages|length }}";

// source() returns the text that was parsed, in copies as well.
TEST(JinjaApi, SourceIsKeptAndCopiesRenderTheSame) {
  Result<Template> t = Template::Parse(kRolesTemplate);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source(), kRolesTemplate);
  Template copy = t.value();
  EXPECT_EQ(copy.source(), kRolesTemplate);
  const Json g = J(R"({"messages": [{"role": "user", "content": "a"}]})");
  Result<std::string> a = t->Render(g);
  Result<std::string> b = copy.Render(g);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a.value(), "user:A;1");
  EXPECT_EQ(b.value(), "user:A;1");
}

// A namespace mutated in one render starts fresh in the next (the program is immutable).
TEST(JinjaApi, RendersDoNotShareState) {
  Result<Template> t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + 1 %}{% endfor %}"
      "{{ ns.n }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 3; ++i) {
    Result<std::string> out = t->Render(Json::object());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out.value(), "3");
  }
}

// Render is const and thread-safe: 8 threads share one Template with different globals.
TEST(JinjaApi, ConcurrentRendersOfOneTemplate) {
  Result<Template> t = Template::Parse(kRolesTemplate);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Template& tmpl = t.value();
  const Json g1 = J(R"({"messages": [{"role": "user", "content": "a"}]})");
  const Json g2 = J(R"({"messages": [{"role": "user", "content": "b"},
                                               {"role": "assistant", "content": "cd"}]})");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) {
        const bool first = (i + k) % 2 == 0;
        Result<std::string> out = tmpl.Render(first ? g1 : g2);
        if (!out.ok() || out.value() != (first ? "user:A;1" : "user:B;assistant:CD;2")) ++wrong;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Globals must be a JSON object; anything else is refused rather than crashing.
TEST(JinjaApi, NonObjectGlobalsAreRefused) {
  Result<Template> t = Template::Parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(Json::array({1, 2})).ok());
  EXPECT_FALSE(t->Render(Json("text")).ok());
}

// Globals of every JSON type arrive with Python's types (int, float, str, bool, None, list, dict).
TEST(JinjaApi, GlobalsKeepTheirJsonTypes) {
  EXPECT_EQ(R("{{ i is integer }} {{ f is float }} {{ s is string }} {{ b is boolean }} "
              "{{ n is none }} {{ l is sequence }} {{ d is mapping }}",
              J(R"({"i": 3, "f": 3.0, "s": "x", "b": false, "n": null, "l": [], "d": {}})")),
            "True True True True True True True");
  // Integers stay exact across the int64 range (2^53 + 1 would not survive a double). Python's
  // unbounded ints are not modelled: a JSON integer above INT64_MAX arrives as a float.
  EXPECT_EQ(R("{{ big + 1 }} {{ max }}",
              J(R"({"big": 9007199254740993, "max": 9223372036854775807})")),
            "9007199254740994 9223372036854775807");
}

// Without an injected clock strftime_now reads the system clock (a plausible year).
TEST(JinjaApi, StrftimeNowDefaultsToSystemClock) {
  std::string year = R("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u) << year;
  EXPECT_GE(std::stoi(year), 2024);
}

// An empty template and plain text need no globals.
TEST(JinjaApi, EmptyAndPlainTemplates) {
  EXPECT_EQ(R(""), "");
  EXPECT_EQ(R("just text"), "just text");
  EXPECT_EQ(R("{{ '{{' }} and {{ '}}' }}"), "{{ and }}");
}

}  // namespace
}  // namespace lifeline::jinja
