// Python semantics found by differential testing against jinja2 on real templates (MiniCPM3's
// {% call %} in a loop, Seed-OSS's integer dict keys, Llama 3 / Gemma on an assistant turn with
// only tool_calls, JSON schemas without "items"). Expected strings: jinja2 3.1 configured as
// Hugging Face does.
#include "template/jinja_test_util.h"

namespace lifeline::jinja {
namespace {

TEST(JinjaPythonSemantics, CallBodySeesTheLoopScopeAroundIt) {
  EXPECT_EQ(R("{% macro m() %}[{{ caller() }}]{% endmacro %}{% for t in [1,2] %}{% set u = t * 10 %}{% call m() %}{{ t }}{{ u }}{% endcall %}{% endfor %}"),
            "[110][220]");
}

TEST(JinjaPythonSemantics, NonStringDictKeysStayTyped) {
  EXPECT_EQ(R("{% set d = {1: \"a\", 10: \"b\"} %}{% for k, v in d|dictsort %}{{ k + 1 }},{% endfor %}|{{ d[1] }}|{{ d }}"),
            "2,11,|a|{1: 'a', 10: 'b'}");
}

TEST(JinjaPythonSemantics, EqualNumbersAreOneKey) {
  EXPECT_EQ(R("{% set d = {1: \"a\", true: \"t\", none: \"n\"} %}{{ d|tojson }}|{{ d[1] }}|{{ 1.0 in d }}"),
            "{\"1\": \"t\", \"null\": \"n\"}|t|True");
}

TEST(JinjaPythonSemantics, TrimOfUndefinedIsEmpty) {
  EXPECT_EQ(R("{% for m in messages %}[{{ m.content|trim }}]{% endfor %}", J(R"({"messages": [{"role": "assistant"}]})")),
            "[]");
}

TEST(JinjaPythonSemantics, SelectRejectMapOfAFalseValueAreEmpty) {
  EXPECT_EQ(R("[{{ x|reject(\"equalto\", \"a\")|join(\",\") }}][{{ x|map(\"upper\")|list }}][{{ x|selectattr(\"a\")|list }}]", J(R"({"x": false})")),
            "[][[]][[]]");
}

TEST(JinjaPythonSemantics, ChainedComparisons) {
  EXPECT_EQ(R("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1 == 1 }} {{ 1 < 2 in [False, True] }}"),
            "True False True False");
}

TEST(JinjaPythonSemantics, TuplesPrintWithParentheses) {
  EXPECT_EQ(R("{{ (1, \"a\") }} {{ {\"a\": 2}|dictsort }} {{ {\"a\": 2}.items()|list }} {{ (1,) }} {{ () }}"),
            "(1, 'a') [('a', 2)] [('a', 2)] (1,) ()");
}

TEST(JinjaPythonSemantics, PercentFormatting) {
  EXPECT_EQ(R("{{ \"%s-%d\" % (\"a\", 3) }} {{ \"<%s>\" % \"x\" }} {{ \"%s\" % [1, 2] }} {{ \"100%%\" % () }}"),
            "a-3 <x> [1, 2] 100%");
}

TEST(JinjaPythonSemantics, StrFormat) {
  EXPECT_EQ(R("{{ \"{}+{}={x}\".format(1, 2, x=3) }} {{ \"{1}{0}{{}}\".format(\"a\", \"b\") }} {{ \"{!r}\".format(\"q\") }}"),
            "1+2=3 ba{} 'q'");
}

TEST(JinjaPythonSemantics, GetItemFallsBackToAMethod) {
  EXPECT_EQ(R("{% set s = {\"type\": \"array\"} %}{{ s[\"items\"] is defined }} {{ s[\"items\"].enum is defined }}"),
            "True False");
}

// functionary-medium-v3.1 builds tool descriptions with "..."|safe + name.
TEST(JinjaPythonSemantics, SafeStringsEscapeWhatTheyAreAddedTo) {
  EXPECT_EQ(R("{{ \"a\"|safe + \"<b>\" }}|{{ \"<\" + (\"x\"|safe) }}|{{ (\"a<\"|safe) + \"<\" + \"<\" }}|{% set x = \"a\"|safe %}{{ x + \"&\" }}"),
            "a&lt;b&gt;|&lt;x|a<&lt;&lt;|a&amp;");
}

TEST(JinjaPythonSemantics, SafeStringMethodsAndTildeAsMarkupsafe) {
  EXPECT_EQ(R("{{ (\"%s\"|safe) % \"<\" }}|{{ (\"a\"|safe).join([\"<\",\">\"]) }}|{{ (\"x\"|safe).replace(\"x\",\"<\") }}|{{ \"<&>\"|forceescape }}|{{ (\"a\"|safe) ~ \"<\" }}"),
            "&lt;|&lt;a&gt;|&lt;|&lt;&amp;&gt;|a<");
}

TEST(JinjaPythonSemantics, StriptagsAndEscapingTwice) {
  EXPECT_EQ(R("[{{ \"<a href='x'>link</a>  &amp;\\n more <!-- c --> text\"|striptags }}]|{{ \"<\"|e|e }}"),
            "[link & more text]|&lt;");
}

}  // namespace
}  // namespace lifeline::jinja
