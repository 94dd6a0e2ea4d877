// The sandbox: RenderLimits (steps, output bytes, depth, wall time) stop hostile templates
// quickly and cleanly; nothing reaches host objects through "_" names or mutating methods;
// absurdly deep template source fails in Parse instead of overflowing the stack.
//
// Where an expected string appears, it was produced by Python jinja2 3.x configured the way
// Hugging Face transformers configures it (ImmutableSandboxedEnvironment, trim_blocks=True,
// lstrip_blocks=True, loopcontrols). Where jinja2 itself fails (RecursionError, SecurityError)
// the test accepts a clean failure, or for the "_" probes an empty rendering.
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include <sys/resource.h>

#include <gtest/gtest.h>

#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

using std::chrono::steady_clock;

double MsSince(steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(steady_clock::now() - start).count();
}

// The process's peak resident set so far, in MiB (Linux reports ru_maxrss in KiB). A test that
// records it before and after a hostile render sees whether anything allocated gigabytes.
long PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

// Generous bounds: they catch a hang or a gigabyte allocation, not a slow build (ASan, -O0).
constexpr double kQuickMs = 5000.0;
constexpr long kSmallMiB = 256;

std::string Repeat(std::string_view s, int n) {
  std::string r;
  r.reserve(s.size() * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

// 10^10 loop iterations stop at the step budget, in well under a second.
TEST(JinjaLimits, NestedHugeLoopsHitStepBudgetQuickly) {
  RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_time_ms = 60000;  // so that it is the step budget, not the clock, that stops it
  auto start = steady_clock::now();
  Status s = RenderError(
      "{% for i in range(100000) %}\n{% for j in range(100000) %}{% endfor %}\n{% endfor %}",
      Json::object(), limits);
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Mentions(s, "step"));
  EXPECT_TRUE(Mentions(s, "line"));
}

// A loop over a range far past any budget must not materialize the range first.
TEST(JinjaLimits, GiantRangeIsNotMaterialized) {
  const long rss_before = PeakRssMiB();
  RenderLimits limits;
  limits.max_steps = 100000;
  auto start = steady_clock::now();
  Status s =
      RenderError("{% for i in range(1000000000000) %}{% endfor %}", Json::object(), limits);
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_FALSE(s.ok());
  // Materializing it on purpose fails too (jinja2's sandbox refuses ranges over 100000).
  Status t = AnyError("{{ range(1000000000000)|list|length }}", Json::object(), limits);
  EXPECT_FALSE(t.ok());
  EXPECT_LT(MsSince(start), 2 * kQuickMs);
  EXPECT_LT(PeakRssMiB() - rss_before, kSmallMiB) << "peak RSS grew";
}

// The wall clock stops a render whose step budget is effectively unlimited.
TEST(JinjaLimits, WallTimeLimitStopsRender) {
  RenderLimits limits;
  limits.max_steps = std::numeric_limits<uint64_t>::max();
  limits.max_time_ms = 50;
  auto start = steady_clock::now();
  Status s = RenderError("{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}"
                         "{% endfor %}{% endfor %}",
                         Json::object(), limits);
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Mentions(s, "time"));
}

// Unbounded macro recursion fails at max_depth instead of crashing the process.
TEST(JinjaLimits, UnboundedRecursionHitsDepthLimit) {
  Status s = RenderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Mentions(s, "depth"));

  // Recursion through a filter block and through caller() are bounded as well.
  EXPECT_EQ(RenderError("{% macro f() %}{% filter upper %}{{ f() }}{% endfilter %}{% endmacro %}"
                        "{{ f() }}")
                .code(),
            StatusCode::kResourceExhausted);
  EXPECT_FALSE(RenderError("{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}")
                   .ok());
}

