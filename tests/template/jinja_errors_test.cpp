// Errors: syntax errors fail Parse, evaluation errors fail Render, both naming the template
// line; raise_exception fails Render with its message and IsTemplateRaise.
//
// Which templates fail, and on which line, was checked against Python jinja2 3.x configured
// the way Hugging Face transformers configures it (ImmutableSandboxedEnvironment,
// trim_blocks/lstrip_blocks, loopcontrols, raise_exception). The exact wording is ours.
#include <string>

#include <gtest/gtest.h>

#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

// jinja2: "Unexpected end of template ... 'endfor' or 'else'" at line 3.
TEST(JinjaSyntaxErrors, UnclosedBlockNamesLine) {
  Status s = ParseError("a\nb\n{% for x in y %}{{ x }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasLine(s, 3));
  EXPECT_TRUE(HasLine(ParseError("{% macro m() %}x"), 1));
  EXPECT_TRUE(HasLine(ParseError("x\n\n\n{% if true %}y"), 4));
}

// jinja2: "Encountered unknown tag 'frobnicate'" at line 3.
TEST(JinjaSyntaxErrors, UnknownTagNamesLine) {
  Status s = ParseError("a\n\n{% frobnicate %}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasLine(s, 3));
  // A closing tag with nothing open, and a closing tag of the wrong kind, are unknown tags too.
  EXPECT_TRUE(HasLine(ParseError("ok\n{% endfor %}"), 2));
  EXPECT_TRUE(HasLine(ParseError("{% if x %}\n{% endfor %}"), 2));
}

// jinja2: "unexpected 'end of print statement'" at line 2, and friends.
TEST(JinjaSyntaxErrors, BadExpressionNamesLine) {
  EXPECT_TRUE(HasLine(ParseError("x\n{{ 1 + }}"), 2));
  EXPECT_TRUE(HasLine(ParseError("{{ x"), 1));
  EXPECT_TRUE(HasLine(ParseError("one\ntwo\n{{ [1, 2 }}"), 3));
  EXPECT_TRUE(HasLine(ParseError("{{ 'abc }}"), 1));
  EXPECT_TRUE(HasLine(ParseError("\n{% for %}"), 2));
  EXPECT_TRUE(HasLine(ParseError("{{ foo[1:2:3:4] }}"), 1));
  EXPECT_EQ(ParseError("{{ 1 + }}").code(), StatusCode::kInvalidArgument);
}

// Line numbers count newlines inside text, comments and multi-line tags before the error.
TEST(JinjaSyntaxErrors, LineCountsNewlinesEverywhere) {
  EXPECT_TRUE(HasLine(ParseError("{# one\ntwo #}\n{{ 1 + }}"), 3));
  EXPECT_TRUE(HasLine(ParseError("{% if\ntrue %}\n{% endif %}\n{{ ) }}"), 4));
  EXPECT_TRUE(HasLine(ParseError("{% raw %}\n\n{% endraw %}{% bogus %}"), 3));
}

// jinja2: UndefinedError "'foo' is undefined" — an attribute of an undefined value fails.
TEST(JinjaRuntimeErrors, AttributeOfUndefinedFailsWithLine) {
  Status s = RenderError("a\n{{ foo.bar.baz }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasLine(s, 2));
  EXPECT_TRUE(HasLine(RenderError("\n\n{{ nothing['key'] }}"), 3));
  // One level is fine ("" below), two levels through a missing key is not.
  EXPECT_EQ(R("[{{ m.nope }}]", J(R"({"m": {}})")), "[]");
  EXPECT_TRUE(HasLine(RenderError("x\n{{ m.nope.deeper }}", J(R"({"m": {}})")), 2));
}

// jinja2: TypeError "'int' object is not callable".
TEST(JinjaRuntimeErrors, CallingNonCallableFailsWithLine) {
  Status s = RenderError("{% set x = 1 %}\n\n{{ x() }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasLine(s, 3));
  EXPECT_TRUE(HasLine(RenderError("\n{{ undefined_fn() }}"), 2));
  EXPECT_TRUE(HasLine(RenderError("{{ 'str'.nosuchmethod() }}"), 1));
}

// jinja2 rejects an unknown filter or test when compiling; ours may find it at either step.
TEST(JinjaRuntimeErrors, UnknownFilterOrTestFailsWithLine) {
  Status s = AnyError("\n{{ 'a'|nosuchfilter }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasLine(s, 2));
  EXPECT_TRUE(HasLine(AnyError("a\nb\n{{ x is nosuchtest }}"), 3));
  EXPECT_TRUE(HasLine(AnyError("{% filter nosuchfilter %}x{% endfilter %}"), 1));
}

// jinja2: ZeroDivisionError / TypeError for mismatched operand types.
TEST(JinjaRuntimeErrors, BadArithmeticFailsWithLine) {
  EXPECT_TRUE(HasLine(RenderError("l1\nl2\n{{ 1 / 0 }}"), 3));
  EXPECT_TRUE(HasLine(RenderError("{{ 1 // 0 }}"), 1));
  EXPECT_TRUE(HasLine(RenderError("{{ 1 % 0 }}"), 1));
  EXPECT_TRUE(HasLine(RenderError("\n{{ 1 + 'a' }}"), 2));
  EXPECT_TRUE(HasLine(RenderError("\n\n{{ 1 < 'a' }}"), 3));
  EXPECT_TRUE(HasLine(RenderError("{{ {}.a.b }}"), 1));
}

// The line is that of the failing expression inside the loop body, not of the loop tag.
TEST(JinjaRuntimeErrors, LineOfErrorInsideLoopBody) {
  Status s = RenderError("{% for m in messages %}\n{{ m.content }}\n{{ m.content.text.x }}\n"
                         "{% endfor %}",
                         J(R"({"messages": [{"content": "hi"}]})"));
  EXPECT_TRUE(HasLine(s, 3));
}

// raise_exception(msg): Render fails, IsTemplateRaise is true and the message carries msg.
TEST(JinjaRaise, RaiseExceptionFailsRenderWithMessage) {
  Status s = RenderError("{{ raise_exception('Roles must alternate') }}");
  EXPECT_TRUE(IsTemplateRaise(s)) << s.ToString();
  EXPECT_TRUE(Mentions(s, "Roles must alternate"));

  // From deep inside a loop and an if, after output was produced.
  Status t = RenderError("line1\n{% for i in [1, 2] %}{{ i }}{% if i == 2 %}\n"
                         "{{ raise_exception('boom at ' ~ i) }}{% endif %}{% endfor %}");
  EXPECT_TRUE(IsTemplateRaise(t)) << t.ToString();
  EXPECT_TRUE(Mentions(t, "boom at 2"));
}

// The Mistral/Llama-2 role-alternation guard raises on two user turns in a row.
TEST(JinjaRaise, RoleAlternationGuardRaises) {
  Status s = RenderError(
      "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ message['content'] }}{% endfor %}",
      J(R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})"));
  EXPECT_TRUE(IsTemplateRaise(s)) << s.ToString();
  EXPECT_TRUE(Mentions(s, "Conversation roles must alternate user/assistant/user/assistant/..."));
}

// Ordinary failures are not template raises, even when they mention the word.
TEST(JinjaRaise, OtherErrorsAreNotTemplateRaises) {
  EXPECT_FALSE(IsTemplateRaise(ParseError("{% if %}")));
  EXPECT_FALSE(IsTemplateRaise(RenderError("{{ foo.bar.baz }}")));
  EXPECT_FALSE(IsTemplateRaise(AnyError("{{ 'raise_exception'|nosuchfilter }}")));
  RenderLimits limits;
  limits.max_steps = 1000;
  EXPECT_FALSE(IsTemplateRaise(
      RenderError("{% for i in range(100000) %}{% endfor %}", Json::object(), limits)));
  EXPECT_FALSE(IsTemplateRaise(Status::Ok()));
  EXPECT_FALSE(IsTemplateRaise(InvalidArgument("unrelated")));
}

}  // namespace
}  // namespace lifeline::jinja