// max_depth is honoured as configured: 8 nested calls fit under 16, 40 do not.
TEST(JinjaLimits, DepthLimitIsConfigurable) {
  const std::string fact =
      "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}"
      "{% endmacro %}";
  RenderLimits limits;
  limits.max_depth = 16;
  Result<Template> t = Template::Parse(fact + "{{ fact(8) }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<std::string> out = t->Render(Json::object(), limits);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), "40320");
  Status s = RenderError(fact + "{{ fact(40) }}", Json::object(), limits);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
}

// One huge string value stops at max_output_bytes without allocating a gigabyte.
TEST(JinjaLimits, HugeStringRepetitionHitsOutputLimit) {
  const long rss_before = PeakRssMiB();
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  auto start = steady_clock::now();
  Status s = RenderError("{{ 'a' * 1000000000 }}", Json::object(), limits);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Mentions(s, "output"));
  // Assigned, never printed: the string value itself is capped.
  Status t = RenderError("{% set x = 'abcdefgh' * 1000000000 %}{{ x|length }}",
                         Json::object(), limits);
  EXPECT_EQ(t.code(), StatusCode::kResourceExhausted) << t.ToString();
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_LT(PeakRssMiB() - rss_before, kSmallMiB) << "peak RSS grew";
}

// Doubling a string in a loop (2^40 bytes) stops at the byte cap, not at the allocator.
TEST(JinjaLimits, DoublingLoopHitsOutputLimit) {
  const long rss_before = PeakRssMiB();
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  auto start = steady_clock::now();
  Status s = RenderError(
      "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}{{ ns.s|length }}",
      Json::object(), limits);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  Status t = RenderError("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                         "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                         Json::object(), limits);
  EXPECT_EQ(t.code(), StatusCode::kResourceExhausted) << t.ToString();
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_LT(PeakRssMiB() - rss_before, kSmallMiB) << "peak RSS grew";
}

// Many small writes add up: 100 MB of output stops at a 1 MiB cap.
TEST(JinjaLimits, AccumulatedOutputHitsOutputLimit) {
  const long rss_before = PeakRssMiB();
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_time_ms = 60000;  // the output budget is under test, also in slow sanitizer builds
  Status s = RenderError("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
                         Json::object(), limits);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(Mentions(s, "output"));
  EXPECT_LT(PeakRssMiB() - rss_before, kSmallMiB) << "peak RSS grew";
}

// The byte cap is a maximum: output of exactly max_output_bytes is allowed.
TEST(JinjaLimits, OutputAtTheLimitIsAllowed) {
  RenderLimits limits;
  limits.max_output_bytes = 5;
  Result<Template> t = Template::Parse("{{ 'abcde' }}");
  ASSERT_TRUE(t.ok());
  Result<std::string> out = t->Render(Json::object(), limits);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), "abcde");
  EXPECT_EQ(RenderError("{{ 'abcdef' }}", Json::object(), limits).code(),
            StatusCode::kResourceExhausted);
}

// A list repeated a billion times must fail, not try to allocate tens of gigabytes.
TEST(JinjaLimits, HugeListRepetitionFails) {
  const long rss_before = PeakRssMiB();
  auto start = steady_clock::now();
  Status s = RenderError("{% set x = [0] * 1000000000 %}{{ x|length }}");
  EXPECT_FALSE(s.ok());
  EXPECT_LT(MsSince(start), kQuickMs);
  EXPECT_LT(PeakRssMiB() - rss_before, kSmallMiB) << "peak RSS grew";
}

// A realistic 500-message conversation fits comfortably in the default limits.
// (jinja2: 32690 characters, ending in the generation prompt.)
TEST(JinjaLimits, RealisticConversationFitsDefaultLimits) {
  Json g = {{"bos_token", "<s>"}, {"add_generation_prompt", true}};
  g["messages"] = Json::array();
  for (int i = 0; i < 500; ++i) {
    Json m;
    m["role"] = i % 2 == 0 ? "user" : "assistant";
    m["content"] = "message " + std::to_string(i);
    g["messages"].push_back(m);
  }
  std::string out = R(
      "{% set loop_messages = messages %}{% for message in loop_messages %}"
      "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
      "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
      "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
      "{% endif %}",
      g);
  EXPECT_EQ(out.size(), 32690u);
  EXPECT_EQ(out.substr(0, 66), "<s><|start_header_id|>user<|end_header_id|>\n\nmessage 0<|eot_id|><|");
  ASSERT_GE(out.size(), 80u);
  EXPECT_EQ(out.substr(out.size() - 80),
            "eader_id|>\n\nmessage 499<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// A render that hits a limit leaves the Template usable: the next render starts from scratch.
TEST(JinjaLimits, TemplateIsReusableAfterALimitFailure) {
  Result<Template> t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for i in range(n) %}{% set ns.n = ns.n + 1 %}{% endfor %}"
      "{{ ns.n }}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  RenderLimits tight;
  tight.max_steps = 1000;
  EXPECT_EQ(t->Render(J(R"({"n": 100000})"), tight).status().code(),
            StatusCode::kResourceExhausted);
  Result<std::string> out = t->Render(J(R"({"n": 3})"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), "3");
}

// Accepts what jinja2's sandbox may do with a "_" probe: fail, or render nothing.
void ExpectNoLeak(std::string_view tmpl, const Json& globals = Json::object()) {
  Result<Template> t = Template::Parse(tmpl);
  if (!t.ok()) return;  // refused at parse time: fine
  Result<std::string> out = t->Render(globals);
  if (!out.ok()) return;  // refused at render time: fine
  EXPECT_EQ(out.value(), "") << "template: " << tmpl;
  EXPECT_EQ(out.value().find("class"), std::string::npos) << "template: " << tmpl;
}

// Python's dunder walk to host objects reaches nothing.
TEST(JinjaSandbox, UnderscoreAttributesReachNothing) {
  const Json g = J(R"({"messages": [{"role": "user", "content": "hi"}], "x": 1})");
  ExpectNoLeak("{{ ''.__class__ }}", g);
  ExpectNoLeak("{{ foo.__dict__ }}", g);
  ExpectNoLeak("{{ messages.__class__.__mro__ }}", g);
  ExpectNoLeak("{{ messages[0].__class__ }}", g);
  ExpectNoLeak("{{ (1).__class__.__bases__ }}", g);
  ExpectNoLeak("{{ [].__class__.__base__.__subclasses__() }}", g);
  ExpectNoLeak("{{ ''['__class__'] }}", g);
  ExpectNoLeak("{{ ''|attr('__class__') }}", g);
  ExpectNoLeak("{{ cycler.__init__.__globals__.os }}", g);
  ExpectNoLeak("{{ namespace.__init__ }}", g);
  ExpectNoLeak("{{ raise_exception.__globals__ }}", g);
  ExpectNoLeak("{{ strftime_now.__globals__ }}", g);
  ExpectNoLeak("{{ range.__self__ }}", g);
  ExpectNoLeak("{{ '{0.__class__}'.format(x) }}", g);
  ExpectNoLeak("{% set ns = namespace(a=1) %}{{ ns.__dict__ }}", g);
  ExpectNoLeak("{{ __builtins__ }}{{ _private }}", g);
}

// The immutable sandbox forbids mutating methods; jinja2 raises SecurityError.
TEST(JinjaSandbox, MutatingMethodsFail) {
  const Json g = J(R"({"messages": [{"role": "user"}], "d": {"a": 1}})");
  EXPECT_FALSE(AnyError("{% set x = [1] %}{{ x.append(2) }}", g).ok());
  EXPECT_FALSE(AnyError("{{ messages.pop() }}", g).ok());
  EXPECT_FALSE(AnyError("{% set _ = d.update({'b': 2}) %}{{ d }}", g).ok());
  EXPECT_FALSE(AnyError("{{ d.clear() }}", g).ok());
  EXPECT_FALSE(AnyError("{{ messages.insert(0, 1) }}", g).ok());
}

// No loader: include/import/extends cannot read anything (jinja2: "no loader").
TEST(JinjaSandbox, NoTemplateLoading) {
  EXPECT_FALSE(AnyError("{% include '/etc/passwd' %}").ok());
  EXPECT_FALSE(AnyError("{% import 'x' as y %}{{ y }}").ok());
  EXPECT_FALSE(AnyError("{% extends 'base.html' %}").ok());
  EXPECT_FALSE(AnyError("{% from 'x' import y %}").ok());
}

// Host names that are not globals are just undefined.
TEST(JinjaSandbox, OnlyGivenGlobalsAreVisible) {
  EXPECT_EQ(R("[{{ config }}][{{ request }}][{{ os }}][{{ environ }}][{{ self_ }}]"),
            "[][][][][]");
  EXPECT_EQ(R("{{ bos_token is defined }} {{ bos_token }}", J(R"({"bos_token": "<s>"})")),
            "True <s>");
}

// 10000 nested parentheses: jinja2 hits RecursionError; we must fail in Parse, not crash.
TEST(JinjaDeepSource, DeeplyNestedParenthesesFailInParse) {
  std::string tmpl = "{{ " + Repeat("(", 10000) + "1" + Repeat(")", 10000) + " }}";
  EXPECT_EQ(ParseError(tmpl).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Template::Parse("{{ " + Repeat("[", 10000) + Repeat("]", 10000) + " }}").ok());
  EXPECT_FALSE(Template::Parse("{{ " + Repeat("{'a': ", 10000) + "1" + Repeat("}", 10000) + " }}")
                   .ok());
}

// 5000 nested {% if %} / {% for %} blocks fail cleanly in Parse.
TEST(JinjaDeepSource, DeeplyNestedBlocksFailInParse) {
  EXPECT_FALSE(
      Template::Parse(Repeat("{% if true %}", 5000) + "x" + Repeat("{% endif %}", 5000)).ok());
  EXPECT_FALSE(Template::Parse(Repeat("{% for i in [1] %}", 5000) + "x" +
                               Repeat("{% endfor %}", 5000))
                   .ok());
  EXPECT_FALSE(Template::Parse(Repeat("{% macro m() %}", 5000) + Repeat("{% endmacro %}", 5000))
                   .ok());
}

// Long chains of unary operators or additions: jinja2 overflows its recursion limit. We either
// compute the Python answer or fail cleanly; we never crash.
TEST(JinjaDeepSource, LongOperatorChainsDoNotCrash) {
  auto ok_or_error = [](const std::string& tmpl, const std::string& expected) {
    Result<Template> t = Template::Parse(tmpl);
    if (!t.ok()) return;
    Result<std::string> out = t->Render(Json::object());
    if (out.ok()) {
      EXPECT_EQ(out.value(), expected);
    }
  };
  ok_or_error("{{ " + Repeat("-", 10000) + "1 }}", "1");
  ok_or_error("{{ " + Repeat("not ", 10000) + "false }}", "False");
  std::string sum = "{{ 1";
  for (int i = 1; i < 100000; ++i) sum += " + 1";
  ok_or_error(sum + " }}", "100000");
  std::string cat = "{{ 'a'";
  for (int i = 1; i < 100000; ++i) cat += " ~ 'a'";
  ok_or_error(cat + " }}", Repeat("a", 100000));
}

// A value nested 10000 deep (as JSON globals) prints or fails cleanly; it never crashes.
TEST(JinjaDeepSource, DeeplyNestedGlobalValueDoesNotCrash) {
  Json g = Json::object();
  g["x"] = Json::parse(Repeat("[", 10000) + Repeat("]", 10000));
  for (const char* tmpl : {"{{ x }}", "{{ x|tojson }}", "{{ x == x }}", "{{ x|string|length }}"}) {
    Result<Template> t = Template::Parse(tmpl);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    Result<std::string> out = t->Render(g);
    if (out.ok() && std::string_view(tmpl) == "{{ x }}") {
      EXPECT_EQ(out.value(), Repeat("[", 10000) + Repeat("]", 10000));
    }
  }
}

// Moderate nesting, the kind real templates have, is well inside the parser's limits.
TEST(JinjaDeepSource, ModerateNestingWorks) {
  EXPECT_EQ(R("{{ " + Repeat("(", 30) + "1" + Repeat(")", 30) + " }}"), "1");
  EXPECT_EQ(R(Repeat("{% if true %}", 20) + "x" + Repeat("{% endif %}", 20)), "x");
  std::string loops;
  for (int i = 0; i < 20; ++i) loops += "{% for i" + std::to_string(i) + " in [1] %}";
  EXPECT_EQ(R(loops + "x" + Repeat("{% endfor %}", 20)), "x");
  std::string elifs = "{% if x == 0 %}0";
  for (int i = 1; i < 100; ++i) {
    elifs += "{% elif x == " + std::to_string(i) + " %}" + std::to_string(i);
  }
  EXPECT_EQ(R(elifs + "{% endif %}", J(R"({"x": 99})")), "99");
  EXPECT_EQ(R("{{ x }}", J("{\"x\": " + Repeat("[", 30) + Repeat("]", 30) + "}")),
            Repeat("[", 30) + Repeat("]", 30));
  EXPECT_EQ(R(Repeat("{{ x }}", 10000), J(R"({"x": "y"})")), Repeat("y", 10000));
}

}  // namespace
}  // namespace lifeline::jinja
